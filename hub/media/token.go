package media

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DefaultTTL is how long a download token works: long enough for a BMC to
// fetch an ISO over a slow management network, short enough that a URL in
// a BMC's log is soon worthless.
const DefaultTTL = 30 * time.Minute

// Errors of Verify.
var (
	ErrMalformed    = errors.New("malformed download token")
	ErrExpired      = errors.New("download token expired")
	ErrBadSignature = errors.New("download token signature does not verify")
)

// Key derives the token key from the hub CA's private key (PEM), which
// every member holds, so a token made on the leader verifies on any
// member and stops verifying when the CA changes. The key never leaves
// the hub.
func Key(caPrivateKeyPEM []byte) []byte {
	m := hmac.New(sha256.New, caPrivateKeyPEM)
	m.Write([]byte("roost media download token v1"))
	return m.Sum(nil)
}

// Token is a download token for the blob digest (64 hex characters) and
// the Server named server, valid until expires (second precision):
// "EXPIRES.DIGEST.MAC", where EXPIRES is Unix seconds and MAC the hex
// HMAC-SHA256 over the server name, digest and expiry. It holds no secret
// but the MAC.
func Token(key []byte, server, digest string, expires time.Time) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	return exp + "." + digest + "." + mac(key, server, digest, exp)
}

func mac(key []byte, server, digest, exp string) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s\n%s\n%s", server, digest, exp)
	return hex.EncodeToString(m.Sum(nil))
}

// Verify checks token for server at now and returns the digest it grants.
// Errors: ErrMalformed, ErrBadSignature (forged, or made for another
// Server: the name is under the MAC), ErrExpired.
func Verify(key []byte, server, token string, now time.Time) (digest string, err error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(parts[1]) != 64 || len(parts[2]) != 64 {
		return "", ErrMalformed
	}
	exp, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return "", ErrMalformed
	}
	want := mac(key, server, parts[1], parts[0])
	if !hmac.Equal([]byte(want), []byte(parts[2])) {
		return "", ErrBadSignature
	}
	if !now.Before(time.Unix(exp, 0)) {
		return "", ErrExpired
	}
	return parts[1], nil
}
