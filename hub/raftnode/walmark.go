package raftnode

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// The durable-index mark: DIR/raft/wal/durable-index, the last Raft index
// the log store had stored durably, as far as this member knows.
//
// raft-wal cannot tell a newest segment cut short by damage from one whose
// last write was interrupted by a crash (that write was never acknowledged
// and is rightly dropped). The mark tells them apart: checkWAL requires
// every index up to it. It is 12 bytes, the index (uint64, little endian)
// and the CRC32C of those 8 bytes; a mark that does not check out counts
// as 0 (unknown: nothing required).
//
// It never claims more than the log holds: it is written only after
// StoreLogs returned (the entries are fsynced), and before a deletion
// removes the newest entries (Raft truncating a follower's conflicting
// suffix, a recovery) it is set to 0 and fsynced. While the member runs
// it is rewritten at most every markInterval without fsync (it may lag,
// which only weakens the check after a crash: entries stored in the last
// seconds before a crash are checked by their batch checksums only); a
// graceful stop writes and fsyncs the exact last index.
const markFile = "durable-index"

// markInterval is the most often the mark is rewritten while the member runs.
const markInterval = 100 * time.Millisecond

// readMark returns the index in the mark file at path; 0 when the file
// does not exist or does not check out. Errors: the file cannot be read.
func readMark(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(b) != 12 || crc32.Checksum(b[:8], castagnoli) != binary.LittleEndian.Uint32(b[8:12]) {
		return 0, nil
	}
	return binary.LittleEndian.Uint64(b[:8]), nil
}

// markedWAL is the raft-wal log store with its durable-index mark.
type markedWAL struct {
	*walStore

	f       *os.File
	mu      sync.Mutex // serialises writes of the mark file
	pending uint64     // the index to write next (under mu)
	written uint64     // the index in the file (under mu)
	closed  bool       // Close was called (under mu)
	kick    chan struct{}
	done    chan struct{}
}

// openMark opens (creating) the mark file at path for s, whose entries up
// to last are stored, and starts its writer.
func openMark(s *walStore, path string, last uint64) (*markedWAL, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	m := &markedWAL{walStore: s, f: f, kick: make(chan struct{}, 1), done: make(chan struct{})}
	m.pending = last
	m.written = ^uint64(0) // unknown: the first write happens
	if err := m.flush(true); err != nil {
		f.Close()
		return nil, err
	}
	go m.run()
	return m, nil
}

func (m *markedWAL) run() {
	for range m.kick {
		m.mu.Lock()
		_ = m.flush(false) // best effort: a mark that lags only weakens the check
		m.mu.Unlock()
		time.Sleep(markInterval)
	}
	close(m.done)
}

// flush writes pending to the file if it changed, fsyncing when sync
// (mu held, or the writer not started).
func (m *markedWAL) flush(sync bool) error {
	if m.pending != m.written {
		var b [12]byte
		binary.LittleEndian.PutUint64(b[:8], m.pending)
		binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b[:8], castagnoli))
		if _, err := m.f.WriteAt(b[:], 0); err != nil {
			return err
		}
		m.written = m.pending
	}
	if sync {
		return m.f.Sync()
	}
	return nil
}

func (m *markedWAL) advance() {
	last, err := m.WAL.LastIndex()
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.pending = last
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// StoreLog implements raft.LogStore.
func (m *markedWAL) StoreLog(l *raft.Log) error { return m.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore: once the WAL stored logs (durably),
// the mark may advance.
func (m *markedWAL) StoreLogs(logs []*raft.Log) error {
	if err := m.WAL.StoreLogs(logs); err != nil {
		return err
	}
	m.advance()
	return nil
}

// DeleteRange implements raft.LogStore. A deletion that reaches the last
// index sets the mark to 0 durably first: the log then holds less than
// the mark said.
func (m *markedWAL) DeleteRange(lo, hi uint64) error {
	last, err := m.WAL.LastIndex()
	if err != nil {
		return err
	}
	if hi < last {
		return m.WAL.DeleteRange(lo, hi) // a head truncation after a snapshot
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending = 0
	if err := m.flush(true); err != nil {
		return err
	}
	if err := m.WAL.DeleteRange(lo, hi); err != nil {
		return err
	}
	if last, err := m.WAL.LastIndex(); err == nil {
		m.pending = last // written by the next StoreLogs' flush or Close
	}
	return nil
}

// Close stops the mark's writer, writes and fsyncs the last index, and
// closes the WAL.
func (m *markedWAL) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.kick)
	m.mu.Unlock()
	<-m.done
	m.mu.Lock()
	if last, err := m.WAL.LastIndex(); err == nil {
		m.pending = last
	}
	err := m.flush(true)
	m.mu.Unlock()
	if cerr := m.f.Close(); err == nil {
		err = cerr
	}
	if cerr := m.walStore.Close(); err == nil {
		err = cerr
	}
	return err
}

// markPath is the mark file of the WAL in walDir.
func markPath(walDir string) string { return filepath.Join(walDir, markFile) }
