package rollout

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/roostfleet/roost/hub/controller"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// TestEventsSimulation runs the rollout simulation under the current
// apply rules with the rollout controller's EventRecorder, 10,000 Servers
// (200 pools of 50; one Server hangs in its reboot, so its Lease expires)
// over one day of fake time, with every connected agent reporting an
// unchanged status every hour of it, and checks the operations log:
//
//   - it stays bounded at every step: at most state.MaxEvents Events, at
//     most state.MaxEventsPerObject per object;
//   - a round of unchanged status reports (the agents' heartbeats) adds
//     no Event, counts no repeat and changes none, and the controllers
//     propose no RecordEvents command for them: the only Raft entries of
//     events are RecordEvents batches, at most one per simulation step
//     (plus one per state.MaxRecordEvents events);
//   - the expired Lease is recorded once (LeaseExpired, through the
//     recorder);
//   - a watch of kind Event (what get events --watch reads) streams
//     every kept Event, ADDED before MODIFIED, ending with its stored
//     count;
//   - each Server's Events about its new Revision come in the order the
//     rollout did the work: RevisionRendered, LeaseGranted, BootGood,
//     LeaseReleased. While nothing was dropped (-short), every Server of
//     a finished pool has that whole sequence, each finished pool's
//     RolloutStarted comes before its RolloutCompleted, and failing pools
//     record RolloutHalted.
//
// ROOST_SIM_SCALE=POOLSxSERVERS changes the size; -short (make test-unit)
// runs 20x10, small enough that no Event is dropped; the full size runs in
// make test-sim (several minutes).
func TestEventsSimulation(t *testing.T) {
	cfg := simConfig{pools: 200, perPool: 50, failingPools: 3, outages: 20, start: time.Date(2027, 3, 24, 0, 0, 0, 0, time.UTC), days: 1}
	if testing.Short() {
		cfg.pools, cfg.perPool = 20, 10
	}
	if v := os.Getenv("ROOST_SIM_SCALE"); v != "" {
		fmt.Sscanf(v, "%dx%d", &cfg.pools, &cfg.perPool)
	}
	begin := time.Now()
	var recordCmds, recorded int
	s := newSimWith(t, 7, cfg, func(s *sim) {
		s.rules = state.RulesVersion
		s.ctrl.Recorder = &controller.EventRecorder{Source: "rollout", Now: func() time.Time { return s.now },
			Propose: func(_ context.Context, c *roostv1.Command) error {
				recordCmds++
				recorded += len(c.GetRecordEvents().GetEvents())
				return s.apply(c).Err
			}}
	})
	// One Server whose reboot never ends: its Lease expires, which the
	// rollout controller records (EventRecorder, a RecordEvents command).
	hung := s.pools[len(s.pools)-1].servers[0]
	for _, sp := range s.pools {
		if !sp.failing {
			hung = sp.servers[0]
			break
		}
	}
	hung.hang = true
	// What 'roostctl get events --watch' streams: the FSM's watch of kind
	// Event (the Watch RPC serves it), drained aside.
	sub, err := s.f.Subscribe("Event", 0)
	if err != nil {
		t.Fatal(err)
	}
	watched := make(chan []*roostv1.WatchEvent, 1)
	go func() {
		var evs []*roostv1.WatchEvent
		for ev := range sub.Events() {
			evs = append(evs, ev)
		}
		watched <- evs
	}()
	ctx := context.Background()
	end := cfg.start.Add(time.Duration(cfg.days) * 24 * time.Hour)
	var lastBeat time.Time
	beats, beatRounds, everDropped := 0, 0, false
	for s.now.Before(end) {
		s.step(ctx)
		n := s.f.Count("Event")
		if n > state.MaxEvents {
			t.Fatalf("%s: %d Events kept, more than MaxEvents=%d", s.now, n, state.MaxEvents)
		}
		if n == state.MaxEvents {
			everDropped = true
		}
		if s.now.Sub(lastBeat) >= time.Hour {
			lastBeat = s.now
			before := eventLog(t, s.f)
			idx := s.idx
			rc := recordCmds
			for _, sp := range s.pools {
				for _, srv := range sp.servers {
					if srv.rebooting {
						continue
					}
					s.must(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{Name: srv.name, Connected: true}}})
					beats++
				}
			}
			s.ctrl.Recorder.FlushNow(ctx)
			if after := eventLog(t, s.f); after != before {
				t.Fatalf("%s: a round of %d unchanged status reports changed the Events:\nbefore %s\nafter  %s", s.now, s.idx-idx, before, after)
			}
			if recordCmds != rc {
				t.Fatalf("%s: a round of unchanged status reports proposed %d RecordEvents commands", s.now, recordCmds-rc)
			}
			beatRounds++
		}
		if s.allDone() {
			break
		}
		s.steps++
		s.now = s.nextEvent()
	}
	for _, e := range s.errs { // maxUnavailable and windows held
		t.Error(e)
	}
	if recorded != 1 {
		t.Errorf("%d Events recorded through RecordEvents, want 1 (the hung Server's LeaseExpired)", recorded)
	}
	if max := s.steps + 1 + recorded/state.MaxRecordEvents; recordCmds > max {
		t.Errorf("%d RecordEvents commands in %d steps, want at most %d", recordCmds, s.steps+1, max)
	}

	sub.Close()
	streamed := <-watched
	if err := sub.Err(); err != nil {
		t.Logf("the watch ended early: %v (not checked)", err)
	} else {
		// Every Event kept was streamed, added before it was modified,
		// and the stream's last version of each is the stored one.
		last := map[string]*roostv1.WatchEvent{}
		for _, ev := range streamed {
			name := ev.GetObject().GetEvent().GetMetadata().GetName()
			if ev.GetType() == roostv1.WatchEvent_TYPE_MODIFIED && last[name] == nil {
				t.Fatalf("Event %s streamed MODIFIED before ADDED", name)
			}
			last[name] = ev
		}
		for _, o := range s.f.Reader().List("Event") {
			e := o.GetEvent()
			got := last[e.GetMetadata().GetName()]
			if got == nil || got.GetType() == roostv1.WatchEvent_TYPE_DELETED || got.GetObject().GetEvent().GetStatus().GetCount() != e.GetStatus().GetCount() {
				t.Fatalf("Event %s (count %d): the watch last streamed %v", e.GetMetadata().GetName(), e.GetStatus().GetCount(), got)
			}
		}
	}
	evs := listAllEvents(t, s.f)
	perObject := map[string][]*roostv1.Event{}
	for _, e := range evs {
		io := e.GetSpec().GetInvolvedObject()
		k := io.GetKind() + "/" + io.GetName()
		perObject[k] = append(perObject[k], e)
	}
	for k, es := range perObject {
		if len(es) > state.MaxEventsPerObject {
			t.Errorf("%s keeps %d Events, more than MaxEventsPerObject=%d", k, len(es), state.MaxEventsPerObject)
		}
	}
	// Order of each Server's work on Revision 2.
	rank := map[string]int{"RevisionRendered": 0, "LeaseGranted": 1, "Booted": 2, "BootGood": 3, "BootFailed": 3, "LeaseExpired": 3, "LeaseReleased": 4}
	checked := 0
	for _, sp := range s.pools {
		for _, srv := range sp.servers {
			var seq []string
			for _, e := range perObject["Server/"+srv.name] {
				if strings.Contains(e.GetSpec().GetMessage(), "Revision 2") {
					seq = append(seq, e.GetSpec().GetReason())
				}
			}
			for i := 1; i < len(seq); i++ {
				if rank[seq[i]] < rank[seq[i-1]] {
					t.Errorf("Server %s: Events %v out of order", srv.name, seq)
					break
				}
			}
			if !everDropped && !srv.fail && srv.outageStart.IsZero() && sp.doneAt != (time.Time{}) {
				if got := strings.Join(seq, ","); got != "RevisionRendered,LeaseGranted,BootGood,LeaseReleased" {
					t.Errorf("Server %s of finished pool %s: Events %s, want RevisionRendered,LeaseGranted,BootGood,LeaseReleased", srv.name, sp.name, got)
				}
				checked++
			}
		}
		var poolSeq []string
		for _, e := range perObject["Pool/"+sp.name] {
			poolSeq = append(poolSeq, e.GetSpec().GetReason())
		}
		got := strings.Join(poolSeq, ",")
		switch {
		case everDropped:
			// the pool's Events may have made room for newer ones
		case sp.failing && !strings.Contains(got, "RolloutHalted"):
			t.Errorf("failing pool %s: Events %s, want RolloutHalted", sp.name, got)
		case !sp.failing && !sp.doneAt.IsZero() && !strings.HasPrefix(got, "RolloutStarted"):
			t.Errorf("pool %s: Events %s, want RolloutStarted first", sp.name, got)
		case !sp.failing && !sp.doneAt.IsZero() && !strings.HasSuffix(got, "RolloutCompleted"):
			t.Errorf("finished pool %s: Events %s, want RolloutCompleted last", sp.name, got)
		}
	}
	if !everDropped && checked == 0 {
		t.Error("no Server's sequence was checked whole")
	}
	t.Logf("%d servers, %d steps to %s: %d Raft entries, of them %d unchanged status reports in %d rounds and %d RecordEvents commands (%d events); %d Events kept (cap reached: %v); %v wall",
		cfg.pools*cfg.perPool, s.steps, s.now.Sub(cfg.start).Round(time.Minute), s.idx, beats, beatRounds, recordCmds, recorded, len(evs), everDropped, time.Since(begin).Round(time.Millisecond))
}

