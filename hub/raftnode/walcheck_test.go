package raftnode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// testEntries stores entries 1..n in the WAL under dir, one batch each
// (one StoreLogs call, as Raft stores one command), and closes it.
func testEntries(t *testing.T, dir string, n int) {
	t.Helper()
	s, err := openLogStore(LogStoreWAL, dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if err := s.StoreLog(&raft.Log{Index: uint64(i), Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("entry-%05d-%s", i, strings.Repeat("x", 40)))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// newestSegment returns the path and bytes of the only segment under dir.
func newestSegment(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no segment in %s (%v)", dir, err)
	}
	b, err := os.ReadFile(m[len(m)-1])
	if err != nil {
		t.Fatal(err)
	}
	return m[len(m)-1], b
}

// flip changes the byte at off in path.
func flip(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x41
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// wantDamaged checks that opening the log under dir fails with a
// DamagedError naming path, an offset within [lo, hi] and index idx.
func wantDamaged(t *testing.T, dir, path string, lo, hi int64, idx uint64) *DamagedError {
	t.Helper()
	_, err := openLogStore(LogStoreWAL, dir)
	var d *DamagedError
	if !errors.As(err, &d) {
		t.Fatalf("open after damage: err = %v, want a DamagedError", err)
	}
	if d.File != path || d.Offset < lo || d.Offset > hi || d.FirstIndex > idx || d.LastIndex < idx {
		t.Fatalf("DamagedError %+v\nwant file %s, offset in [%d, %d], indexes including %d", d, path, lo, hi, idx)
	}
	msg := err.Error()
	t.Log(msg)
	for _, want := range []string{path, fmt.Sprintf("byte offset %d", d.Offset), fmt.Sprint(idx), "refuses to start"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not name %q", msg, want)
		}
	}
	return d
}

// entryOffsets returns the file offsets of the entry frames of
// testEntries' segment b, in index order: every frame has the same length
// there, so its header is a fixed 8-byte pattern.
func entryOffsets(t *testing.T, b []byte) []int64 {
	t.Helper()
	i := bytes.Index(b, []byte("entry-00001"))
	if i < 0 {
		t.Fatal("entry 1 not found")
	}
	// The frame header is the last 8-byte-aligned header with type 1 before it.
	start := int64(i) &^ 7
	for ; start >= walFileHeaderLen && !(b[start] == 1 && b[start+1] == 0 && b[start+2] == 0 && b[start+3] == 0); start -= 8 {
	}
	hdr := b[start : start+8]
	var out []int64
	for off := 0; ; {
		j := bytes.Index(b[off:], hdr)
		if j < 0 {
			return out
		}
		out = append(out, int64(off+j))
		off += j + 8
	}
}

func TestCheckWALIntactLogOpens(t *testing.T) {
	dir := t.TempDir()
	testEntries(t, dir, 100)
	s, err := openLogStore(LogStoreWAL, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if last, _ := s.LastIndex(); last != 100 {
		t.Fatalf("last index %d, want 100", last)
	}
	if m, _ := readMark(markPath(filepath.Join(dir, "wal"))); m != 100 {
		t.Fatalf("durable-index mark %d after a clean close, want 100", m)
	}
}

// One byte changed in an entry's data in the middle of the newest segment:
// raft-wal alone would serve the changed entry.
func TestCheckWALRefusesAChangedEntry(t *testing.T) {
	dir := t.TempDir()
	testEntries(t, dir, 100)
	path, b := newestSegment(t, dir)
	off := int64(bytes.Index(b, []byte("entry-00050")))
	flip(t, path, off+3)
	ofs := entryOffsets(t, b)
	d := wantDamaged(t, dir, path, ofs[49], ofs[49], 50)
	if d.FirstIndex != 50 || d.LastIndex != 50 || !strings.Contains(d.Reason, "checksum") {
		t.Fatalf("DamagedError %+v, want index 50 and a checksum", d)
	}
}

// One byte changed in a frame header in the middle of the newest segment:
// raft-wal alone would end the log there, dropping indexes 50–100.
func TestCheckWALRefusesACutLog(t *testing.T) {
	for name, at := range map[string]int64{"type": 0, "length": 5} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			testEntries(t, dir, 100)
			path, b := newestSegment(t, dir)
			ofs := entryOffsets(t, b)
			if len(ofs) != 100 {
				t.Fatalf("found %d entry frames, want 100", len(ofs))
			}
			flip(t, path, ofs[49]+at)
			wantDamaged(t, dir, path, ofs[48], ofs[49]+8, 50)
		})
	}
}

// The last batch damaged after a clean stop is refused too (raft-wal would
// take it for an interrupted write and drop it) …
func TestCheckWALRefusesADamagedLastBatch(t *testing.T) {
	dir := t.TempDir()
	testEntries(t, dir, 100)
	path, b := newestSegment(t, dir)
	flip(t, path, int64(bytes.Index(b, []byte("entry-00100"))))
	d := wantDamaged(t, dir, path, 0, int64(len(b)), 100)
	if !strings.Contains(d.Reason, "stored durably") {
		t.Fatalf("reason %q does not say index 100 was stored durably", d.Reason)
	}
}

