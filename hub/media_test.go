package hub_test

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/media"
)

// TestVirtualMediaDownloadToken: the hub serves an enrollment image over
// HTTPS (--media-addr) to whoever presents a token made for that Server
// (a BMC presents no client certificate), and refuses the token for
// another Server, once expired, and for an image it does not name.
func TestVirtualMediaDownloadToken(t *testing.T) {
	h := startHub(t, t.TempDir(), hub.Options{MediaAddr: "127.0.0.1:0"})
	waitFor(t, "the hub CA", func() bool { return h.MediaKey() != nil })
	iso := []byte("CD001 an enrollment image for r12u7")
	sum := sha256.Sum256(iso)
	digest := hex.EncodeToString(sum[:])
	if err := h.PutBlob(digest, iso); err != nil {
		t.Fatal(err)
	}
	url, err := h.MediaURL("r12u7", digest)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Fatalf("media URL %s", url)
	}
	// Like many BMCs, the client does not check the hub's certificate.
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a BMC's view
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(url); code != http.StatusOK || body != string(iso) {
		t.Fatalf("GET with the token: %d %q", code, body)
	}
	other := strings.Replace(url, "/r12u7/", "/r12u8/", 1)
	if code, _ := get(other); code != http.StatusForbidden {
		t.Fatalf("the token for another server: %d, want 403", code)
	}
	base := url[:strings.Index(url, media.PathPrefix)]
	expired := media.URL(base, "r12u7", media.Token(h.MediaKey(), "r12u7", digest, time.Now().Add(-time.Second)))
	if code, body := get(expired); code != http.StatusForbidden || !strings.Contains(body, "expired") {
		t.Fatalf("an expired token: %d %q, want 403 expired", code, body)
	}
	forged := media.URL(base, "r12u7", media.Token([]byte("not the hub's key"), "r12u7", digest, time.Now().Add(time.Hour)))
	if code, _ := get(forged); code != http.StatusForbidden {
		t.Fatalf("a forged token: %d, want 403", code)
	}
}
