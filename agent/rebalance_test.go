package agent

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestRendezvousOrder(t *testing.T) {
	hubs := []string{"10.0.0.1:7443", "10.0.0.2:7443", "10.0.0.3:7443"}
	first := map[string]int{}
	const n = 3000
	for i := range n {
		name := fmt.Sprintf("server-%04d", i)
		order := rendezvousOrder(name, hubs)
		// The order depends on the set, not on how it is listed.
		if rev := rendezvousOrder(name, []string{hubs[2], hubs[0], hubs[1]}); !slices.Equal(rev, order) {
			t.Fatalf("%s: order %v for one listing, %v for another", name, order, rev)
		}
		// Without a member, the others keep their relative order: only
		// the removed member's agents move.
		for _, gone := range hubs {
			want := slices.DeleteFunc(slices.Clone(order), func(h string) bool { return h == gone })
			if got := rendezvousOrder(name, slices.DeleteFunc(slices.Clone(hubs), func(h string) bool { return h == gone })); !slices.Equal(got, want) {
				t.Fatalf("%s without %s: %v, want %v", name, gone, got, want)
			}
		}
		first[order[0]]++
	}
	for _, h := range hubs {
		if first[h] < n/3*85/100 || first[h] > n/3*115/100 {
			t.Errorf("%s is the first choice of %d of %d servers, want about a third: %v", h, first[h], n, first)
		}
	}
}

func TestSetHubsRanksOnceEnrolled(t *testing.T) {
	members := []string{"10.0.0.1:7443", "10.0.0.2:7443", "10.0.0.3:7443"}
	lb := "hub.example:7443"
	a := &Agent{o: Options{Hubs: []string{lb, members[1]}}}
	a.setHubs(members)
	if a.ranked || len(a.hubs) != 4 {
		t.Fatalf("before enrollment: hubs %v ranked %v, want all four, random order", a.hubs, a.ranked)
	}
	if got := a.firstChoice("anything"); got != "" {
		t.Fatalf("first choice before enrollment %q, want none", got)
	}
	// Once enrolled the order is by preference, members before configured
	// extras, even when the random order happened to be that order.
	a.state.ServerName = "server-0001"
	want := append(rendezvousOrder("server-0001", members), lb)
	a.hubs = slices.Clone(want)
	a.setHubs(members)
	if !a.ranked || !slices.Equal(a.hubs, want) {
		t.Fatalf("after enrollment: hubs %v ranked %v, want %v ranked", a.hubs, a.ranked, want)
	}
	if got := a.firstChoice(want[1]); got != want[0] {
		t.Fatalf("first choice while on %s: %q, want %s", want[1], got, want[0])
	}
	if got := a.firstChoice(want[0]); got != "" {
		t.Fatalf("first choice while on it: %q, want none", got)
	}
	// A failed session moves past the hub that failed, a rebalance to the
	// first choice.
	a.setCurrent(want[1], 1)
	if a.currentHub() != want[2] {
		t.Fatalf("after %s failed: current %s, want %s", want[1], a.currentHub(), want[2])
	}
	a.setCurrent(want[0], 0)
	if a.currentHub() != want[0] {
		t.Fatalf("after rebalancing: current %s, want %s", a.currentHub(), want[0])
	}
}

func TestRebalanceWait(t *testing.T) {
	for _, tc := range []struct {
		interval, heartbeat time.Duration
		min                 time.Duration // 0: off
	}{
		{0, 10 * time.Second, DefaultRebalanceInterval},
		{0, 30 * time.Second, 6 * time.Minute}, // 12 heartbeats
		{5 * time.Second, 30 * time.Second, 5 * time.Second},
		{-1, 10 * time.Second, 0},
	} {
		a := &Agent{o: Options{RebalanceInterval: tc.interval}, heartbeat: tc.heartbeat}
		for range 100 {
			w := a.rebalanceWait()
			if tc.min == 0 && w != 0 || tc.min > 0 && (w < tc.min || w >= 2*tc.min) {
				t.Fatalf("interval %v heartbeat %v: wait %v, want in [%v, %v)", tc.interval, tc.heartbeat, w, tc.min, 2*tc.min)
			}
		}
	}
}