// listAllEvents returns the Events in first-seen order (create index,
// then position in the command).
func listAllEvents(t *testing.T, f *state.FSM) []*roostv1.Event {
	t.Helper()
	objs, _, err := f.List("Event", "")
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]*roostv1.Event, 0, len(objs))
	for _, o := range objs {
		evs = append(evs, o.GetEvent())
	}
	sort.SliceStable(evs, func(i, j int) bool {
		a, b := evs[i].GetMetadata(), evs[j].GetMetadata()
		if a.GetCreateIndex() != b.GetCreateIndex() {
			return a.GetCreateIndex() < b.GetCreateIndex()
		}
		return eventSeq(a.GetName()) < eventSeq(b.GetName())
	})
	return evs
}

// eventSeq is N of an Event named ev-INDEX-N.
func eventSeq(name string) int {
	var idx uint64
	var n int
	fmt.Sscanf(name, "ev-%d-%d", &idx, &n)
	return n
}

// eventLog fingerprints the Events: how many, their total count and the
// newest change.
func eventLog(t *testing.T, f *state.FSM) string {
	t.Helper()
	objs := f.Reader().List("Event") // shared with the store: read only
	var total int64
	var newest uint64
	for _, o := range objs {
		total += int64(o.GetEvent().GetStatus().GetCount())
		newest = max(newest, o.GetEvent().GetMetadata().GetModifyIndex())
	}
	return fmt.Sprintf("%d events, %d occurrences, newest change at index %d", len(objs), total, newest)
}
