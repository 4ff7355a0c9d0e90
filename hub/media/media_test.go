package media

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 22, 0, 0, 0, time.UTC)

func TestTokenGoodForOneServerUntilItExpires(t *testing.T) {
	key := Key([]byte("-----BEGIN PRIVATE KEY-----\nca key\n-----END PRIVATE KEY-----\n"))
	digest := strings.Repeat("ab", 32)
	tok := Token(key, "r12u7", digest, t0.Add(DefaultTTL))
	if got, err := Verify(key, "r12u7", tok, t0); err != nil || got != digest {
		t.Fatalf("Verify = %q, %v; want the digest", got, err)
	}
	if _, err := Verify(key, "r12u7", tok, t0.Add(DefaultTTL)); !errors.Is(err, ErrExpired) {
		t.Fatalf("at expiry: %v, want ErrExpired", err)
	}
	if _, err := Verify(key, "r12u8", tok, t0); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("for another server: %v, want ErrBadSignature", err)
	}
	if _, err := Verify(Key([]byte("another CA")), "r12u7", tok, t0); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("under another CA: %v, want ErrBadSignature", err)
	}
	// A token whose expiry or digest was changed does not verify.
	parts := strings.SplitN(tok, ".", 3)
	later := fmt.Sprint(t0.Add(24*time.Hour).Unix()) + "." + parts[1] + "." + parts[2]
	if _, err := Verify(key, "r12u7", later, t0); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("extended token: %v, want ErrBadSignature", err)
	}
	other := parts[0] + "." + strings.Repeat("cd", 32) + "." + parts[2]
	if _, err := Verify(key, "r12u7", other, t0); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("token for another image: %v, want ErrBadSignature", err)
	}
	for _, bad := range []string{"", "x", "1.2.3", tok + ".4"} {
		if _, err := Verify(key, "r12u7", bad, t0); !errors.Is(err, ErrMalformed) {
			t.Errorf("Verify(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

func TestHandler(t *testing.T) {
	dir := t.TempDir()
	iso := []byte("CD001 an enrollment image")
	sum := sha256.Sum256(iso)
	digest := hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(dir, digest), iso, 0o600); err != nil {
		t.Fatal(err)
	}
	key := Key([]byte("ca key"))
	now := t0
	h := &Handler{
		Key: func() []byte { return key },
		Open: func(d string) (*os.File, int64, error) {
			f, err := os.Open(filepath.Join(dir, d))
			if err != nil {
				return nil, 0, err
			}
			st, _ := f.Stat()
			return f, st.Size(), nil
		},
		Now: func() time.Time { return now },
	}
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(url string, hdr ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if len(hdr) == 2 {
			req.Header.Set(hdr[0], hdr[1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tok := Token(key, "r12u7", digest, t0.Add(DefaultTTL))
	if code, body := get(URL(srv.URL, "r12u7", tok)); code != http.StatusOK || body != string(iso) {
		t.Fatalf("GET = %d %q", code, body)
	}
	if code, body := get(URL(srv.URL, "r12u7", tok), "Range", "bytes=0-4"); code != http.StatusPartialContent || body != "CD001" {
		t.Fatalf("ranged GET = %d %q", code, body)
	}
	if code, _ := get(URL(srv.URL, "r12u8", tok)); code != http.StatusForbidden {
		t.Fatalf("another server's URL with the token: %d, want 403", code)
	}
	missing := Token(key, "r12u7", strings.Repeat("00", 32), t0.Add(DefaultTTL))
	if code, _ := get(URL(srv.URL, "r12u7", missing)); code != http.StatusNotFound {
		t.Fatalf("image not stored: %d, want 404", code)
	}
	now = t0.Add(DefaultTTL + time.Second)
	if code, body := get(URL(srv.URL, "r12u7", tok)); code != http.StatusForbidden || !strings.Contains(body, "expired") {
		t.Fatalf("expired token: %d %q, want 403 expired", code, body)
	}
	key = nil
	if code, _ := get(URL(srv.URL, "r12u7", tok)); code != http.StatusServiceUnavailable {
		t.Fatalf("no CA: %d, want 503", code)
	}
}
