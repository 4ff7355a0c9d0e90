package state

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// drain reads the events already queued on s without blocking (Apply
// publishes synchronously, so after it returns the events are queued).
// closed reports whether the channel was closed.
func drain(s *Subscription) (evs []string, closed bool) {
	for {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				return evs, true
			}
			evs = append(evs, describe(ev))
		default:
			return evs, false
		}
	}
}

// describe renders an event as "TYPE Kind/name@index (modify=N)".
func describe(ev *roostv1.WatchEvent) string {
	r, k := resource.Unwrap(ev.GetObject())
	return fmt.Sprintf("%s %s/%s@%d m%d", ev.GetType().String()[5:], k.Name, r.GetMetadata().GetName(), ev.GetIndex(),
		r.GetMetadata().GetModifyIndex())
}

func TestWatchOrdering(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(baseObjects()...))           // 1
	h.mustApply(h.objects(poolObj("workers", "prod"))) // 2
	all, err := h.f.Subscribe("", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	pools, err := h.f.Subscribe("pools", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pools.Close()

	labelled := poolObj("workers", "prod")
	labelled.GetPool().Metadata.Labels = map[string]string{"env": "prod"}
	h.mustApply(h.objects(labelled))                                            // 3
	h.mustApply(h.objects(poolObj("a", "staging"), clusterObj("staging", nil))) // 4
	h.mustApply(h.objects(labelled))                                            // 5: unchanged
	h.mustApply(deleteCmd("Pool", "a"))                                         // 6
	h.apply(deleteCmd("Cluster", "prod"))                                       // 7: refused
	h.mustApply(putMemberCmd("hub-a", "x", "y"))                                // 8: not an object

	got, closed := drain(all)
	want := []string{
		"ADDED Cluster/prod@2 m1",
		"ADDED MachineClass/standard@2 m1",
		"ADDED Pool/workers@2 m2",
		"MODIFIED Pool/workers@3 m3",
		"ADDED Pool/a@4 m4",
		"ADDED Cluster/staging@4 m4",
		"DELETED Pool/a@6 m6",
	}
	if closed || !slices.Equal(got, want) {
		t.Errorf("all kinds: closed=%v events:\n%v\nwant:\n%v", closed, got, want)
	}
	got, _ = drain(pools)
	want = []string{"ADDED Pool/workers@2 m2", "MODIFIED Pool/workers@3 m3", "ADDED Pool/a@4 m4", "DELETED Pool/a@6 m6"}
	if !slices.Equal(got, want) {
		t.Errorf("pools: %v, want %v", got, want)
	}

	_, err = h.f.Subscribe("gizmo", 0)
	wantCode(t, err, codes.InvalidArgument)
}

func TestWatchReplay(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(baseObjects()...)) // 1
	for i := 0; i < 4; i++ {                 // 2..5
		h.mustApply(h.objects(poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.ImageVersion = fmt.Sprint(i) })))
	}
	cases := []struct {
		kind string
		from uint64
		want []string
	}{
		{"", 3, []string{"MODIFIED Pool/workers@4 m4", "MODIFIED Pool/workers@5 m5"}},
		{"Pool", 1, []string{"ADDED Pool/workers@2 m2", "MODIFIED Pool/workers@3 m3", "MODIFIED Pool/workers@4 m4", "MODIFIED Pool/workers@5 m5"}},
		{"Cluster", 1, nil},
		{"", 5, nil},
		{"", 99, nil}, // a future index waits for it
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s from %d", tc.kind, tc.from), func(t *testing.T) {
			s, err := h.f.Subscribe(tc.kind, tc.from)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got, _ := drain(s); !slices.Equal(got, tc.want) {
				t.Errorf("replay = %v, want %v", got, tc.want)
			}
		})
	}
	// Replay continues seamlessly with live events.
	s, _ := h.f.Subscribe("Pool", 4)
	defer s.Close()
	h.mustApply(h.objects(poolObj("workers", "prod"))) // 6
	if got, want := mustDrain(s), []string{"MODIFIED Pool/workers@5 m5", "MODIFIED Pool/workers@6 m6"}; !slices.Equal(got, want) {
		t.Errorf("replay then live = %v, want %v", got, want)
	}
}

func mustDrain(s *Subscription) []string { evs, _ := drain(s); return evs }

