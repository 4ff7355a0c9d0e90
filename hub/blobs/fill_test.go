package blobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memSource serves data from memory; cut > 0 ends each read after cut
// bytes, corrupt flips the content, missing answers ErrNotFound, gate
// (when set) delays Open until it is closed.
type memSource struct {
	name    string
	data    []byte
	cut     int64
	corrupt bool
	missing bool
	gate    chan struct{}
	opens   atomic.Int32
	offsets []int64
	mu      sync.Mutex
}

func (m *memSource) String() string { return m.name }

func (m *memSource) Open(ctx context.Context, digest string, offset int64) (int64, io.ReadCloser, error) {
	m.opens.Add(1)
	m.mu.Lock()
	m.offsets = append(m.offsets, offset)
	m.mu.Unlock()
	if m.gate != nil {
		select {
		case <-m.gate:
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
	if m.missing {
		return 0, nil, fmt.Errorf("%w: sha256 %s", ErrNotFound, digest)
	}
	data := m.data
	if m.corrupt {
		data = bytes.ToUpper(data)
	}
	if offset > int64(len(data)) {
		// As MemberService.FetchBlob answers: the size, no data.
		return int64(len(data)), io.NopCloser(bytes.NewReader(nil)), nil
	}
	rest := data[offset:]
	if m.cut > 0 && int64(len(rest)) > m.cut {
		rest = rest[:m.cut]
	}
	return int64(len(data)), io.NopCloser(bytes.NewReader(rest)), nil
}

func TestFillFromSources(t *testing.T) {
	s := openStore(t)
	data := []byte(strings.Repeat("roost blob content ", 500))
	d := digestOf(data)

	missing := &memSource{name: "hub-b", missing: true}
	broken := &memSource{name: "hub-c", data: data, cut: 1000}
	bad := &memSource{name: "hub-d", data: data, corrupt: true}
	good := &memSource{name: "hub-e", data: data}
	size, err := s.Fill(context.Background(), d, []Source{missing, broken, bad, good})
	if err != nil || size != int64(len(data)) {
		t.Fatalf("Fill = %d, %v", size, err)
	}
	if got := readBlob(t, s, d); !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
	// hub-c's 1000 bytes were kept and hub-d resumed after them; its
	// content did not match, so hub-e started over.
	if broken.offsets[0] != 0 || bad.offsets[0] != 1000 || good.offsets[0] != 0 {
		t.Errorf("offsets: broken %v, bad %v, good %v", broken.offsets, bad.offsets, good.offsets)
	}

	// Complete: no source is asked.
	again := &memSource{name: "hub-f", data: data}
	if size, err := s.Fill(context.Background(), d, []Source{again}); err != nil || size != int64(len(data)) || again.opens.Load() != 0 {
		t.Fatalf("Fill of a stored blob = %d, %v, %d opens", size, err, again.opens.Load())
	}
}

func TestFillResumesPartialUpload(t *testing.T) {
	s := openStore(t)
	data := bytes.Repeat([]byte("x"), 5000)
	d := digestOf(data)
	if _, err := s.Append(d, int64(len(data)), 0, bytes.NewReader(data[:1234])); err != nil {
		t.Fatal(err)
	}
	src := &memSource{name: "hub-b", data: data}
	if _, err := s.Fill(context.Background(), d, []Source{src}); err != nil {
		t.Fatal(err)
	}
	if src.offsets[0] != 1234 {
		t.Fatalf("fetched from %v, want 1234", src.offsets)
	}

	// A partial upload longer than the blob is dropped and fetched again.
	short := []byte("short blob")
	ds := digestOf(short)
	if _, err := s.Append(ds, 100, 0, bytes.NewReader(bytes.Repeat([]byte("y"), 50))); err != nil {
		t.Fatal(err)
	}
	src = &memSource{name: "hub-b", data: short}
	if _, err := s.Fill(context.Background(), ds, []Source{src}); err != nil {
		t.Fatal(err)
	}
	if got := readBlob(t, s, ds); !bytes.Equal(got, short) || fmt.Sprint(src.offsets) != "[50 0]" {
		t.Fatalf("got %q, offsets %v", got, src.offsets)
	}
}

func TestFillNotFound(t *testing.T) {
	s := openStore(t)
	data := []byte("nobody has me")
	d := digestOf(data)
	_, err := s.Fill(context.Background(), d, []Source{&memSource{name: "hub-b", missing: true}, &memSource{name: "hub-c", data: data, cut: 4}})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "hub-b") || !strings.Contains(err.Error(), "hub-c: sent 4 of 13 bytes") {
		t.Fatalf("Fill = %v", err)
	}
	// hub-c's 4 bytes are kept for the next try.
	if complete, have, _ := s.Stat(d); complete || have != 4 {
		t.Fatalf("Stat = %v %d", complete, have)
	}
	if _, err := s.Fill(context.Background(), d, nil); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no other hub member") {
		t.Fatalf("Fill without sources = %v", err)
	}
	if _, err := s.Fill(context.Background(), "ABC", nil); !errors.Is(err, ErrInvalidDigest) {
		t.Fatalf("bad digest: %v", err)
	}
	// A push in progress makes the fill wait for nothing: ErrBusy.
	if !s.lock(d) {
		t.Fatal("lock")
	}
	_, err = s.Fill(context.Background(), d, []Source{&memSource{name: "hub-b", data: data}})
	s.unlock(d)
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("Fill during a push = %v", err)
	}
}

func TestFillSharedAndDetached(t *testing.T) {
	s := openStore(t)
	data := bytes.Repeat([]byte("z"), 3000)
	d := digestOf(data)
	src := &memSource{name: "hub-b", data: data, gate: make(chan struct{})}

	// The first caller gives up; the fetch goes on and the others share it.
	ctx, cancel := context.WithCancel(context.Background())
	firstDone := make(chan error)
	go func() { _, err := s.Fill(ctx, d, []Source{src}); firstDone <- err }()
	for src.opens.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-firstDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = s.Fill(context.Background(), d, []Source{src}) }()
	}
	time.Sleep(20 * time.Millisecond)
	close(src.gate)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if n := src.opens.Load(); n != 1 {
		t.Errorf("%d fetches, want 1 shared", n)
	}
	if _, err := os.Stat(s.blobPath(d)); err != nil {
		t.Fatal(err)
	}
}
