package raftnode

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// Log store names accepted by Config.LogStore.
const (
	// LogStoreWAL is github.com/hashicorp/raft-wal: segment files with
	// a bbolt meta store, in DIR/raft/wal. The default (see docs/operations.md
	// for the measurements behind the choice).
	LogStoreWAL = "wal"
	// LogStoreBolt is github.com/hashicorp/raft-boltdb/v2, one bbolt file
	// DIR/raft/raft.db.
	LogStoreBolt = "boltdb"
)

// logStore is both halves raft needs of a durable store.
type logStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// CheckLogStore fails when the Raft directory dir holds a log of the other
// kind than kind (wal or boltdb), naming the flag to use: a changed
// --raft-log-store must not start an empty log next to the real one.
func CheckLogStore(kind, dir string) error {
	walDir := filepath.Join(dir, "wal")
	boltPath := filepath.Join(dir, "raft.db")
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	switch {
	case (kind == "" || kind == LogStoreWAL) && exists(boltPath):
		return fmt.Errorf("log store %q requested but %s holds a %q log; use --raft-log-store=%s", LogStoreWAL, boltPath, LogStoreBolt, LogStoreBolt)
	case kind == LogStoreBolt && exists(walDir):
		return fmt.Errorf("log store %q requested but %s holds a %q log; use --raft-log-store=%s", LogStoreBolt, walDir, LogStoreWAL, LogStoreWAL)
	}
	return nil
}

// openLogStore opens (creating as needed) the named log store under dir.
// It refuses to open one kind when the other kind's files are present
// (CheckLogStore). A raft-wal log is verified first (checkWAL, with its
// durable-index mark, walmark.go): a damaged one is refused with a
// *DamagedError.
func openLogStore(kind, dir string) (logStore, error) {
	if err := CheckLogStore(kind, dir); err != nil {
		return nil, err
	}
	walDir := filepath.Join(dir, "wal")
	boltPath := filepath.Join(dir, "raft.db")
	switch kind {
	case "", LogStoreWAL:
		if err := os.MkdirAll(walDir, 0o700); err != nil {
			return nil, err
		}
		mark, err := readMark(markPath(walDir))
		if err != nil {
			return nil, err
		}
		if err := checkWAL(walDir, mark); err != nil {
			return nil, err
		}
		meta := &metadb.BoltMetaDB{}
		w, err := raftwal.Open(walDir, raftwal.WithMetaStore(meta))
		if err != nil {
			meta.Close()
			return nil, err
		}
		ws := &walStore{WAL: w, meta: meta}
		last, err := w.LastIndex()
		if err == nil && last < mark {
			// checkWAL passed, yet raft-wal recovered less: refuse all the same.
			err = &DamagedError{What: "log", File: walDir, Offset: -1, End: -1, FirstIndex: last + 1, LastIndex: mark,
				Reason: fmt.Sprintf("raft-wal recovered the log up to index %d, but indexes up to %d were stored durably before the member stopped", last, mark)}
		}
		var m *markedWAL
		if err == nil {
			m, err = openMark(ws, markPath(walDir), last)
		}
		if err != nil {
			ws.Close()
			return nil, err
		}
		return m, nil
	case LogStoreBolt:
		return raftboltdb.New(raftboltdb.Options{Path: boltPath})
	default:
		return nil, fmt.Errorf("unknown raft log store %q: use %q or %q", kind, LogStoreWAL, LogStoreBolt)
	}
}

// walStore closes raft-wal's bbolt meta store too: raft-wal v0.4.1's
// WAL.Close leaves it open, and with it the file lock, so the same process
// could not open the directory again.
type walStore struct {
	*raftwal.WAL
	meta *metadb.BoltMetaDB
}

func (s *walStore) Close() error {
	err := s.WAL.Close()
	if merr := s.meta.Close(); err == nil {
		err = merr
	}
	return err
}