func TestWatchOutOfRange(t *testing.T) {
	h := newHarness(t, Options{WatchRing: 4})
	h.mustApply(h.objects(baseObjects()...)) // 1: two events
	for i := 0; i < 9; i++ {                 // 2..10
		h.mustApply(h.objects(poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.ImageVersion = fmt.Sprint(i) })))
	}
	// The ring holds the events of indexes 7..10: replay works from 6 on.
	cases := []struct {
		from uint64
		n    int
		ok   bool
	}{{1, 0, false}, {5, 0, false}, {6, 4, true}, {9, 1, true}, {10, 0, true}}
	for _, tc := range cases {
		s, err := h.f.Subscribe("", tc.from)
		if !tc.ok {
			wantCode(t, err, codes.OutOfRange)
			continue
		}
		if err != nil {
			t.Fatalf("from %d: %v", tc.from, err)
		}
		if got := mustDrain(s); len(got) != tc.n {
			t.Errorf("from %d: %d events %v, want %d", tc.from, len(got), got, tc.n)
		}
		s.Close()
	}
	// A full re-list always works.
	s, err := h.f.Subscribe("", 0)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	t.Run("no ring", func(t *testing.T) {
		h := newHarness(t, Options{WatchRing: -1})
		h.mustApply(h.objects(baseObjects()...))
		_, err := h.f.Subscribe("", 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.f.Subscribe("", 1); err != nil {
			t.Errorf("from the current index: %v", err)
		}
		h.mustApply(h.objects(clusterObj("dev", nil)))
		_, err = h.f.Subscribe("", 1)
		wantCode(t, err, codes.OutOfRange)
	})
}

func TestWatchOverflow(t *testing.T) {
	h := newHarness(t, Options{WatchBuffer: 2})
	var objs []*roostv1.Object
	for i := 0; i < 10; i++ {
		objs = append(objs, clusterObj(fmt.Sprintf("c%02d", i), nil))
	}
	h.mustApply(h.objects(objs...))

	// The initial list does not count against the buffer.
	slow, err := h.f.Subscribe("", 0)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := h.f.Subscribe("", h.idx)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	var fastSeen []string
	for i := 0; i < 5; i++ {
		// Apply never blocks on the slow subscriber.
		h.mustApply(h.objects(clusterObj("c00", map[string]string{"n": fmt.Sprint(i)})))
		fastSeen = append(fastSeen, mustDrain(fast)...)
	}
	got, closed := drain(slow)
	if !closed {
		t.Fatal("slow subscription not closed")
	}
	if len(got) != 12 { // 10 initial + the 2 buffered live events
		t.Errorf("slow got %d events: %v", len(got), got)
	}
	if !errors.Is(slow.Err(), ErrWatchFellBehind) {
		t.Errorf("Err = %v, want ErrWatchFellBehind", slow.Err())
	}
	wantCode(t, slow.Err(), codes.Aborted)
	if len(fastSeen) != 5 || fast.Err() != nil {
		t.Errorf("fast subscriber: %v, err %v", fastSeen, fast.Err())
	}
	slow.Close() // after the FSM closed it: no panic
}

func TestWatchCloseAndRestore(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(baseObjects()...))
	snap := snapshotBytes(t, h.f)
	h.mustApply(h.objects(clusterObj("dev", nil)))

	closedByUser, _ := h.f.Subscribe("", 0)
	closedByUser.Close()
	closedByUser.Close()
	if _, closed := drain(closedByUser); !closed || closedByUser.Err() != nil {
		t.Errorf("after Close: closed=%v err=%v", closed, closedByUser.Err())
	}

	s, _ := h.f.Subscribe("Cluster", 0)
	if err := h.f.Restore(ioNopCloser(snap)); err != nil {
		t.Fatal(err)
	}
	if _, closed := drain(s); !closed || !errors.Is(s.Err(), ErrWatchRestored) {
		t.Errorf("after Restore: closed=%v err=%v", closed, s.Err())
	}
	// Replay restarts after the snapshot's index.
	_, err := h.f.Subscribe("", 0) // a full list works
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.f.Subscribe("", 1); err != nil {
		t.Errorf("from the snapshot index: %v", err)
	}
	h.idx = 1
	h.mustApply(h.objects(clusterObj("qa", nil))) // 2 again, on the restored state
	s2, err := h.f.Subscribe("", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustDrain(s2); !slices.Equal(got, []string{"ADDED Cluster/qa@2 m2"}) {
		t.Errorf("replay after restore = %v", got)
	}
}

// TestWatchConsistentUnderConcurrency subscribes while applies run and
// checks each subscription sees every change exactly once, in order.
func TestWatchConsistentUnderConcurrency(t *testing.T) {
	h := newHarness(t, Options{WatchBuffer: 10000})
	h.mustApply(h.objects(baseObjects()...))
	const n = 300
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < n; i++ {
			h.mustApply(h.objects(poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.ImageVersion = fmt.Sprint(i) })))
		}
	}()
	var subs []*Subscription
	for i := 0; i < 20; i++ {
		s, err := h.f.Subscribe("Pool", 0)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	<-done
	last := h.idx
	for i, s := range subs {
		var prev uint64
		var seen uint64
		for ev := range s.Events() {
			m := ev.GetObject().GetPool().GetMetadata().GetModifyIndex()
			if m <= prev {
				t.Fatalf("sub %d: modifyIndex %d after %d", i, m, prev)
			}
			if prev != 0 && m != prev+1 {
				t.Fatalf("sub %d: missed changes between %d and %d", i, prev, m)
			}
			prev, seen = m, seen+1
			if m == last {
				break
			}
		}
		if prev != last {
			t.Errorf("sub %d: last modifyIndex %d, want %d (%d events)", i, prev, last, seen)
		}
		s.Close()
	}
}
