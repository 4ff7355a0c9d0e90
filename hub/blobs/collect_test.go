package blobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// store puts data into s completely and returns its digest.
func store(t *testing.T, s *Store, data []byte) string {
	t.Helper()
	d := digestOf(data)
	if _, err := s.Append(d, int64(len(data)), 0, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	return d
}

// age sets path's modification time to by before now.
func age(t *testing.T, path string, by time.Duration) {
	t.Helper()
	old := time.Now().Add(-by)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

func keepOnly(digests ...string) func(string) bool {
	return func(d string) bool {
		for _, k := range digests {
			if k == d {
				return true
			}
		}
		return false
	}
}

func TestCollectBlobs(t *testing.T) {
	s := openStore(t)
	kept := store(t, s, []byte("kernel of the kept release"))
	old := store(t, s, []byte("initrd of a deleted release"))
	fresh := store(t, s, []byte("artifact pushed just before its release"))
	for _, d := range []string{kept, old} {
		age(t, s.blobPath(d), 2*time.Hour)
	}
	// Files that are not blobs are left alone, whatever their age.
	stray := filepath.Join(s.Dir(), "sha256", "README")
	if err := os.WriteFile(stray, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	age(t, stray, 2*time.Hour)

	st, err := s.Collect(CollectOptions{Keep: keepOnly(kept), BlobsBefore: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if want := (CollectStats{Blobs: 1, BlobBytes: int64(len("initrd of a deleted release"))}); st != want {
		t.Fatalf("stats = %+v, want %+v", st, want)
	}
	if complete, _, _ := s.Stat(old); complete {
		t.Fatal("unreferenced old blob kept")
	}
	if _, _, err := s.Open(old); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open of a collected blob: %v, want ErrNotFound", err)
	}
	for _, d := range []string{kept, fresh} {
		if complete, _, _ := s.Stat(d); !complete {
			t.Fatalf("blob %s removed", d[:12])
		}
	}
	if !exists(stray) {
		t.Fatal("stray file removed")
	}

	// A collected blob can be pushed again.
	if d := store(t, s, []byte("initrd of a deleted release")); d != old {
		t.Fatal("digest changed")
	}

	// Without BlobsBefore no complete blob goes; BlobsBefore needs Keep.
	age(t, s.blobPath(fresh), 2*time.Hour)
	if st, err := s.Collect(CollectOptions{Keep: keepOnly()}); err != nil || st != (CollectStats{}) {
		t.Fatalf("Collect without cutoffs = %+v, %v", st, err)
	}
	if _, err := s.Collect(CollectOptions{BlobsBefore: time.Now()}); err == nil {
		t.Fatal("Collect with BlobsBefore and no Keep succeeded")
	}
	if !exists(s.blobPath(fresh)) {
		t.Fatal("blob removed by a refused Collect")
	}
}

func TestCollectPartials(t *testing.T) {
	s := openStore(t)
	data := bytes.Repeat([]byte("p"), 1000)
	stale, fresh := digestOf(data), digestOf(append([]byte("q"), data...))
	if _, err := s.Append(stale, 1000, 0, bytes.NewReader(data[:300])); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(fresh, 1001, 0, bytes.NewReader(data[:200])); err != nil {
		t.Fatal(err)
	}
	age(t, s.partialPath(stale), 25*time.Hour)
	age(t, s.partialPath(fresh), 23*time.Hour)
	// Keep does not protect partial uploads, and a BlobsBefore of zero
	// leaves complete blobs alone.
	kept := store(t, s, []byte("complete"))
	age(t, s.blobPath(kept), 48*time.Hour)
	st, err := s.Collect(CollectOptions{Keep: keepOnly(stale), PartialsBefore: time.Now().Add(-DefaultPartialGrace)})
	if err != nil {
		t.Fatal(err)
	}
	if want := (CollectStats{Partials: 1, PartialBytes: 300}); st != want {
		t.Fatalf("stats = %+v, want %+v", st, want)
	}
	if _, have, _ := s.Stat(stale); have != 0 {
		t.Fatalf("stale partial upload kept (%d bytes)", have)
	}
	if _, have, _ := s.Stat(fresh); have != 200 {
		t.Fatalf("fresh partial upload: %d bytes, want 200", have)
	}
	if !exists(s.blobPath(kept)) {
		t.Fatal("complete blob removed")
	}
	// The collected upload starts over.
	if _, err := s.Append(stale, 1000, 300, bytes.NewReader(data[300:])); !errors.Is(err, ErrOffset) {
		t.Fatalf("resume of a collected upload: %v, want ErrOffset", err)
	}
	if n, err := s.Append(stale, 1000, 0, bytes.NewReader(data)); err != nil || n != 1000 {
		t.Fatalf("upload again = %d, %v", n, err)
	}
}

func TestCollectSkipsRunningUploadAndFill(t *testing.T) {
	s := openStore(t)
	all := CollectOptions{Keep: keepOnly(), BlobsBefore: time.Now().Add(time.Hour), PartialsBefore: time.Now().Add(time.Hour)}

	// An upload that stalls after writing its first bytes.
	up := bytes.Repeat([]byte("u"), 5000)
	du := digestOf(up)
	br := &blockingReader{data: bytes.NewReader(up[:100]), started: make(chan struct{}), release: make(chan struct{})}
	upDone := make(chan error)
	go func() { _, err := s.Append(du, int64(len(up)), 0, br); upDone <- err }()
	<-br.started

	// A fill that waits for its source, resuming an old partial upload.
	fd := bytes.Repeat([]byte("f"), 4000)
	df := digestOf(fd)
	if _, err := s.Append(df, int64(len(fd)), 0, bytes.NewReader(fd[:1000])); err != nil {
		t.Fatal(err)
	}
	age(t, s.partialPath(df), 48*time.Hour)
	src := &memSource{name: "hub-b", data: fd, gate: make(chan struct{})}
	fillDone := make(chan error)
	go func() { _, err := s.Fill(context.Background(), df, []Source{src}); fillDone <- err }()
	for src.opens.Load() == 0 {
		time.Sleep(time.Millisecond)
	}

	st, err := s.Collect(all)
	if err != nil {
		t.Fatal(err)
	}
	if want := (CollectStats{Busy: 2}); st != want {
		t.Fatalf("stats = %+v, want %+v", st, want)
	}
	if !exists(s.partialPath(du)) || !exists(s.partialPath(df)) {
		t.Fatal("a partial upload in use was removed")
	}
	close(br.release)
	if err := <-upDone; err != nil {
		t.Fatal(err)
	}
	close(src.gate)
	if err := <-fillDone; err != nil {
		t.Fatal(err)
	}
	if got := src.offsets; len(got) != 1 || got[0] != 1000 {
		t.Fatalf("fill fetched from offsets %v, want [1000]", got)
	}
	if got := readBlob(t, s, df); !bytes.Equal(got, fd) {
		t.Fatal("filled content differs")
	}
	// Once they are done, they are fair game.
	if st, err := s.Collect(all); err != nil || st.Blobs != 1 || st.Partials != 1 || st.Busy != 0 {
		t.Fatalf("Collect after the upload and fill = %+v, %v", st, err)
	}
}

func TestTouchSparesBlob(t *testing.T) {
	s := openStore(t)
	d := store(t, s, []byte("re-released artifact"))
	before := func() CollectOptions {
		return CollectOptions{Keep: keepOnly(), BlobsBefore: time.Now().Add(-time.Hour)}
	}

	age(t, s.blobPath(d), 2*time.Hour)
	if size, err := s.Touch(d); err != nil || size != int64(len("re-released artifact")) {
		t.Fatalf("Touch = %d, %v", size, err)
	}
	if st, err := s.Collect(before()); err != nil || st.Blobs != 0 {
		t.Fatalf("Collect after Touch = %+v, %v", st, err)
	}

	// Pushing a stored blob again refreshes it too.
	age(t, s.blobPath(d), 2*time.Hour)
	if n, err := s.Append(d, 20, 0, bytes.NewReader(nil)); err != nil || n != 20 {
		t.Fatalf("re-Append = %d, %v", n, err)
	}
	if st, err := s.Collect(before()); err != nil || st.Blobs != 0 {
		t.Fatalf("Collect after re-Append = %+v, %v", st, err)
	}

	age(t, s.blobPath(d), 2*time.Hour)
	if st, err := s.Collect(before()); err != nil || st.Blobs != 1 {
		t.Fatalf("Collect = %+v, %v", st, err)
	}
	if _, err := s.Touch(d); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Touch of a collected blob: %v, want ErrNotFound", err)
	}
	if _, err := s.Touch("nope"); !errors.Is(err, ErrInvalidDigest) {
		t.Fatalf("Touch of a bad digest: %v", err)
	}
}

func TestOpenReaderSurvivesCollect(t *testing.T) {
	s := openStore(t)
	data := bytes.Repeat([]byte("r"), 1<<16)
	d := store(t, s, data)
	f, _, err := s.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if st, err := s.Collect(CollectOptions{Keep: keepOnly(), BlobsBefore: time.Now().Add(time.Hour)}); err != nil || st.Blobs != 1 {
		t.Fatalf("Collect = %+v, %v", st, err)
	}
	got, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("reading a collected blob opened before: %d bytes, %v", len(got), err)
	}
}

// TestCollectConcurrent races Collect (removing everything it may) with
// uploads, fills, opens and touches of the same digests; run with -race.
// Whatever survives must be intact, and every call fails only as it may.
func TestCollectConcurrent(t *testing.T) {
	s := openStore(t)
	var contents [][]byte
	for i := range 6 {
		contents = append(contents, bytes.Repeat([]byte(fmt.Sprintf("blob %d ", i)), 4000+i))
	}
	src := func(i int) Source { return &memSource{name: "peer", data: contents[i], cut: 5000} }
	stop := make(chan struct{})
	var collected atomic.Int64
	var collector, workers sync.WaitGroup
	collector.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			future := time.Now().Add(time.Hour)
			st, err := s.Collect(CollectOptions{Keep: func(d string) bool { return d == digestOf(contents[0]) }, BlobsBefore: future, PartialsBefore: future})
			if err != nil {
				t.Error(err)
				return
			}
			collected.Add(int64(st.Blobs + st.Partials))
		}
	})
	for w := range 4 {
		workers.Go(func() {
			for n := range 60 {
				i := (w + n) % len(contents)
				data, d := contents[i], digestOf(contents[i])
				switch n % 4 {
				case 0: // upload in two parts
					_, have, err := s.Stat(d)
					if err != nil {
						t.Error(err)
						return
					}
					if have > int64(len(data)) {
						have = 0
					}
					mid := min(have+3000, int64(len(data)))
					_, err = s.Append(d, int64(len(data)), have, bytes.NewReader(data[have:mid]))
					if err == nil {
						_, err = s.Append(d, int64(len(data)), mid, bytes.NewReader(data[mid:]))
					}
					if err != nil && !errors.Is(err, ErrBusy) && !errors.Is(err, ErrOffset) {
						t.Errorf("Append: %v", err)
					}
				case 1:
					if _, err := s.Fill(context.Background(), d, []Source{src(i), src(i)}); err != nil && !errors.Is(err, ErrBusy) && !errors.Is(err, ErrNotFound) {
						t.Errorf("Fill: %v", err)
					}
				case 2:
					f, size, err := s.Open(d)
					if errors.Is(err, ErrNotFound) {
						continue
					}
					if err != nil {
						t.Errorf("Open: %v", err)
						continue
					}
					got, err := io.ReadAll(f)
					f.Close()
					if err != nil || int64(len(got)) != size || !bytes.Equal(got, data) {
						t.Errorf("Open read %d of %d bytes (%v), content equal %v", len(got), size, err, bytes.Equal(got, data))
					}
				case 3:
					if _, err := s.Touch(d); err != nil && !errors.Is(err, ErrNotFound) {
						t.Errorf("Touch: %v", err)
					}
				}
			}
		})
	}
	workers.Wait()
	close(stop)
	collector.Wait()
	t.Logf("collector removed %d files", collected.Load())

	entries, err := os.ReadDir(filepath.Join(s.Dir(), "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(s.Dir(), "sha256", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != e.Name() {
			t.Errorf("blob %s does not match its content", e.Name())
		}
	}
}
