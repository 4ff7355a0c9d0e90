package hub_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/raftnode"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/snapshot"
)

// newestFile returns the last path (in name order) matching pattern.
func newestFile(t *testing.T, pattern string) string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) == 0 {
		t.Fatalf("nothing matches %s (%v)", pattern, err)
	}
	return m[len(m)-1]
}

// flipByte changes one byte of path: the first byte of the first
// occurrence of marker, or, with an empty marker, the byte in the middle.
// It returns the offset.
func flipByte(t *testing.T, path, marker string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := len(b) / 2
	if marker != "" {
		if off = bytes.Index(b, []byte(marker)); off < 0 {
			t.Fatalf("%q not in %s", marker, path)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{b[off] ^ 0x20}, int64(off)); err != nil { // in place: a running member may have it open
		t.Fatal(err)
	}
	return int64(off)
}

// startDamaged starts a member on dir and wants it refused with a
// DamagedError naming file, an offset and an index, and saying how to
// recover.
func startDamaged(t *testing.T, o hub.Options, file string) *raftnode.DamagedError {
	t.Helper()
	h, err := hub.Start(context.Background(), fastRaft(o))
	if err == nil {
		h.Close()
		t.Fatal("a member with a damaged Raft state started")
	}
	t.Log(err)
	var d *raftnode.DamagedError
	if !errors.As(err, &d) {
		t.Fatalf("start: %v, want a DamagedError", err)
	}
	msg := err.Error()
	for _, want := range []string{file, fmt.Sprintf("byte offset %d", d.Offset), "Raft index", "refuses to start", "docs/operations.md", "roostctl hub remove"} {
		if d.Offset < 0 || d.FirstIndex == 0 || !strings.Contains(msg, want) {
			t.Fatalf("error %q: want it to name %q (offset %d, index %d)", msg, want, d.Offset, d.FirstIndex)
		}
	}
	return d
}

// saveState is `roostctl hub snapshot save`: the state's info and bytes.
func saveState(t *testing.T, c roostv1.HubServiceClient) (*roostv1.SnapshotChunk, []byte) {
	t.Helper()
	stream, err := c.SaveSnapshot(context.Background(), &roostv1.SaveSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, data, err := snapshot.Receive(stream, nil)
	if err != nil {
		t.Fatal(err)
	}
	return first, data
}

func applyClusters(t *testing.T, c roostv1.HubServiceClient, prefix string, n int) {
	t.Helper()
	for i := range n {
		if _, err := c.Apply(context.Background(), &roostv1.ApplyRequest{Objects: []*roostv1.Object{cluster(fmt.Sprintf("%s-%d", prefix, i), "v1.34.4")}}); err != nil {
			t.Fatal(err)
		}
	}
}

// One byte changed in the middle of a single member's newest log segment:
// the member refuses to start, naming the segment, the offset and the
// index. The documented recovery (move raft/wal aside, start: the member
// is back at its newest Raft snapshot; restore the newest backup) brings
// back every acknowledged write.
func TestDamagedLogSingleMemberRecovery(t *testing.T) {
	dir := t.TempDir()
	h := startHub(t, dir, hub.Options{})
	waitFor(t, "admin.conf", func() bool { return fileExists(h.AdminConfigPath()) })
	c := dial(t, h.AdminConfigPath(), h.APIAddr())
	applyClusters(t, c, "early", 5)
	if err := h.Node().Snapshot(); err != nil {
		t.Fatal(err)
	}
	applyClusters(t, c, "late", 5)
	// The cluster controller records each new Cluster's status at once:
	// the backup holds it.
	waitFor(t, "cluster statuses", func() bool { return clustersHaveStatus(h, 10) })
	backup, data := saveState(t, c)
	want, _, err := h.FSM().List("Cluster", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}

	seg := newestFile(t, filepath.Join(dir, "raft", "wal", "*.wal"))
	flipByte(t, seg, "late-2")
	o := hub.Options{DataDir: dir, APIAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0"}
	startDamaged(t, o, seg)

	// Recovery: the damaged log aside, the member starts at its snapshot …
	if err := os.Rename(filepath.Join(dir, "raft", "wal"), filepath.Join(dir, "damaged-wal")); err != nil {
		t.Fatal(err)
	}
	h = startHub(t, dir, hub.Options{})
	if _, err := h.FSM().Get("Cluster", "early-4"); err != nil {
		t.Fatalf("after restarting from the snapshot: %v", err)
	}
	// (The cluster controller records the statuses the snapshot lacks
	// first: the restore is compared with the backup.)
	waitFor(t, "cluster statuses", func() bool { return clustersHaveStatus(h, 5) })
	// … and the backup brings back the rest.
	c = dial(t, h.AdminConfigPath(), h.APIAddr())
	stream, err := c.RestoreSnapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := snapshot.Send(stream, backup, data); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.CloseAndRecv(); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("restore: %v", err)
	}
	got, _, err := h.FSM().List("Cluster", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(want) != 10 {
		t.Fatalf("after recovery %d clusters, want %d", len(got), len(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("after recovery: %v, want %v", got[i], want[i])
		}
	}
}

// One byte changed in the middle of the newest Raft snapshot: refused,
// naming state.bin, the offset of the damaged block and the index.
func TestDamagedSnapshotRefused(t *testing.T) {
	dir := t.TempDir()
	h := startHub(t, dir, hub.Options{})
	waitFor(t, "admin.conf", func() bool { return fileExists(h.AdminConfigPath()) })
	c := dial(t, h.AdminConfigPath(), h.APIAddr())
	applyClusters(t, c, "snap", 30)
	if err := h.Node().Snapshot(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(newestFile(t, filepath.Join(dir, "raft", "snapshots", "*-*-*")), "state.bin")
	off := flipByte(t, state, "")
	d := startDamaged(t, hub.Options{DataDir: dir, APIAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0"}, state)
	if d.Offset > off || d.End <= off {
		t.Fatalf("damage at %d reported as bytes %d–%d", off, d.Offset, d.End-1)
	}
}

// A member of a 3-member hub whose newest log segment (or, separately,
// newest snapshot) is damaged refuses to start; the documented recovery
// (remove it, wipe its data dir, join it again) brings it back with every
// acknowledged write, including those acknowledged while it was down.
func TestDamagedMemberRejoins(t *testing.T) {
	for _, damage := range []string{"log segment", "snapshot"} {
		t.Run(strings.ReplaceAll(damage, " ", "-"), func(t *testing.T) { testDamagedMemberRejoins(t, damage) })
	}
}

func testDamagedMemberRejoins(t *testing.T, damage string) {
	members, dirs, admin := threeMembers(t)
	applyClusters(t, admin, "before", 10)
	waitFor(t, "hub-c applied every write", func() bool {
		return members[2].FSM().LastIndex() >= members[0].FSM().LastIndex()
	})
	if damage == "snapshot" {
		if err := members[2].Node().Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	raftAddr := members[2].Node().Addr()
	if err := members[2].Close(); err != nil {
		t.Fatal(err)
	}
	applyClusters(t, admin, "while-down", 10)

	file := newestFile(t, filepath.Join(dirs[2], "raft", "wal", "*.wal"))
	if damage == "snapshot" {
		file = filepath.Join(newestFile(t, filepath.Join(dirs[2], "raft", "snapshots", "*-*-*")), "state.bin")
	}
	flipByte(t, file, "before-5")
	if d := startDamaged(t, hub.Options{NodeID: "hub-c", DataDir: dirs[2], APIAddr: "127.0.0.1:0", RaftAddr: raftAddr}, file); d.What != damage {
		t.Fatalf("damaged %s reported, want %s", d.What, damage)
	}

	// Recovery: remove the member, wipe its data dir, join it again.
	if _, err := admin.RemoveMember(context.Background(), &roostv1.RemoveMemberRequest{Id: "hub-c"}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dirs[2]); err != nil {
		t.Fatal(err)
	}
	rejoined := startHub(t, dirs[2], hub.Options{NodeID: "hub-c", Join: members[0].APIAddr(), JoinToken: joinToken(t, admin)})
	waitFor(t, "3 voters", func() bool {
		ms, err := admin.ListMembers(context.Background(), &roostv1.ListMembersRequest{})
		return err == nil && len(ms.GetMembers()) == 3
	})
	waitFor(t, "cluster statuses", func() bool { return clustersHaveStatus(members[0], 20) })
	want, _, err := members[0].FSM().List("Cluster", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 20 {
		t.Fatalf("leader holds %d clusters, want 20", len(want))
	}
	waitFor(t, "hub-c caught up", func() bool { return rejoined.FSM().LastIndex() >= members[0].FSM().LastIndex() })
	got, _, err := rejoined.FSM().List("Cluster", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("rejoined member holds %d clusters, want %d", len(got), len(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("rejoined member: %v, want %v", got[i], want[i])
		}
	}
}
