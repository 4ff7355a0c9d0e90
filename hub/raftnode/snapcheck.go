package raftnode

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Verifying the newest Raft snapshot at start.
//
// hashicorp/raft's FileSnapshotStore keeps the CRC64 (ECMA) of each
// snapshot's state.bin in its meta.json and checks it in Open. But when the
// newest snapshot fails that check (or its meta.json does not parse), Raft
// logs it and silently restores the next older one instead, and the log
// may no longer hold the entries between the two (it is compacted past
// each snapshot): the member would start without acknowledged writes.
//
// Decision: a damaged newest snapshot is always refused, before Raft
// starts (checkSnapshots); the error says whether moving it aside is
// lossless (the log still holds every entry since the next older
// snapshot) and, if not, which indexes would be lost. Older snapshots are
// not read at start: Raft uses them only when the newest cannot be
// restored, which is refused.
//
// A whole-file CRC64 says that a snapshot is damaged, not where. Roost
// adds blocks.crc32c beside state.bin (blockSink): the CRC32C of every
// snapshotBlock bytes of the state, so a mismatch is named by its byte
// range. It is written into the snapshot's temporary directory before raft
// renames it, so a snapshot has it or never existed; snapshots written by
// an older roost-hub have none, and their damage is named by file only.

const (
	snapshotBlock  = 4 << 10 // bytes per checksummed block of state.bin
	blocksFile     = "blocks.crc32c"
	snapStateFile  = "state.bin" // raft's FileSnapshotStore names
	snapMetaFile   = "meta.json"
	snapTmpSuffix  = ".tmp"
	blocksFileHead = "roost-snapshot-blocks-v1\n"
)

// snapshotStore is raft's FileSnapshotStore whose sinks also write
// blocks.crc32c.
type snapshotStore struct {
	*raft.FileSnapshotStore
	dir string // DIR/snapshots
}

// newSnapshotStore opens (creating) the snapshot store DIR/snapshots
// under dir, keeping retain snapshots.
func newSnapshotStore(dir string, retain int, logger hclog.Logger) (*snapshotStore, error) {
	fs, err := raft.NewFileSnapshotStoreWithLogger(dir, retain, logger)
	if err != nil {
		return nil, err
	}
	return &snapshotStore{FileSnapshotStore: fs, dir: filepath.Join(dir, "snapshots")}, nil
}

// Create implements raft.SnapshotStore.
func (s *snapshotStore) Create(version raft.SnapshotVersion, index, term uint64, conf raft.Configuration, confIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, conf, confIndex, trans)
	if err != nil {
		return nil, err
	}
	return &blockSink{SnapshotSink: sink, tmpDir: filepath.Join(s.dir, sink.ID()+snapTmpSuffix)}, nil
}

// blockSink computes the CRC32C of every snapshotBlock bytes written and
// writes them to blocks.crc32c in the snapshot's directory before the
// snapshot is committed (raft renames the directory in Close).
type blockSink struct {
	raft.SnapshotSink
	tmpDir string
	sums   []uint32
	cur    uint32 // CRC32C of the current block so far
	fill   int    // bytes in the current block
	closed bool
}

// Cancel implements raft.SnapshotSink.
func (s *blockSink) Cancel() error {
	s.closed = true
	return s.SnapshotSink.Cancel()
}

func (s *blockSink) Write(p []byte) (int, error) {
	n, err := s.SnapshotSink.Write(p)
	q := p[:n]
	for len(q) > 0 {
		k := min(len(q), snapshotBlock-s.fill)
		s.cur = crc32.Update(s.cur, castagnoli, q[:k])
		s.fill += k
		q = q[k:]
		if s.fill == snapshotBlock {
			s.sums = append(s.sums, s.cur)
			s.cur, s.fill = 0, 0
		}
	}
	return n, err
}

// Close writes blocks.crc32c and commits the snapshot. Raft closes a sink
// again after the FSM's Persist closed it: later calls only call the
// inner Close (which ignores them).
func (s *blockSink) Close() error {
	if s.closed {
		return s.SnapshotSink.Close()
	}
	s.closed = true
	sums := s.sums
	if s.fill > 0 {
		sums = append(sums, s.cur)
	}
	if err := writeBlocks(filepath.Join(s.tmpDir, blocksFile), sums); err != nil {
		s.SnapshotSink.Cancel()
		return fmt.Errorf("write snapshot block checksums: %w", err)
	}
	return s.SnapshotSink.Close()
}

// writeBlocks writes the blocks file: its header line, then per block its
// CRC32C (uint32, little endian), then the CRC32C of everything before;
// fsynced.
func writeBlocks(path string, sums []uint32) error {
	b := []byte(blocksFileHead)
	for _, c := range sums {
		b = binary.LittleEndian.AppendUint32(b, c)
	}
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readBlocks returns the block checksums in path; nil when the file does
// not exist or does not check out itself.
func readBlocks(path string) []uint32 {
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte(blocksFileHead)) || len(b) < len(blocksFileHead)+4 || (len(b)-len(blocksFileHead))%4 != 0 {
		return nil
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil
	}
	sums := []uint32{}
	for p := body[len(blocksFileHead):]; len(p) >= 4; p = p[4:] {
		sums = append(sums, binary.LittleEndian.Uint32(p))
	}
	return sums
}

// snapDir is one snapshot directory, named TERM-INDEX-MSEC by raft.
type snapDir struct {
	name        string
	term, index uint64
}

