package rollout

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAdmissionsShareAPlanOnlyWhenFreshEnough: Admits that arrived before
// a computation began share it; a later state or time computes again; a
// waiter whose context ends leaves at once; a failed computation (a deleted
// Pool) is not kept.
func TestAdmissionsShareAPlanOnlyWhenFreshEnough(t *testing.T) {
	var a admissions
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	var computed atomic.Int32
	compute := func(index uint64, at time.Time) func() (*admission, error) {
		return func() (*admission, error) {
			computed.Add(1)
			return &admission{index: index, at: at}, nil
		}
	}

	// One computation holds the Pool's turn; five Admits arrive meanwhile.
	release := make(chan struct{})
	first := make(chan *admission)
	go func() {
		l, _ := a.plan(ctx, "web", 10, t0, func() (*admission, error) {
			<-release
			return compute(11, t0)()
		})
		first <- l
	}()
	for len(a.pool("web").turn) == 0 {
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	got := make([]*admission, 5)
	for i := range got {
		wg.Go(func() {
			got[i], _ = a.plan(ctx, "web", 11, t0, compute(12, t0))
		})
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	shared := <-first
	wg.Wait()
	if computed.Load() != 1 {
		t.Fatalf("5 Admits that arrived at the computation's index and time computed %d more plans, want 0", computed.Load()-1)
	}
	for i, l := range got {
		if l != shared {
			t.Fatalf("Admit %d got %+v, want the shared plan %+v", i, l, shared)
		}
	}

	// Newer state, or a later clock, is not answered from the old plan.
	if l, _ := a.plan(ctx, "web", 12, t0, compute(12, t0)); l == shared {
		t.Fatal("an Admit that arrived at index 12 got the plan read at index 11")
	}
	if l, _ := a.plan(ctx, "web", 12, t0.Add(time.Second), compute(12, t0.Add(time.Second))); l.at != t0.Add(time.Second) {
		t.Fatalf("an Admit that arrived a second later got a plan of %s", l.at)
	}
	if n := computed.Load(); n != 3 {
		t.Fatalf("computed %d plans, want 3", n)
	}
	// Other Pools do not wait for web's turn.
	a.pool("web").turn <- struct{}{}
	if _, err := a.plan(ctx, "db", 1, t0, compute(1, t0)); err != nil {
		t.Fatalf("pool db waited for web's turn: %v", err)
	}
	// A waiter leaves when its context ends.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := a.plan(cctx, "web", 13, t0, compute(13, t0)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for a busy Pool's turn until the context ended: got %v, want %v", err, context.DeadlineExceeded)
	}
	<-a.pool("web").turn

	// A failed computation is returned and the Pool forgotten.
	gone := errors.New("pool web does not exist")
	if _, err := a.plan(ctx, "web", 14, t0, func() (*admission, error) { return nil, gone }); !errors.Is(err, gone) {
		t.Fatalf("a failed computation returned %v, want %v", err, gone)
	}
	a.mu.Lock()
	_, kept := a.pools["web"]
	a.mu.Unlock()
	if kept {
		t.Fatal("a Pool whose plan failed is still kept")
	}
}
