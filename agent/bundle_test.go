package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// TestWriteBundleBounds: an entry that fails is named in errors.txt (with
// what it still collected written), one cut at its bound is said to be,
// and one that would pass the bundle's bound is left out, naming the
// bound; the archive stays valid and within maxBytes.
func TestWriteBundleBounds(t *testing.T) {
	random := make([]byte, 300<<10) // does not compress
	_, _ = rand.Read(random)
	fixed := func(b []byte, truncated bool, err error) func(context.Context) ([]byte, bool, error) {
		return func(context.Context) ([]byte, bool, error) { return b, truncated, err }
	}
	entries := []bundleEntry{
		{"a.txt", fixed([]byte("hello\n"), false, nil)},
		{"failed.txt", fixed(nil, false, errors.New("exit status 1: boom"))},
		{"partial.txt", fixed([]byte("some\n"), false, errors.New("exit status 2"))},
		{"cut.txt", fixed([]byte("cut"), true, nil)},
		{"big.bin", fixed(random, false, nil)},
		{"after.txt", fixed([]byte("after\n"), false, nil)},
	}
	var out bytes.Buffer
	const maxBytes = 256 << 10
	if err := writeBundle(context.Background(), &out, entries, time.Unix(0, 0), maxBytes); err != nil {
		t.Fatal(err)
	}
	if out.Len() > maxBytes {
		t.Errorf("bundle of %d bytes, bound %d", out.Len(), maxBytes)
	}
	gz, err := gzip.NewReader(&out)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	got := map[string]string{}
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
		names = append(names, h.Name)
	}
	if want := "a.txt partial.txt cut.txt after.txt errors.txt"; strings.Join(names, " ") != want {
		t.Errorf("entries %q, want %q", names, want)
	}
	for _, want := range []string{"failed.txt: exit status 1: boom\n", "partial.txt: exit status 2\n", "cut.txt: cut at 3 bytes\n",
		"big.bin: left out: 307200 bytes would pass the bundle's bound of 262144 bytes\n"} {
		if !strings.Contains(got[BundleErrors], want) {
			t.Errorf("errors.txt lacks %q:\n%s", want, got[BundleErrors])
		}
	}
}
