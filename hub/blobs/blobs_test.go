package blobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func digestOf(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readBlob(t *testing.T, s *Store, d string) []byte {
	t.Helper()
	f, size, err := s.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != size {
		t.Fatalf("size %d, read %d bytes", size, len(b))
	}
	return b
}

func TestAppendWhole(t *testing.T) {
	s := openStore(t)
	data := bytes.Repeat([]byte("roost"), 1000)
	d := digestOf(data)
	n, err := s.Append(d, int64(len(data)), 0, bytes.NewReader(data))
	if err != nil || n != int64(len(data)) {
		t.Fatalf("Append = %d, %v", n, err)
	}
	complete, size, err := s.Stat(d)
	if err != nil || !complete || size != int64(len(data)) {
		t.Fatalf("Stat = %v %d %v", complete, size, err)
	}
	if got := readBlob(t, s, d); !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
	if _, err := os.Stat(s.partialPath(d)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("partial left behind: %v", err)
	}
	// Appending a complete blob again is a no-op.
	if n, err := s.Append(d, int64(len(data)), 0, strings.NewReader("garbage")); err != nil || n != int64(len(data)) {
		t.Fatalf("re-Append = %d, %v", n, err)
	}
}

func TestEmptyBlob(t *testing.T) {
	s := openStore(t)
	d := digestOf(nil)
	if _, err := s.Append(d, 0, 0, bytes.NewReader(nil)); err != nil {
		t.Fatal(err)
	}
	if complete, size, _ := s.Stat(d); !complete || size != 0 {
		t.Fatalf("Stat = %v %d", complete, size)
	}
}

// failingReader yields data, then fails like a broken stream.
type failingReader struct{ r io.Reader }

var errBroken = errors.New("stream broken")

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errBroken
	}
	return n, err
}

func TestResume(t *testing.T) {
	s := openStore(t)
	data := bytes.Repeat([]byte("0123456789"), 500)
	d := digestOf(data)
	size := int64(len(data))

	n, err := s.Append(d, size, 0, &failingReader{bytes.NewReader(data[:1234])})
	if !errors.Is(err, errBroken) || n != 1234 {
		t.Fatalf("broken Append = %d, %v", n, err)
	}
	complete, have, err := s.Stat(d)
	if err != nil || complete || have != 1234 {
		t.Fatalf("Stat after break = %v %d %v", complete, have, err)
	}
	if _, _, err := s.Open(d); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open of a partial blob: %v, want ErrNotFound", err)
	}
	// A wrong offset is refused and names the right one.
	if _, err := s.Append(d, size, 0, bytes.NewReader(data)); !errors.Is(err, ErrOffset) || !strings.Contains(err.Error(), "resume at 1234") {
		t.Fatalf("wrong offset: %v", err)
	}
	// Two more pieces complete it.
	if n, err := s.Append(d, size, have, bytes.NewReader(data[have:3000])); err != nil || n != 3000 {
		t.Fatalf("second piece = %d, %v", n, err)
	}
	if n, err := s.Append(d, size, 3000, bytes.NewReader(data[3000:])); err != nil || n != size {
		t.Fatalf("last piece = %d, %v", n, err)
	}
	if got := readBlob(t, s, d); !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
}

func TestMismatch(t *testing.T) {
	s := openStore(t)
	data := []byte("the real content")
	d := digestOf(data)
	bad := []byte("the fake content")
	_, err := s.Append(d, int64(len(bad)), 0, bytes.NewReader(bad))
	if !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("Append = %v, want ErrDigestMismatch", err)
	}
	if !strings.Contains(err.Error(), d) || !strings.Contains(err.Error(), digestOf(bad)) {
		t.Fatalf("error does not name both digests: %v", err)
	}
	if complete, have, _ := s.Stat(d); complete || have != 0 {
		t.Fatalf("after mismatch Stat = %v %d, want nothing stored", complete, have)
	}
	// The right content then goes in from offset 0.
	if _, err := s.Append(d, int64(len(data)), 0, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
}

func TestTooLarge(t *testing.T) {
	s := openStore(t)
	data := []byte("0123456789")
	d := digestOf(data)
	if _, err := s.Append(d, 10, 0, bytes.NewReader(data[:4])); err != nil {
		t.Fatal(err)
	}
	n, err := s.Append(d, 10, 4, bytes.NewReader(append(data[4:], 'x')))
	if !errors.Is(err, ErrTooLarge) || n != 4 {
		t.Fatalf("Append = %d, %v; want 4, ErrTooLarge", n, err)
	}
	if _, have, _ := s.Stat(d); have != 4 {
		t.Fatalf("stored %d bytes, want the 4 before the bad call", have)
	}
}

func TestBadDigest(t *testing.T) {
	s := openStore(t)
	for _, d := range []string{"", "abc", strings.Repeat("A", 64), strings.Repeat("g", 64), "sha256:" + strings.Repeat("a", 64), "../" + strings.Repeat("a", 61)} {
		if _, _, err := s.Stat(d); !errors.Is(err, ErrInvalidDigest) {
			t.Errorf("Stat(%q) = %v", d, err)
		}
		if _, err := s.Append(d, 1, 0, strings.NewReader("x")); !errors.Is(err, ErrInvalidDigest) {
			t.Errorf("Append(%q) = %v", d, err)
		}
		if _, _, err := s.Open(d); !errors.Is(err, ErrInvalidDigest) {
			t.Errorf("Open(%q) = %v", d, err)
		}
	}
	if _, err := s.Append(strings.Repeat("a", 64), 5, 6, strings.NewReader("")); !errors.Is(err, ErrOffset) {
		t.Errorf("offset past size: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(s.Dir(), "uploads")); len(entries) != 0 {
		t.Errorf("uploads/ holds %d files after refused calls", len(entries))
	}
}

// blockingReader serves data and then blocks until release is closed.
type blockingReader struct {
	data    io.Reader
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockingReader) Read(p []byte) (int, error) {
	n, err := b.data.Read(p)
	if err == io.EOF {
		b.once.Do(func() { close(b.started) })
		<-b.release
	}
	return n, err
}

func TestConcurrentUploadsOfOneDigest(t *testing.T) {
	s := openStore(t)
	data := bytes.Repeat([]byte("x"), 1<<16)
	d := digestOf(data)
	size := int64(len(data))

	// While one upload is running, a second one of the same digest is
	// refused with ErrBusy and does not disturb it.
	br := &blockingReader{data: bytes.NewReader(data[:100]), started: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error)
	go func() {
		_, err := s.Append(d, size, 0, br)
		done <- err
	}()
	<-br.started
	if _, err := s.Append(d, size, 0, bytes.NewReader(data)); !errors.Is(err, ErrBusy) {
		t.Fatalf("second upload: %v, want ErrBusy", err)
	}
	close(br.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Many racing uploads: each finishes or is told to retry, and the blob
	// ends complete and intact.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				_, have, err := s.Stat(d)
				if err != nil {
					t.Error(err)
					return
				}
				_, err = s.Append(d, size, have, bytes.NewReader(data[have:]))
				if err == nil {
					return
				}
				if !errors.Is(err, ErrBusy) && !errors.Is(err, ErrOffset) {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := readBlob(t, s, d); !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
}
