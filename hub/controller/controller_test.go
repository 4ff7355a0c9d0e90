package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// fleet is a real FSM the tests write MachineClasses into.
type fleet struct {
	t   *testing.T
	f   *state.FSM
	idx uint64
	// subscribes counts Watch calls: each one lists every object of its kind.
	subscribes atomic.Int32
}

func newFleet(t *testing.T) *fleet {
	return &fleet{t: t, f: state.New(state.Options{})}
}

// apply writes MachineClasses named names, each with description desc.
func (fl *fleet) apply(desc string, names ...string) {
	fl.t.Helper()
	var objs []*roostv1.Object
	var uids []string
	for _, n := range names {
		objs = append(objs, resource.Wrap(&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: n, Annotations: map[string]string{"d": desc}}, Spec: &roostv1.MachineClassSpec{}}))
		uids = append(uids, "uid-"+n)
	}
	data, err := proto.Marshal(&roostv1.Command{Time: timestamppb.Now(), Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{Objects: objs, Uids: uids}}})
	if err != nil {
		fl.t.Fatal(err)
	}
	fl.idx++
	if res := fl.f.Apply(&raft.Log{Index: fl.idx, Type: raft.LogCommand, Data: data}).(*state.ApplyResult); res.Err != nil {
		fl.t.Fatal(res.Err)
	}
}

func (fl *fleet) watch(kind string, from uint64) (*state.Subscription, error) {
	fl.subscribes.Add(1)
	return fl.f.Subscribe(kind, from)
}

// recorder counts the reconciles of each key.
type recorder struct {
	mu    sync.Mutex
	calls map[string]int
	total int
}

func (r *recorder) record(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	r.calls[key]++
	r.total++
	return r.calls[key]
}

func (r *recorder) count(key string) (int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[key], r.total
}

func byName(ev *roostv1.WatchEvent) []string {
	return []string{ev.GetObject().GetMachineClass().GetMetadata().GetName()}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// eventually waits up to 5 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// start runs c until the test ends.
func start(t *testing.T, c *Controller) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func alwaysLeader() bool { return true }

// One changed object reaches its controller as its one key: no other key
// is reconciled and nothing is listed again.
func TestChangeReachesItsKeyWithoutFullScan(t *testing.T) {
	fl := newFleet(t)
	var names []string
	for i := range 100 {
		names = append(names, fmt.Sprintf("mc-%03d", i))
	}
	fl.apply("v1", names...)
	var rec recorder
	c := &Controller{Name: "test", Watch: fl.watch, Sources: []Source{{Kind: "MachineClass", Keys: byName}}, IsLeader: alwaysLeader, Log: quiet(),
		LeaderPoll: time.Millisecond, Reconcile: func(_ context.Context, key string) (Result, error) { rec.record(key); return Result{}, nil }}
	start(t, c)
	// The term starts from the whole state: every key once.
	eventually(t, "the first pass", func() bool { _, total := rec.count(""); return total == 100 })

	fl.apply("v2", "mc-042")
	eventually(t, "mc-042's reconcile", func() bool { n, _ := rec.count("mc-042"); return n == 2 })
	time.Sleep(20 * time.Millisecond)
	if n, total := rec.count("mc-042"); n != 2 || total != 101 {
		t.Errorf("after one change: mc-042 reconciled %d times, %d reconciles in all; want 2 and 101", n, total)
	}
	if n := fl.subscribes.Load(); n != 1 {
		t.Errorf("listed the state %d times, want once", n)
	}
}

// A key queued several times while a worker holds it is reconciled once
// more, not once per add, and no other worker takes it meanwhile.
func TestQueueDedupsKeys(t *testing.T) {
	var rec recorder
	release := make(chan struct{})
	c := &Controller{Name: "test", IsLeader: alwaysLeader, Workers: 4, Log: quiet(), LeaderPoll: time.Millisecond,
		Reconcile: func(_ context.Context, key string) (Result, error) {
			if rec.record(key) == 1 {
				<-release
			}
			return Result{}, nil
		}}
	start(t, c)
	waitTerm(t, c)
	c.Enqueue("a")
	eventually(t, "a", func() bool { n, _ := rec.count("a"); return n == 1 })
	for range 5 {
		c.Enqueue("a")
	}
	time.Sleep(20 * time.Millisecond)
	if n, _ := rec.count("a"); n != 1 {
		t.Fatalf("a reconciled %d times while a worker held it, want 1", n)
	}
	close(release)
	eventually(t, "a again", func() bool { n, _ := rec.count("a"); return n == 2 })
	time.Sleep(20 * time.Millisecond)
	if n, _ := rec.count("a"); n != 2 {
		t.Errorf("a reconciled %d times, want 2", n)
	}
}

// waitTerm waits until c leads.
func waitTerm(t *testing.T, c *Controller) {
	t.Helper()
	eventually(t, "the term", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.q != nil })
}