// … but a last batch that was never acknowledged (a crash during its
// write: the mark is behind it) is dropped as raft-wal does.
func TestCheckWALAcceptsAnInterruptedLastWrite(t *testing.T) {
	dir := t.TempDir()
	testEntries(t, dir, 100)
	path, b := newestSegment(t, dir)
	flip(t, path, int64(bytes.Index(b, []byte("entry-00100"))))
	var mark [12]byte
	binary.LittleEndian.PutUint64(mark[:8], 99)
	binary.LittleEndian.PutUint32(mark[8:], crcOf(mark[:8]))
	if err := os.WriteFile(markPath(filepath.Join(dir, "wal")), mark[:], 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := openLogStore(LogStoreWAL, dir)
	if err != nil {
		t.Fatalf("open after an interrupted last write: %v", err)
	}
	defer s.Close()
	if last, _ := s.LastIndex(); last != 99 {
		t.Fatalf("last index %d, want 99", last)
	}
}

// A tail truncation (Raft replacing a follower's conflicting suffix)
// lowers the mark before it deletes: the shorter log opens.
func TestCheckWALAfterTailTruncation(t *testing.T) {
	dir := t.TempDir()
	testEntries(t, dir, 100)
	s, err := openLogStore(LogStoreWAL, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(61, 100); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLog(&raft.Log{Index: 61, Term: 2, Type: raft.LogCommand, Data: []byte("replacement")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = openLogStore(LogStoreWAL, dir)
	if err != nil {
		t.Fatalf("reopen after a tail truncation: %v", err)
	}
	defer s.Close()
	var l raft.Log
	if err := s.GetLog(61, &l); err != nil || string(l.Data) != "replacement" {
		t.Fatalf("entry 61: %q %v", l.Data, err)
	}
	// raft-wal v0.4.0 sealed the truncated segment without writing its
	// index, so after a restart its entries could not be read ("sealed
	// segment has no index block", hashicorp/raft-wal#31, fixed in v0.4.1).
	if err := s.GetLog(10, &l); err != nil || !strings.HasPrefix(string(l.Data), "entry-00010") {
		t.Fatalf("entry 10 after a tail truncation and a restart: %q %v", l.Data, err)
	}
	if m, _ := readMark(markPath(filepath.Join(dir, "wal"))); m != 61 {
		t.Fatalf("mark %d, want 61", m)
	}
}

// Sealed segments are verified too (raft-wal reads them through their
// index without any checksum).
func TestCheckWALRefusesADamagedSealedSegment(t *testing.T) {
	dir := t.TempDir()
	meta := &metadb.BoltMetaDB{}
	w, err := raftwal.Open(dir, raftwal.WithMetaStore(meta), raftwal.WithSegmentSize(4096))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 200; i++ {
		if err := w.StoreLog(&raft.Log{Index: uint64(i), Term: 1, Data: []byte(fmt.Sprintf("entry-%05d-%s", i, strings.Repeat("y", 60)))}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	meta.Close()
	if err := checkWAL(dir, 200); err != nil {
		t.Fatalf("intact segments: %v", err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	if len(segs) < 3 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	flip(t, segs[0], int64(bytes.Index(b, []byte("entry-00010"))))
	err = checkWAL(dir, 200)
	var d *DamagedError
	if !errors.As(err, &d) || d.File != segs[0] || d.FirstIndex != 10 {
		t.Fatalf("damaged sealed segment: %v, want a DamagedError for %s, index 10", err, segs[0])
	}
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// BenchmarkCheckWAL measures the start-up check of a full 64 MiB segment
// (1 KiB entries, 64 per batch as Raft stores them under load).
func BenchmarkCheckWAL(b *testing.B) {
	dir := b.TempDir()
	s, err := openLogStore(LogStoreWAL, dir)
	if err != nil {
		b.Fatal(err)
	}
	data := bytes.Repeat([]byte("x"), 1024)
	idx := uint64(1)
	for idx < 60_000 {
		batch := make([]*raft.Log, 64)
		for i := range batch {
			batch[i] = &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
			idx++
		}
		if err := s.StoreLogs(batch); err != nil {
			b.Fatal(err)
		}
	}
	last, _ := s.LastIndex()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(last) * 1040)
	b.ResetTimer()
	for range b.N {
		if err := checkWAL(filepath.Join(dir, "wal"), last); err != nil {
			b.Fatal(err)
		}
	}
}

// A segment raft-wal v0.4.0 sealed at a tail truncation has no index, and
// its entries cannot be read: refused with a clear error rather than
// Raft's panic at the first read.
func TestCheckWALRefusesASealedSegmentWithoutIndex(t *testing.T) {
	dir := t.TempDir()
	meta := &metadb.BoltMetaDB{}
	w, err := raftwal.Open(dir, raftwal.WithMetaStore(meta), raftwal.WithSegmentSize(4096))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 100; i++ {
		if err := w.StoreLog(&raft.Log{Index: uint64(i), Term: 1, Data: bytes.Repeat([]byte("z"), 100)}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	st, err := meta.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	st.Segments[0].IndexStart = 0 // as v0.4.0 left it
	if err := meta.CommitState(st); err != nil {
		t.Fatal(err)
	}
	meta.Close()
	err = checkWAL(dir, 100)
	var d *DamagedError
	if !errors.As(err, &d) || !strings.Contains(d.Reason, "raft-wal#31") || d.FirstIndex != st.Segments[0].MinIndex {
		t.Fatalf("err = %v, want a DamagedError for the first segment naming raft-wal#31", err)
	}
}
