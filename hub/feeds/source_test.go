package feeds

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roostfleet/roost/hub/blobs"
	"github.com/roostfleet/roost/imagebuilder/feed"
)

// An artifact download interrupted halfway resumes from the stored bytes
// with a Range request, and a blob of the wrong size is refused before
// anything is stored.
func TestHTTPSourceResumes(t *testing.T) {
	dir := t.TempDir()
	content := strings.Repeat("0123456789", 1000)
	sum := sha256.Sum256([]byte(content))
	digest := hex.EncodeToString(sum[:])
	p := filepath.Join(dir, filepath.FromSlash(feed.BlobPath(digest)))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	var ranges []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ranges = append(ranges, r.Header.Get("Range"))
		http.FileServer(http.Dir(dir)).ServeHTTP(w, r)
	}))
	defer srv.Close()
	src, err := NewSource(srv.URL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := blobs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The first 4,000 bytes arrived before the connection dropped.
	if _, err := store.Append(digest, int64(len(content)), 0, strings.NewReader(content[:4000])); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Fill(context.Background(), digest, []blobs.Source{blobSource{src: src, sizes: map[string]int64{digest: int64(len(content))}}}); err != nil {
		t.Fatal(err)
	}
	if len(ranges) != 1 || ranges[0] != "bytes=4000-" {
		t.Errorf("requests with Range %q, want one from byte 4000", ranges)
	}
	if ok, n, _ := store.Stat(digest); !ok || n != int64(len(content)) {
		t.Errorf("stored %v %d", ok, n)
	}

	other, err := blobs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.Fill(context.Background(), digest, []blobs.Source{blobSource{src: src, sizes: map[string]int64{digest: 10}}})
	if err == nil || !strings.Contains(err.Error(), "the signed manifest says 10") {
		t.Errorf("wrong size: %v", err)
	}
	if ok, n, _ := other.Stat(digest); ok || n != 0 {
		t.Errorf("a blob of the wrong size left %d bytes", n)
	}
	if _, _, err := src.Open(context.Background(), "nope.json", 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := src.ReadFile(context.Background(), feed.BlobPath(digest), 100); err == nil {
		t.Error("ReadFile read past its limit")
	}
}