// A failing key is retried with a growing backoff of its own, and a
// Result.RequeueAfter brings a key back after that long.
func TestBackoffAndRequeueAfter(t *testing.T) {
	var mu sync.Mutex
	var failAt, requeueAt []time.Time
	c := &Controller{Name: "test", IsLeader: alwaysLeader, Workers: 2, Log: quiet(), LeaderPoll: time.Millisecond,
		BaseBackoff: 10 * time.Millisecond, MaxBackoff: time.Second,
		Reconcile: func(_ context.Context, key string) (Result, error) {
			mu.Lock()
			defer mu.Unlock()
			switch key {
			case "fail":
				failAt = append(failAt, time.Now())
				if len(failAt) <= 4 {
					return Result{}, errors.New("not yet")
				}
			case "later":
				requeueAt = append(requeueAt, time.Now())
				if len(requeueAt) < 3 {
					return Result{RequeueAfter: 30 * time.Millisecond}, nil
				}
			}
			return Result{}, nil
		}}
	start(t, c)
	waitTerm(t, c)
	c.Enqueue("fail")
	c.Enqueue("later")
	eventually(t, "retries", func() bool { mu.Lock(); defer mu.Unlock(); return len(failAt) == 5 && len(requeueAt) == 3 })
	mu.Lock()
	defer mu.Unlock()
	// Backoff 10, 20, 40, 80 ms after failures 1–4.
	for i := 1; i < len(failAt); i++ {
		want := 10 * time.Millisecond << (i - 1)
		if got := failAt[i].Sub(failAt[i-1]); got < want {
			t.Errorf("retry %d came after %s, want ≥ %s", i, got, want)
		}
	}
	for i := 1; i < len(requeueAt); i++ {
		if got := requeueAt[i].Sub(requeueAt[i-1]); got < 30*time.Millisecond {
			t.Errorf("requeue %d came after %s, want ≥ 30ms", i, got)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if len(failAt) != 5 || len(requeueAt) != 3 {
		t.Errorf("reconciled again after success: %d failing, %d requeued", len(failAt), len(requeueAt))
	}
}

// The controller runs only while its member leads: it stops (OnStop,
// nothing reconciled) when leadership is lost and starts over from the
// whole state, after the barrier, when it comes back.
func TestLeadershipStopsAndStarts(t *testing.T) {
	fl := newFleet(t)
	fl.apply("v1", "a", "b")
	var leading, barriers, starts, stops atomic.Int32
	leading.Store(1)
	var rec recorder
	c := &Controller{Name: "test", Watch: fl.watch, Sources: []Source{{Kind: "MachineClass", Keys: byName}}, Log: quiet(), LeaderPoll: time.Millisecond,
		IsLeader: func() bool { return leading.Load() == 1 },
		Barrier:  func(context.Context) error { barriers.Add(1); return nil },
		OnStart:  func(context.Context) { starts.Add(1) },
		OnStop:   func() { stops.Add(1) },
		Reconcile: func(_ context.Context, key string) (Result, error) {
			if leading.Load() != 1 {
				t.Errorf("reconciled %s while not leading", key)
			}
			rec.record(key)
			return Result{}, nil
		}}
	start(t, c)
	eventually(t, "the first term", func() bool { _, total := rec.count(""); return total == 2 })
	leading.Store(0)
	eventually(t, "the stop", func() bool { return stops.Load() == 1 })
	fl.apply("v2", "a")
	time.Sleep(20 * time.Millisecond)
	if _, total := rec.count(""); total != 2 {
		t.Errorf("%d reconciles while not leading", total-2)
	}
	leading.Store(1)
	eventually(t, "the second term", func() bool { _, total := rec.count(""); return total == 4 })
	if b, s := barriers.Load(), starts.Load(); b != 2 || s != 2 {
		t.Errorf("barriers %d, starts %d; want 2 each (one per term)", b, s)
	}
}

// A resync queues its keys at the start of a term and then periodically.
func TestResync(t *testing.T) {
	var rec recorder
	c := &Controller{Name: "test", IsLeader: alwaysLeader, Log: quiet(), LeaderPoll: time.Millisecond,
		Resync: 10 * time.Millisecond, ResyncKeys: func() []string { return []string{"all"} },
		Reconcile: func(_ context.Context, key string) (Result, error) { rec.record(key); return Result{}, nil }}
	start(t, c)
	eventually(t, "three resyncs", func() bool { n, _ := rec.count("all"); return n >= 3 })
}
