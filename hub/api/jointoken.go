package api

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
)

// Join tokens have the form "R1<ca>::<id>.<secret>" (after k3s' secure
// token format): <ca> is the lower-hex sha256 of the hub CA certificate (DER),
// so a joining member can verify the hub before trusting it; <id> (8 hex)
// names the token in the state; <secret> (32 hex) is checked against the
// stored sha256.
var joinTokenRE = regexp.MustCompile(`^R1([0-9a-f]{64})::([0-9a-f]{8})\.([0-9a-f]{32})$`)

// JoinToken is a parsed join token.
type JoinToken struct {
	// CAFingerprint is the lower-hex sha256 of the CA certificate DER.
	CAFingerprint string
	ID, Secret    string
}

// String formats the token.
func (t JoinToken) String() string { return "R1" + t.CAFingerprint + "::" + t.ID + "." + t.Secret }

// SecretSHA256 is the lower-hex sha256 of the secret, as stored.
func (t JoinToken) SecretSHA256() string {
	h := sha256.Sum256([]byte(t.Secret))
	return hex.EncodeToString(h[:])
}

// ParseJoinToken parses s; the error says which part is malformed.
func ParseJoinToken(s string) (JoinToken, error) {
	m := joinTokenRE.FindStringSubmatch(s)
	if m == nil {
		return JoinToken{}, fmt.Errorf("malformed join token: want R1<64 hex>::<8 hex>.<32 hex> as printed by `roostctl hub join`")
	}
	return JoinToken{CAFingerprint: m[1], ID: m[2], Secret: m[3]}, nil
}

// newJoinToken makes a token with fresh random id and secret.
func newJoinToken(caFingerprint string) (JoinToken, error) {
	return joinTokenFrom(caFingerprint, rand.Reader)
}

// joinTokenFrom makes a token whose id and secret are the next 20 bytes of
// src (random, or derived from a request ID: derivedSource).
func joinTokenFrom(caFingerprint string, src io.Reader) (JoinToken, error) {
	b := make([]byte, 20)
	if _, err := io.ReadFull(src, b); err != nil {
		return JoinToken{}, err
	}
	return JoinToken{CAFingerprint: caFingerprint, ID: hex.EncodeToString(b[:4]), Secret: hex.EncodeToString(b[4:])}, nil
}
