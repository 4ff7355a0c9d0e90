package liveness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)} }

func TestTTLScalesWithFleet(t *testing.T) {
	c := Config{MinTTL: 30 * time.Second, MaxHeartbeatsPerSecond: 100}
	for _, tc := range []struct {
		n        int
		ttl, ivl time.Duration
	}{
		{0, 30 * time.Second, 10 * time.Second},
		{1000, 30 * time.Second, 10 * time.Second},
		{3000, 30 * time.Second, 10 * time.Second},
		{6000, 60 * time.Second, 20 * time.Second},
		{100000, 1000 * time.Second, 333 * time.Second},
	} {
		if got := c.TTL(tc.n); got != tc.ttl {
			t.Errorf("TTL(%d) = %v, want %v", tc.n, got, tc.ttl)
		}
		if got := c.Interval(tc.n); got != tc.ivl {
			t.Errorf("Interval(%d) = %v, want %v", tc.n, got, tc.ivl)
		}
	}
	// Defaults: 10,000 agents beat every 10 s.
	if got := (Config{}).Interval(10000); got != 10*time.Second {
		t.Errorf("default Interval(10000) = %v", got)
	}
	if j := Jitter("a", time.Minute); j < 0 || j >= 15*time.Second || j != Jitter("a", time.Minute) {
		t.Errorf("jitter %v not stable or out of [0, ttl/4)", j)
	}
}

func views(n int, reachable bool) []ServerView {
	out := make([]ServerView, n)
	for i := range out {
		out[i] = ServerView{Name: fmt.Sprintf("srv-%03d", i), Reachable: reachable}
	}
	return out
}

func names(cs []*roostv1.ReachabilityChange) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s=%v", c.GetName(), c.GetReachable()))
	}
	return out
}

func TestGraceAfterLeaderChangeAndTransitions(t *testing.T) {
	clk := newClock()
	tr := NewTracker(Config{MinTTL: 30 * time.Second, Now: clk.Now})
	servers := views(3, true)
	// Not leading: nothing, and heartbeats are ignored.
	tr.Seen("srv-000")
	if ch, _ := tr.Evaluate(servers); len(ch) != 0 {
		t.Fatalf("not leading, got %v", names(ch))
	}

	tr.StartLeading()
	// srv-000 and srv-001 beat every 10 s; srv-002 is silent. Nothing is
	// marked within one TTL of taking over, whatever the heartbeats.
	for i := 0; i < 3; i++ {
		clk.Advance(10 * time.Second)
		tr.Seen("srv-000", "srv-001")
		if ch, counts := tr.Evaluate(servers); len(ch) != 0 || counts.Reachable != 3 {
			t.Fatalf("within grace at +%ds: %v %+v", (i+1)*10, names(ch), counts)
		}
	}
	// After TTL + the largest jitter (ttl/4), srv-002 is out; only it.
	clk.Advance(8 * time.Second)
	tr.Seen("srv-000", "srv-001")
	var ch []*roostv1.ReachabilityChange
	ch, _ = tr.Evaluate(servers)
	if len(ch) > 1 {
		t.Fatalf("too many transitions: %v", names(ch))
	}
	if len(ch) == 0 {
		// its jitter may push the deadline up to ttl/4 later
		clk.Advance(8 * time.Second)
		tr.Seen("srv-000", "srv-001")
		ch, _ = tr.Evaluate(servers)
	}
	if fmt.Sprint(names(ch)) != "[srv-002=false]" || ch[0].GetLastSeen() != nil {
		t.Fatalf("transitions = %v (last seen %v), want srv-002 unreachable with no last seen", names(ch), ch[0].GetLastSeen())
	}
	// The FSM records it; the next evaluation writes nothing.
	servers[2].Reachable = false
	if ch, counts := tr.Evaluate(servers); len(ch) != 0 || counts.Unreachable != 1 || counts.Reachable != 2 {
		t.Fatalf("after recording: %v %+v", names(ch), counts)
	}
	// It comes back: one transition, with its last-seen time.
	tr.Seen("srv-002")
	ch, _ = tr.Evaluate(servers)
	if fmt.Sprint(names(ch)) != "[srv-002=true]" || !ch[0].GetLastSeen().AsTime().Equal(clk.Now()) {
		t.Fatalf("transitions = %v", names(ch))
	}
	servers[2].Reachable = true

	// Leader change: a new leader (or this one again) starts with an empty
	// memory and must wait a full TTL even for servers that stopped
	// beating long ago.
	tr.StopLeading()
	clk.Advance(10 * time.Minute)
	tr.StartLeading()
	clk.Advance(29 * time.Second)
	if ch, counts := tr.Evaluate(servers); len(ch) != 0 || !counts.InGrace {
		t.Fatalf("during grace: %v %+v", names(ch), counts)
	}
	clk.Advance(9 * time.Second) // > ttl + ttl/4
	if ch, _ := tr.Evaluate(servers); len(ch) != 3 {
		t.Fatalf("after grace, all silent servers go: %v", names(ch))
	}
}

func TestTTLGrowsWithFleetInEvaluate(t *testing.T) {
	clk := newClock()
	tr := NewTracker(Config{MinTTL: 10 * time.Second, MaxHeartbeatsPerSecond: 10, Now: clk.Now})
	tr.StartLeading()
	servers := views(1000, true) // ttl = 100 s
	clk.Advance(60 * time.Second)
	if ch, counts := tr.Evaluate(servers); len(ch) != 0 || counts.TTL != 100*time.Second {
		t.Fatalf("%d transitions, ttl %v", len(ch), counts.TTL)
	}
	clk.Advance(70 * time.Second) // 130 s > 100 s + 25 s
	if ch, _ := tr.Evaluate(servers); len(ch) != 1000 {
		t.Fatalf("%d transitions, want 1000 (batched in one evaluation)", len(ch))
	}
}

