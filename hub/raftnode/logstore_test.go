package raftnode

import (
	"strings"
	"testing"
)

func TestOpenLogStoreRefusesTheOtherKind(t *testing.T) {
	dir := t.TempDir()
	s, err := openLogStore(LogStoreBolt, dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := openLogStore(LogStoreWAL, dir); err == nil || !strings.Contains(err.Error(), "--raft-log-store=boltdb") {
		t.Fatalf("opening wal over a boltdb log: err = %v, want a hint to use boltdb", err)
	}
	dir2 := t.TempDir()
	s, err = openLogStore(LogStoreWAL, dir2)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := openLogStore(LogStoreBolt, dir2); err == nil {
		t.Fatal("opening boltdb over a wal log succeeded")
	}
	if _, err := openLogStore("sqlite", t.TempDir()); err == nil || !strings.Contains(err.Error(), `"wal"`) {
		t.Fatalf("unknown store: err = %v", err)
	}
}

func TestLogStoresReopenInProcess(t *testing.T) {
	for _, kind := range []string{LogStoreWAL, LogStoreBolt} {
		dir := t.TempDir()
		for i := 0; i < 2; i++ {
			s, err := openLogStore(kind, dir)
			if err != nil {
				t.Fatalf("%s open #%d: %v", kind, i+1, err)
			}
			if err := s.SetUint64([]byte("k"), uint64(i)); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("%s close: %v", kind, err)
			}
		}
	}
}
