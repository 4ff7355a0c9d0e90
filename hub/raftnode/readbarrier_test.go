package raftnode

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// registerFSM is one register: each command's 8 bytes are its new value.
// Apply sleeps delay first, so Raft's AppliedIndex runs ahead of it.
type registerFSM struct {
	value, index atomic.Uint64
	delay        time.Duration
}

func (f *registerFSM) Apply(l *raft.Log) any {
	time.Sleep(f.delay)
	if len(l.Data) == 8 {
		f.value.Store(binary.BigEndian.Uint64(l.Data))
	}
	f.index.Store(l.Index)
	return nil
}
func (f *registerFSM) Snapshot() (raft.FSMSnapshot, error) {
	return registerSnapshot(f.value.Load()), nil
}
func (f *registerFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil || len(b) != 8 {
		return fmt.Errorf("register snapshot of %d bytes: %v", len(b), err)
	}
	f.value.Store(binary.BigEndian.Uint64(b))
	return nil
}

type registerSnapshot uint64

func (s registerSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(value(uint64(s))); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}
func (registerSnapshot) Release() {}

func value(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// testCluster starts n members on loopback (Raft timeouts of 500 ms, no log
// verification checkpoints) and returns them with their FSMs once
// members[0] leads all of them. Members shut down when the test ends.
func testCluster(t testing.TB, n int, delay time.Duration) ([]*Node, []*registerFSM) {
	t.Helper()
	tlsCfg := memberTLS(t)
	nodes := make([]*Node, n)
	fsms := make([]*registerFSM, n)
	for i := range nodes {
		fsms[i] = &registerFSM{delay: delay}
		nd, err := Open(Config{
			ID: fmt.Sprintf("m%d", i+1), Dir: t.TempDir(), BindAddr: "127.0.0.1:0", TLS: tlsCfg, FSM: fsms[i],
			HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond, LeaderLeaseTimeout: 250 * time.Millisecond,
			VerifyInterval: -1,
			Logger:         hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Error, Output: io.Discard}),
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = nd
		t.Cleanup(func() { nd.Shutdown() })
	}
	if err := nodes[0].Bootstrap(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for !nodes[0].IsLeader() {
		if ctx.Err() != nil {
			t.Fatal("m1 did not become leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, nd := range nodes[1:] {
		if err := nodes[0].AddVoter(ctx, nd.ID(), nd.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	return nodes, fsms
}

// lastIndexes returns every member's Raft last index.
func lastIndexes(nodes []*Node) []uint64 {
	out := make([]uint64, len(nodes))
	for i, nd := range nodes {
		out[i] = nd.LastIndex()
	}
	return out
}

// waitIndexes waits until every member's log and FSM are at the leader's
// last index.
func waitIndexes(t *testing.T, nodes []*Node, fsms []*registerFSM) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		want, ok := nodes[0].LastIndex(), true
		for i, nd := range nodes {
			ok = ok && nd.LastIndex() == want && nd.AppliedIndex() == want && fsms[i].index.Load() > 0
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("members did not catch up: last indexes %v", lastIndexes(nodes))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReadBarrierWritesNothing: linearizable reads on a 1- and a 3-member
// cluster move no member's last index (Barrier, for contrast, appends an
// entry each time), and each read sees the write acknowledged before it.
func TestReadBarrierWritesNothing(t *testing.T) {
	const reads = 200
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("members=%d", n), func(t *testing.T) {
			nodes, fsms := testCluster(t, n, 0)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, _, err := nodes[0].Apply(ctx, value(1)); err != nil {
				t.Fatal(err)
			}
			waitIndexes(t, nodes, fsms)
			before := lastIndexes(nodes)
			for i := range reads {
				idx, err := nodes[0].ReadBarrier(ctx)
				if err != nil {
					t.Fatalf("read %d: %v", i, err)
				}
				if idx != before[0] {
					t.Fatalf("read %d: read index %d, want the commit index %d", i, idx, before[0])
				}
			}
			if after := lastIndexes(nodes); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("%d linearizable reads moved the last indexes from %v to %v", reads, before, after)
			}
			// Writes interleaved with reads: each read sees the write before it.
			for v := uint64(2); v < 50; v++ {
				if _, _, err := nodes[0].Apply(ctx, value(v)); err != nil {
					t.Fatal(err)
				}
				if _, err := nodes[0].ReadBarrier(ctx); err != nil {
					t.Fatal(err)
				}
				if got := fsms[0].value.Load(); got != v {
					t.Fatalf("read after write %d: %d", v, got)
				}
			}
			t.Logf("%d members: %d linearizable reads, last index stayed at %d", n, reads, before[0])
			li := nodes[0].LastIndex()
			if err := nodes[0].Barrier(ctx); err != nil {
				t.Fatal(err)
			}
			if after := nodes[0].LastIndex(); after != li+1 {
				t.Fatalf("Barrier moved the last index from %d to %d, want one entry", li, after)
			}
		})
	}
}

// TestReadBarrierWaitsForTheFSM: Raft's AppliedIndex counts entries handed
// to the FSM, not applied by it; ReadBarrier waits for the FSM itself.
func TestReadBarrierWaitsForTheFSM(t *testing.T) {
	nodes, fsms := testCluster(t, 1, 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := nodes[0].Apply(ctx, value(1)); err != nil {
		t.Fatal(err)
	}
	write := nodes[0].LastIndex() + 1
	go nodes[0].Apply(ctx, value(2))
	for nodes[0].AppliedIndex() < write {
		if ctx.Err() != nil {
			t.Fatal("the write was not handed to the FSM")
		}
		time.Sleep(time.Millisecond)
	}
	// Raft counts the write as applied; the FSM is still in its Apply.
	if got := fsms[0].value.Load(); got != 1 {
		t.Fatalf("the FSM applied write 2 already (%d): the test proves nothing", got)
	}
	if _, err := nodes[0].ReadBarrier(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fsms[0].value.Load(); got != 2 {
		t.Fatalf("after ReadBarrier the FSM holds %d, want 2 (the committed write)", got)
	}
}

// TestReadBarrierAfterRestore: a user restore (Node.Restore) leaves a hole
// in the log and the FSM's state at the restored snapshot; reads right
// after it see the restored state at once, and later writes on top.
func TestReadBarrierAfterRestore(t *testing.T) {
	nodes, fsms := testCluster(t, 3, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for v := uint64(1); v <= 5; v++ {
		if _, _, err := nodes[0].Apply(ctx, value(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nodes[0].Restore(value(99), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
	defer rcancel()
	if _, err := nodes[0].ReadBarrier(rctx); err != nil {
		t.Fatalf("read after the restore: %v", err)
	}
	if got := fsms[0].value.Load(); got != 99 {
		t.Fatalf("read after the restore: %d, want 99", got)
	}
	if _, _, err := nodes[0].Apply(ctx, value(7)); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[0].ReadBarrier(rctx); err != nil {
		t.Fatal(err)
	}
	if got := fsms[0].value.Load(); got != 7 {
		t.Fatalf("read after the write on the restored state: %d, want 7", got)
	}
}

// TestReadBarrierRefusesWithoutLeadership: a follower refuses at once; a
// leader whose followers are gone (its quorum killed) cannot verify its
// leadership and fails with ErrNotLeader instead of reading its state.
func TestReadBarrierRefusesWithoutLeadership(t *testing.T) {
	nodes, fsms := testCluster(t, 3, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := nodes[0].Apply(ctx, value(1)); err != nil {
		t.Fatal(err)
	}
	waitIndexes(t, nodes, fsms)
	if _, err := nodes[1].ReadBarrier(ctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("ReadBarrier on a follower: %v, want ErrNotLeader", err)
	}
	if _, err := nodes[0].ReadBarrier(ctx); err != nil {
		t.Fatalf("ReadBarrier on the leader: %v", err)
	}
	for _, nd := range nodes[1:] {
		if err := nd.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	if !nodes[0].IsLeader() {
		t.Skip("the leader stepped down before the read; nothing to test") // lease 250 ms: unlikely
	}
	start := time.Now()
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	idx, err := nodes[0].ReadBarrier(rctx)
	if err == nil {
		t.Fatalf("a leader without its quorum served a linearizable read (read index %d)", idx)
	}
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("ReadBarrier without a quorum: %v, want ErrNotLeader", err)
	}
	t.Logf("deposed leader refused the read after %s: %v", time.Since(start).Round(time.Millisecond), err)
	if _, err := nodes[0].ReadBarrier(ctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("second ReadBarrier without a quorum: %v, want ErrNotLeader", err)
	}
}

// TestReadBarrierNewLeaderWaitsForItsTerm: after a leader change the new
// leader answers only once an entry of its own term is committed, and its
// read index covers every write of the old leader.
func TestReadBarrierNewLeaderWaitsForItsTerm(t *testing.T) {
	nodes, fsms := testCluster(t, 3, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last uint64
	for v := uint64(1); v <= 20; v++ {
		if _, _, err := nodes[0].Apply(ctx, value(v)); err != nil {
			t.Fatal(err)
		}
		last = v
	}
	if err := nodes[0].LeadershipTransfer(ctx); err != nil {
		t.Fatal(err)
	}
	var leader int
	for {
		leader = -1
		for i, nd := range nodes {
			if nd.IsLeader() {
				leader = i
			}
		}
		if leader >= 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no new leader")
		}
		time.Sleep(time.Millisecond)
	}
	idx, err := nodes[leader].ReadBarrier(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := fsms[leader].value.Load(); got != last {
		t.Fatalf("new leader %s read %d at read index %d, want %d", nodes[leader].ID(), got, idx, last)
	}
	var l raft.Log
	if err := nodes[leader].store.GetLog(idx, &l); err != nil || l.Term != nodes[leader].raft.CurrentTerm() {
		t.Fatalf("read index %d: entry term %d (err %v), want the new term %d", idx, l.Term, err, nodes[leader].raft.CurrentTerm())
	}
}

// BenchmarkLinearizableRead compares ReadBarrier (leadership check, no log
// entry) with Barrier (a committed log entry), on 1 and 3 members over TLS
// on loopback.
func BenchmarkLinearizableRead(b *testing.B) {
	for _, n := range []int{1, 3} {
		for _, kind := range []string{"ReadBarrier", "Barrier"} {
			b.Run(fmt.Sprintf("members=%d/%s", n, kind), func(b *testing.B) {
				nodes, _ := testCluster(b, n, 0)
				ctx := context.Background()
				if _, _, err := nodes[0].Apply(ctx, value(1)); err != nil {
					b.Fatal(err)
				}
				start := nodes[0].LastIndex()
				b.ResetTimer()
				for range b.N {
					var err error
					if kind == "ReadBarrier" {
						_, err = nodes[0].ReadBarrier(ctx)
					} else {
						err = nodes[0].Barrier(ctx)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(nodes[0].LastIndex()-start)/float64(b.N), "entries/op")
			})
		}
	}
}
