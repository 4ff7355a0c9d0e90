package raftnode

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// Verifying raft-wal's segment files at start.
//
// raft-wal (v0.4.1, segment format version 0) already checksums every
// record: each append batch (the entry frames of one StoreLogs call, and
// the index frame that seals a segment) ends with a commit frame holding
// the CRC32C (Castagnoli) of every byte of the batch, the first batch
// including the file header. But when the WAL opens, it checks only the
// last batch of the newest segment (it cannot tell a torn last write from
// damage), never the sealed segments, and it reads a frame header it does
// not understand as the end of the log. So one changed byte in the middle
// of a segment either served a changed entry or silently cut the log.
//
// checkWAL re-reads every segment the WAL's meta store lists, frame by
// frame, and recomputes each batch's CRC32C. The library has no exported
// API for this (its reader is unexported and checks one batch), so this
// reads the documented on-disk format; the file header's version byte
// pins it. What it cannot tell from the format alone, whether a log that
// ends early lost durable records or only a write that was never
// acknowledged, it tells from the durable-index mark (walmark.go).

// Segment format constants of raft-wal v0.4.x (segment/format.go).
const (
	walFileHeaderLen  = 32
	walFrameHeaderLen = 8
	walMagic          = 0x58eb6b0d
	walVersion        = 0
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkWAL verifies the raft-wal log in walDir before it is opened:
// every batch checksum of every segment the meta store lists, that every
// sealed segment holds its entries up to its MaxIndex, and that the
// newest segment holds every entry up to durable, the last index known to
// have been stored durably (0: unknown, nothing is required). A batch
// whose checksum fails is refused wherever it is, except the last one of
// the newest segment when it holds no index up to durable: that is a
// write interrupted by a crash, never acknowledged, which raft-wal
// discards. It returns nil for a directory without a log, a
// *DamagedError naming the segment file, the byte range and the Raft
// indexes, or another error when the files cannot be read.
func checkWAL(walDir string, durable uint64) error {
	metaPath := filepath.Join(walDir, metadb.FileName)
	if _, err := os.Stat(metaPath); errors.Is(err, os.ErrNotExist) {
		if durable > 0 {
			return &DamagedError{What: "log", File: metaPath, Offset: -1, End: -1, FirstIndex: 1, LastIndex: durable,
				Reason: fmt.Sprintf("the log's meta store is missing, but indexes up to %d were stored durably", durable)}
		}
		return nil
	}
	meta := &metadb.BoltMetaDB{}
	st, err := meta.Load(walDir)
	meta.Close()
	if err != nil {
		return fmt.Errorf("read raft-wal meta store %s: %w", metaPath, err)
	}
	for _, si := range st.Segments {
		sealed := !si.SealTime.IsZero()
		var need uint64
		switch {
		case sealed:
			need = si.MaxIndex
		case durable >= si.BaseIndex:
			need = durable
		}
		path := filepath.Join(walDir, segment.FileName(si))
		if err := checkSegment(path, si, sealed, need); err != nil {
			return err
		}
		if sealed && si.IndexStart == 0 && si.MinIndex <= si.MaxIndex {
			// raft-wal v0.4.0 sealed the segment of a tail truncation without
			// writing its index; no version can read its entries since.
			return &DamagedError{What: "log segment", File: path, Offset: -1, End: -1, FirstIndex: si.MinIndex, LastIndex: si.MaxIndex,
				Reason: "the segment was sealed by a tail truncation without its index (raft-wal v0.4.0, hashicorp/raft-wal#31), so its entries cannot be read"}
		}
	}
	return nil
}

// checkSegment verifies one segment file (see checkWAL): need is the last
// index it must hold in intact batches (0: none).
func checkSegment(path string, info types.SegmentInfo, sealed bool, need uint64) error {
	damaged := func(off, end int64, first, last uint64, format string, a ...any) *DamagedError {
		return &DamagedError{What: "log segment", File: path, Offset: off, End: end, FirstIndex: first, LastIndex: last, Reason: fmt.Sprintf(format, a...)}
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		if sealed || need >= info.BaseIndex {
			return damaged(-1, -1, info.BaseIndex, max(need, info.BaseIndex), "the segment file is missing")
		}
		return nil // a new tail not created yet: raft-wal creates it
	}
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)

	var hdr [walFileHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if need >= info.BaseIndex {
			return damaged(0, -1, info.BaseIndex, need, "the file ends within its header (%v)", err)
		}
		return nil
	}
	crc := crc32.Update(0, castagnoli, hdr[:])

	var (
		off        = int64(walFileHeaderLen) // where the next frame starts
		batchStart int64                     // where the current batch starts
		batchFirst uint64                    // entries seen before the current batch
		entries    uint64                    // entry frames seen
		verified   uint64                    // entries in intact batches
		verEnd     int64                     // where the intact batches end
		sawIndex   bool                      // an index frame: a sealed segment's data ends at the next commit
		bad        *DamagedError             // the first batch whose checksum failed
		stopWhy    string                    // why the frames end
	)
	idx := func(n uint64) uint64 { return info.BaseIndex + n }
	buf := make([]byte, 64<<10)
scan:
	for {
		var fh [walFrameHeaderLen]byte
		if n, err := io.ReadFull(r, fh[:]); err != nil {
			if n == 0 {
				stopWhy = "the file ends"
			} else {
				stopWhy = "the file ends within a frame header"
			}
			break
		}
		length := binary.LittleEndian.Uint32(fh[4:8])
		switch fh[0] {
		case segment.FrameEntry, segment.FrameIndex:
			if length > segment.MaxEntrySize {
				stopWhy = fmt.Sprintf("a frame header giving a length of %d bytes, more than raft-wal writes", length)
				break scan
			}
			padded := int64(length) + int64((walFrameHeaderLen-length%walFrameHeaderLen)%walFrameHeaderLen)
			crc = crc32.Update(crc, castagnoli, fh[:])
			for left := padded; left > 0; {
				n := min(left, int64(len(buf)))
				if _, err := io.ReadFull(r, buf[:n]); err != nil {
					stopWhy = "the file ends within a frame"
					break scan
				}
				crc = crc32.Update(crc, castagnoli, buf[:n])
				left -= n
			}
			if fh[0] == segment.FrameEntry {
				entries++
			} else {
				sawIndex = true
			}
			off += walFrameHeaderLen + padded
		case segment.FrameCommit:
			first, last := idx(batchFirst), idx(entries)-1
			// A batch matters when it holds the segment's index, or an entry
			// still in the log: not below MinIndex (deleted after a
			// snapshot), nor, in a segment sealed by a tail truncation,
			// above MaxIndex (a torn write left there is never read).
			live := entries == batchFirst || (last >= info.MinIndex && (!sealed || first <= info.MaxIndex))
			if crc != length {
				if bad == nil && live {
					var which string
					if entries == batchFirst {
						first, last = 0, 0
						which = "the segment's index"
					} else {
						which = "its entries"
					}
					bad = damaged(batchStart, off+walFrameHeaderLen, first, last,
						"the checksum of the batch holding %s does not match (CRC32C stored in the commit frame at offset %d: %08x, computed: %08x)",
						which, off, length, crc)
				}
			} else {
				if bad != nil {
					bad.Reason += "; a later batch is intact, so this is not a write interrupted by a crash"
					return bad
				}
				verified, verEnd = entries, off+walFrameHeaderLen
			}
			crc = 0
			off += walFrameHeaderLen
			batchStart, batchFirst = off, entries
			if sawIndex {
				break scan // a sealed segment's data ends here; what follows is left over from torn writes
			}
		case segment.FrameInvalid:
			if fh == [walFrameHeaderLen]byte{} {
				stopWhy = "zeros, the end of what was written"
			} else {
				stopWhy = fmt.Sprintf("an invalid frame header (% x)", fh[:])
			}
			break scan
		default:
			stopWhy = fmt.Sprintf("a frame header of unknown type %d (% x)", fh[0], fh[:])
			break scan
		}
	}

	if verified > 0 || verEnd > 0 {
		// The header was part of an intact batch: it must be this segment's.
		if binary.LittleEndian.Uint64(hdr[0:8]) != walMagic || hdr[7] != walVersion {
			return damaged(0, walFileHeaderLen, 0, 0, "the file header is not a raft-wal version %d header", walVersion)
		}
		if id, base := binary.LittleEndian.Uint64(hdr[16:24]), binary.LittleEndian.Uint64(hdr[8:16]); id != info.ID || base != info.BaseIndex {
			return damaged(0, walFileHeaderLen, 0, 0, "the file header names segment %d at index %d; the meta store expects segment %d at index %d", id, base, info.ID, info.BaseIndex)
		}
	}
	if bad != nil && (sealed || (need > 0 && need >= bad.FirstIndex && bad.FirstIndex > 0)) {
		if !sealed {
			bad.Reason += fmt.Sprintf("; it is the newest batch, but index %d was stored durably before, so this is damage, not a write interrupted by a crash", need)
		}
		return bad
	}
	lastVerified := idx(verified) - 1
	if need > lastVerified {
		from := max(lastVerified+1, info.BaseIndex)
		stopAt := off
		if bad != nil {
			stopAt = bad.Offset
			stopWhy = "a batch that fails its checksum"
		}
		return damaged(verEnd, -1, from, need,
			"the intact records end at byte offset %d with index %d, and no intact batch follows (reading stops at offset %d: %s); but the log held indexes up to %d (stored durably before the member stopped), so %d–%d would be lost",
			max(verEnd, walFileHeaderLen), lastVerified, stopAt, stopWhy, need, from, need)
	}
	return nil
}