// listSnapshots returns the committed snapshot directories in dir,
// newest first (raft's order: term, index, name).
func listSnapshots(dir string) ([]snapDir, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []snapDir
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), snapTmpSuffix) {
			continue
		}
		var d snapDir
		var msec int64
		if n, _ := fmt.Sscanf(e.Name(), "%d-%d-%d", &d.term, &d.index, &msec); n != 3 || fmt.Sprintf("%d-%d-%d", d.term, d.index, msec) != e.Name() {
			continue // not a name raft gives (raft itself would still try it if it holds a meta.json)
		}
		d.name = e.Name()
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.term != b.term {
			return a.term > b.term
		}
		if a.index != b.index {
			return a.index > b.index
		}
		return a.name > b.name
	})
	return out, nil
}

// checkSnapshots verifies the newest snapshot in dir (DIR/snapshots):
// its meta.json parses, state.bin has the size and CRC64 it records, and
// every block has the CRC32C of blocks.crc32c when that file exists. The
// log holds indexes logFirst..logLast (0, 0: empty); they say in the
// error whether moving the damaged snapshot aside loses writes. It
// returns nil when there is no snapshot or the newest is intact, a
// *DamagedError naming the file, the byte range (when blocks.crc32c
// localises it) and the snapshot's index, or another error when the
// directory cannot be read.
func checkSnapshots(dir string, logFirst, logLast uint64) error {
	snaps, err := listSnapshots(dir)
	if err != nil || len(snaps) == 0 {
		return err
	}
	newest := snaps[0]
	base := filepath.Join(dir, newest.name)
	damaged := func(file string, off, end int64, format string, a ...any) error {
		reason := fmt.Sprintf(format, a...) + "; " + fallbackLoss(base, snaps, logFirst, logLast)
		return &DamagedError{What: "snapshot", File: file, Offset: off, End: end, FirstIndex: newest.index, LastIndex: newest.index, Reason: reason}
	}
	metaPath := filepath.Join(base, snapMetaFile)
	mb, err := os.ReadFile(metaPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var meta struct {
		raft.SnapshotMeta
		CRC []byte
	}
	if err != nil {
		return damaged(metaPath, -1, -1, "the snapshot's meta.json is missing")
	}
	if err := json.Unmarshal(mb, &meta); err != nil || meta.Index != newest.index || meta.Term != newest.term || len(meta.CRC) != 8 {
		return damaged(metaPath, -1, -1, "the snapshot's meta.json does not parse or does not match its directory name (%v)", err)
	}
	statePath := filepath.Join(base, snapStateFile)
	f, err := os.Open(statePath)
	if errors.Is(err, os.ErrNotExist) {
		return damaged(statePath, -1, -1, "the snapshot's state.bin is missing")
	}
	if err != nil {
		return err
	}
	defer f.Close()
	blocks := readBlocks(filepath.Join(base, blocksFile))
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	r := bufio.NewReaderSize(f, 1<<20)
	buf := make([]byte, snapshotBlock)
	var size int64
	var badBlock = -1
	for i := 0; ; i++ {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			h.Write(buf[:n])
			if blocks != nil && badBlock < 0 && (i >= len(blocks) || crc32.Checksum(buf[:n], castagnoli) != blocks[i]) {
				badBlock = i
			}
			size += int64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read snapshot %s: %w", statePath, err)
		}
	}
	if blocks != nil && badBlock < 0 && int64(len(blocks)) != (size+snapshotBlock-1)/snapshotBlock {
		badBlock = int(size / snapshotBlock)
	}
	sum := h.Sum(nil)
	switch {
	case size != meta.Size:
		return damaged(statePath, min(size, meta.Size), -1, "state.bin holds %d bytes; meta.json records %d", size, meta.Size)
	case !bytes.Equal(sum, meta.CRC) && badBlock >= 0:
		off := int64(badBlock) * snapshotBlock
		return damaged(statePath, off, min(off+snapshotBlock, size), "the checksum of state.bin does not match (CRC64 in meta.json: %x, computed: %x; the CRC32C of the block at offset %d does not match blocks.crc32c)", meta.CRC, sum, off)
	case !bytes.Equal(sum, meta.CRC):
		return damaged(statePath, -1, -1, "the checksum of state.bin does not match (CRC64 in meta.json: %x, computed: %x; the snapshot has no blocks.crc32c to say where)", meta.CRC, sum)
	}
	return nil
}

// fallbackLoss says what moving the damaged snapshot base aside would
// lose: Raft would then restore the next older snapshot (or none) and
// replay the log from there.
func fallbackLoss(base string, snaps []snapDir, logFirst, logLast uint64) string {
	newest := snaps[0].index
	from, since, there := uint64(0), "the first index", "there is no older snapshot"
	if len(snaps) > 1 {
		from = snaps[1].index
		since = fmt.Sprintf("the next older snapshot (%s, index %d)", snaps[1].name, from)
		there = "the next older snapshot is at index " + fmt.Sprint(from)
	}
	if logFirst > 0 && logFirst <= from+1 && logLast >= newest {
		aside := filepath.Join(filepath.Dir(filepath.Dir(base)), "damaged-snapshot-"+filepath.Base(base))
		return fmt.Sprintf("this member's log still holds every entry since %s, so moving the snapshot out of the snapshot directory (mv %s %s) loses nothing", since, base, aside)
	}
	lostTo := newest
	if logFirst > from+1 {
		lostTo = min(newest, logFirst-1)
	}
	held := "holds no entries"
	if logFirst > 0 {
		held = fmt.Sprintf("holds indexes %d–%d", logFirst, logLast)
	}
	return fmt.Sprintf("this member's log %s and %s, so without this snapshot indexes %d–%d are lost: recover the member from the other members or a backup", held, there, from+1, lostTo)
}