func TestControllerAndReporter(t *testing.T) {
	clk := newClock()
	tr := NewTracker(Config{MinTTL: 30 * time.Second, Now: clk.Now})
	leader := true
	var mu sync.Mutex
	recorded := map[string]bool{"a": true, "b": true}
	proposals := 0
	ctrl := &Controller{
		Tracker:  tr,
		IsLeader: func() bool { return leader },
		Servers: func() []ServerView {
			mu.Lock()
			defer mu.Unlock()
			return []ServerView{{Name: "a", Reachable: recorded["a"]}, {Name: "b", Reachable: recorded["b"]}}
		},
		Propose: func(_ context.Context, c *roostv1.SetServerReachability) error {
			mu.Lock()
			defer mu.Unlock()
			proposals++
			for _, ch := range c.GetChanges() {
				recorded[ch.GetName()] = ch.GetReachable()
			}
			return nil
		},
	}
	var sent [][]string
	sendErr := errors.New("no leader")
	rep := &Reporter{Tracker: tr, IsLeader: func() bool { return leader }, Send: func(_ context.Context, n []string) error {
		if sendErr != nil {
			return sendErr
		}
		sent = append(sent, n)
		return nil
	}}
	ctx := context.Background()
	ctrl.Step(ctx) // becomes leader
	for i := 0; i < 10; i++ {
		clk.Advance(10 * time.Second)
		rep.Seen("a") // on the leader: straight into the tracker
		ctrl.Step(ctx)
	}
	if proposals != 1 || recorded["b"] || !recorded["a"] {
		t.Fatalf("proposals %d, recorded %v; want one batch marking b unreachable", proposals, recorded)
	}
	gauges := func() (float64, float64) {
		return testutil.ToFloat64(ctrl.Metrics.reachable), testutil.ToFloat64(ctrl.Metrics.unreachable)
	}
	if r, u := gauges(); r != 1 || u != 1 {
		t.Fatalf("leader's gauges: reachable %v unreachable %v, want 1 1", r, u)
	}
	// A follower collects and forwards; failures keep the names. It
	// exports no counts of its own.
	leader = false
	ctrl.Step(ctx)
	if r, u := gauges(); r != 0 || u != 0 {
		t.Fatalf("gauges after stepping down: reachable %v unreachable %v, want 0 0", r, u)
	}
	rep.Seen("a")
	rep.Seen("b")
	rep.Flush(ctx)
	if len(sent) != 0 {
		t.Fatal("sent despite error")
	}
	sendErr = nil
	rep.Flush(ctx)
	if len(sent) != 1 || len(sent[0]) != 2 {
		t.Fatalf("sent %v", sent)
	}
	rep.Flush(ctx)
	if len(sent) != 1 {
		t.Fatalf("empty flush sent %v", sent)
	}
}

// A Server that enrolls long after the leader took over gets a full TTL
// from its enrollment to open its stream (found in QEMU: a Server was
// marked Unreachable between Enroll and its first heartbeat).
func TestNewServerGetsATTLFromEnrollment(t *testing.T) {
	clk := newClock()
	tr := NewTracker(Config{MinTTL: 30 * time.Second, Now: clk.Now})
	tr.StartLeading()
	clk.Advance(10 * time.Minute)
	fresh := []ServerView{{Name: "srv-new", Reachable: true, EnrolledAt: clk.Now().Add(-2 * time.Second)}}
	if ch, _ := tr.Evaluate(fresh); len(ch) != 0 {
		t.Fatalf("just enrolled, not yet connected: %v", names(ch))
	}
	clk.Advance(38 * time.Second) // > ttl + ttl/4 after enrollment, never seen
	if ch, _ := tr.Evaluate(fresh); fmt.Sprint(names(ch)) != "[srv-new=false]" {
		t.Fatalf("silent after its TTL: %v", names(ch))
	}
}

// LastSeen answers from the leader's memory: nothing while not leading or
// before a heartbeat, then the heartbeat time, recent while within the
// TTL plus the Server's jitter.
func TestLastSeen(t *testing.T) {
	clk := newClock()
	tr := NewTracker(Config{MinTTL: 30 * time.Second, Now: clk.Now})
	tr.Seen("a")
	if _, _, ok := tr.LastSeen("a"); ok {
		t.Fatal("LastSeen answered while not leading")
	}
	tr.StartLeading()
	if _, _, ok := tr.LastSeen("a"); ok {
		t.Fatal("LastSeen answered for a Server not heard since leading")
	}
	tr.Seen("a")
	at := clk.Now()
	tr.Evaluate([]ServerView{{Name: "a", Reachable: true}})
	clk.Advance(10 * time.Second)
	if seen, recent, ok := tr.LastSeen("a"); !ok || !recent || !seen.Equal(at) {
		t.Errorf("10 s after a beat: %v %v %v, want %v true true", seen, recent, ok, at)
	}
	clk.Advance(30*time.Second + Jitter("a", 30*time.Second))
	if seen, recent, ok := tr.LastSeen("a"); !ok || recent || !seen.Equal(at) {
		t.Errorf("past the TTL: %v %v %v, want %v false true", seen, recent, ok, at)
	}
	tr.StopLeading()
	if _, _, ok := tr.LastSeen("a"); ok {
		t.Error("LastSeen answered after leadership ended")
	}
}
