package netboot

import "fmt"

// tokenAlphabet is the alphabet of enrollment token secrets (hub/api).
const tokenAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// Deriver derives n secret bytes for purpose and id from the hub CA key
// (ca.Authority.DeriveSecret).
type Deriver interface {
	DeriveSecret(purpose, id string, n int) ([]byte, error)
}

// Token is the network boot enrollment token named id, "<id>.<secret>":
// its 16-character secret is derived from id with the hub CA key, so the
// hub needs to store only its hash, like any token's, and can still hand
// the token to a server that boots from the network. Each character is
// uniform over the alphabet (rejection sampling).
func Token(d Deriver, id string) (string, error) {
	b, err := d.DeriveSecret("netboot-enrollment-token", id, 256)
	if err != nil {
		return "", err
	}
	out := make([]byte, 0, 16)
	for _, c := range b {
		if int(c) < 256-256%len(tokenAlphabet) {
			out = append(out, tokenAlphabet[int(c)%len(tokenAlphabet)])
			if len(out) == 16 {
				return id + "." + string(out), nil
			}
		}
	}
	return "", fmt.Errorf("netboot token %s: not enough derived bytes", id)
}
