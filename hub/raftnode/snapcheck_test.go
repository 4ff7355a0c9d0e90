package raftnode

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// testSnapshot writes a snapshot at index under dir (the Raft directory)
// holding state, through the member's snapshot store, and returns its
// directory.
func testSnapshot(t *testing.T, dir string, index uint64, state []byte) string {
	t.Helper()
	s, err := newSnapshotStore(dir, 3, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport("")
	sink, err := s.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write(state); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	// raft's store opens it (its CRC64 matches).
	if _, rc, err := s.Open(sink.ID()); err != nil {
		t.Fatalf("raft cannot open the snapshot: %v", err)
	} else {
		rc.Close()
	}
	return filepath.Join(dir, "snapshots", sink.ID())
}

func testState() []byte { return bytes.Repeat([]byte("roost snapshot state "), 30_000) } // 630,000 bytes

func TestCheckSnapshotsIntact(t *testing.T) {
	dir := t.TempDir()
	testSnapshot(t, dir, 40, testState())
	testSnapshot(t, dir, 90, testState())
	if err := checkSnapshots(filepath.Join(dir, "snapshots"), 1, 100); err != nil {
		t.Fatal(err)
	}
	if err := checkSnapshots(filepath.Join(t.TempDir(), "snapshots"), 0, 0); err != nil {
		t.Fatalf("no snapshots: %v", err)
	}
}

// One byte changed in the middle of the newest snapshot: refused, naming
// the file, the block and the snapshot's index, and saying what
// moving it aside would lose.
func TestCheckSnapshotsRefusesADamagedSnapshot(t *testing.T) {
	dir := t.TempDir()
	testSnapshot(t, dir, 40, testState())
	snap := testSnapshot(t, dir, 90, testState())
	state := filepath.Join(snap, "state.bin")
	flip(t, state, 300_000)
	for _, tc := range []struct {
		name                 string
		logFirst, logLast    uint64
		wantLoss, wantNoLoss string
	}{
		{"compacted log", 60, 100, "indexes 41–59 are lost", ""},
		{"log since the older snapshot", 30, 100, "", "loses nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkSnapshots(filepath.Join(dir, "snapshots"), tc.logFirst, tc.logLast)
			var d *DamagedError
			if !errors.As(err, &d) {
				t.Fatalf("err = %v, want a DamagedError", err)
			}
			t.Log(err)
			block := int64(300_000 / snapshotBlock * snapshotBlock)
			if d.File != state || d.Offset != block || d.End != block+snapshotBlock || d.FirstIndex != 90 {
				t.Fatalf("DamagedError %+v, want %s at offset %d, index 90", d, state, block)
			}
			msg := err.Error()
			for _, want := range []string{state, fmt.Sprintf("byte offset %d", block), "Raft index 90", "refuses to start", tc.wantLoss, tc.wantNoLoss} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not say %q", msg, want)
				}
			}
		})
	}

	// Without blocks.crc32c (a snapshot from before it existed) the damage
	// is still refused, by raft's CRC64, without an offset.
	if err := os.Remove(filepath.Join(snap, blocksFile)); err != nil {
		t.Fatal(err)
	}
	err := checkSnapshots(filepath.Join(dir, "snapshots"), 60, 100)
	var d *DamagedError
	if !errors.As(err, &d) || d.Offset != -1 || !strings.Contains(err.Error(), "CRC64") {
		t.Fatalf("without blocks.crc32c: %v, want a DamagedError by CRC64 without offset", err)
	}
}

// A damaged meta.json, which raft would skip silently (restoring an older
// snapshot), and a truncated state.bin are refused too.
func TestCheckSnapshotsRefusesDamagedMetaAndTruncatedState(t *testing.T) {
	dir := t.TempDir()
	snap := testSnapshot(t, dir, 90, testState())
	meta := filepath.Join(snap, "meta.json")
	b, _ := os.ReadFile(meta)
	flip(t, meta, int64(bytes.Index(b, []byte(`"Index"`))+2))
	err := checkSnapshots(filepath.Join(dir, "snapshots"), 1, 100)
	var d *DamagedError
	if !errors.As(err, &d) || d.File != meta || d.FirstIndex != 90 {
		t.Fatalf("damaged meta.json: %v", err)
	}

	dir = t.TempDir()
	snap = testSnapshot(t, dir, 90, testState())
	if err := os.Truncate(filepath.Join(snap, "state.bin"), 500_000); err != nil {
		t.Fatal(err)
	}
	err = checkSnapshots(filepath.Join(dir, "snapshots"), 1, 100)
	if !errors.As(err, &d) || d.Offset != 500_000 || !strings.Contains(d.Reason, "500000 bytes") {
		t.Fatalf("truncated state.bin: %v", err)
	}
}
