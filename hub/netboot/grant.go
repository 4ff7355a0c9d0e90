package netboot

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Errors of Verify. Their text is what a refused server's HTTP client
// shows (403), so it says what to do.
var (
	ErrMalformed    = errors.New("malformed network boot URL: copy the whole URL 'roostctl netboot url' printed")
	ErrBadSignature = errors.New("network boot URL signature does not verify: it was altered, or made before the hub CA changed; make a new one with 'roostctl netboot url'")
	ErrExpired      = errors.New("network boot URL expired: make a new one with 'roostctl netboot url'")
)

// Key derives the grant key from the hub CA's private key (PEM), which
// every member holds: a grant made on one member verifies on all, and none
// verifies once the CA changes. It differs from hub/media's key, so a
// download token is never a grant.
func Key(caPrivateKeyPEM []byte) []byte {
	m := hmac.New(sha256.New, caPrivateKeyPEM)
	m.Write([]byte("roost netboot grant v1"))
	return m.Sum(nil)
}

// Grant is what a network boot URL lets its holder boot: the enrollment
// token the config carries, the release (by ImageRelease name, or the
// newest of a channel at each boot) and until when.
type Grant struct {
	// TokenID is the name of the EnrollmentToken (6 characters).
	TokenID string
	// Release is the ImageRelease name ("v2026-11-0"), or
	Release string
	// Channel is the channel whose newest release boots.
	Channel string
	// Expires is when the URL stops working (second precision).
	Expires time.Time
}

// label is a DNS-1123 label: token ids, ImageRelease names and channels.
var label = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// macLen is the length of the MAC in a grant: 16 bytes of HMAC-SHA256 in
// unpadded base64url, which keeps boot URLs under the 128 bytes of the
// BOOTP file field a DHCP server may put them in.
const macLen = 22

// selector is "r-NAME" for a release, "c-NAME" for a channel.
func (g Grant) selector() string {
	if g.Channel != "" {
		return "c-" + g.Channel
	}
	return "r-" + g.Release
}

// Sign encodes g as "EXPIRES.TOKENID.SELECTOR.MAC": EXPIRES in Unix
// seconds, SELECTOR "r-RELEASE" or "c-CHANNEL", MAC 16 bytes of
// HMAC-SHA256 under key over the rest, base64url. It fails when a field
// is not a DNS label or both or neither of Release and Channel are set.
func Sign(key []byte, g Grant) (string, error) {
	if (g.Release == "") == (g.Channel == "") {
		return "", errors.New("netboot grant: give exactly one of a release and a channel")
	}
	for what, v := range map[string]string{"token id": g.TokenID, "release": g.Release, "channel": g.Channel} {
		if v != "" && !label.MatchString(v) {
			return "", fmt.Errorf("netboot grant: %s %q is not a DNS label", what, v)
		}
	}
	body := strconv.FormatInt(g.Expires.Unix(), 10) + "." + g.TokenID + "." + g.selector()
	return body + "." + mac(key, body), nil
}

func mac(key []byte, body string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// Verify checks a signed grant at now and returns it. Errors: ErrMalformed,
// ErrBadSignature (forged, altered, or signed under another CA),
// ErrExpired.
func Verify(key []byte, signed string, now time.Time) (Grant, error) {
	parts := strings.Split(signed, ".")
	if len(parts) != 4 || len(parts[3]) != macLen {
		return Grant{}, ErrMalformed
	}
	exp, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || !label.MatchString(parts[1]) || len(parts[2]) < 3 || !label.MatchString(parts[2][2:]) {
		return Grant{}, ErrMalformed
	}
	body := strings.Join(parts[:3], ".")
	if !hmac.Equal([]byte(mac(key, body)), []byte(parts[3])) {
		return Grant{}, ErrBadSignature
	}
	g := Grant{TokenID: parts[1], Expires: time.Unix(exp, 0).UTC()}
	switch parts[2][:2] {
	case "r-":
		g.Release = parts[2][2:]
	case "c-":
		g.Channel = parts[2][2:]
	default:
		return Grant{}, ErrMalformed
	}
	if !now.Before(g.Expires) {
		return Grant{}, ErrExpired
	}
	return g, nil
}
