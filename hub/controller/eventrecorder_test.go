package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// The recorder proposes a decision once while it holds, batches what many
// objects decide at once, re-records after Forget or a failed proposal,
// and drops what a follower is given.
func TestEventRecorder(t *testing.T) {
	var cmds []*roostv1.RecordEvents
	fail := false
	leader := true
	r := &EventRecorder{Source: "rollout", IsLeader: func() bool { return leader },
		Propose: func(_ context.Context, c *roostv1.Command) error {
			if c.GetTime() == nil {
				t.Error("RecordEvents without a time")
			}
			if fail {
				return errors.New("not the leader")
			}
			cmds = append(cmds, c.GetRecordEvents())
			return nil
		}}
	ctx := context.Background()
	for range 3 { // the same decision at every poll
		r.Record("Server", "srv-1", state.EventWarning, "LeaseExpired", "did not boot Revision 2")
	}
	r.FlushNow(ctx)
	r.FlushNow(ctx) // nothing queued: nothing proposed
	if len(cmds) != 1 || len(cmds[0].GetEvents()) != 1 {
		t.Fatalf("proposed %v, want one command with one event", cmds)
	}
	if e := cmds[0].GetEvents()[0]; e.GetSource() != "rollout" || e.GetInvolvedObject().GetName() != "srv-1" || e.GetType() != state.EventWarning {
		t.Errorf("event = %v", e)
	}
	r.Record("Server", "srv-1", state.EventWarning, "LeaseExpired", "did not boot Revision 2")
	r.FlushNow(ctx)
	if len(cmds) != 1 {
		t.Errorf("an unchanged decision was proposed again")
	}
	// A new message, or the same one after Forget, is recorded again.
	r.Record("Server", "srv-1", state.EventWarning, "LeaseExpired", "did not boot Revision 3")
	r.Forget("Server", "srv-1")
	r.Record("Server", "srv-1", state.EventWarning, "LeaseExpired", "did not boot Revision 3")
	r.FlushNow(ctx)
	if len(cmds) != 2 || len(cmds[1].GetEvents()) != 2 {
		t.Fatalf("after a change and Forget: %v", cmds)
	}
	// Many objects at once: batches of MaxRecordEvents.
	for i := range state.MaxRecordEvents + 1 {
		r.Record("Server", fmt.Sprintf("srv-%d", 100+i), state.EventNormal, "Waiting", "waiting")
	}
	r.FlushNow(ctx)
	if len(cmds) != 4 || len(cmds[2].GetEvents()) != state.MaxRecordEvents || len(cmds[3].GetEvents()) != 1 {
		t.Fatalf("%d commands after %d events", len(cmds), state.MaxRecordEvents+1)
	}
	// A failed proposal forgets, so the decision is recorded again.
	fail = true
	r.Record("Pool", "p", state.EventNormal, "Step", "one")
	r.FlushNow(ctx)
	fail = false
	r.Record("Pool", "p", state.EventNormal, "Step", "one")
	r.FlushNow(ctx)
	if len(cmds) != 5 {
		t.Errorf("a decision lost with a failed proposal was not recorded again")
	}
	// A follower records nothing.
	leader = false
	r.Record("Pool", "p", state.EventNormal, "Step", "two")
	r.FlushNow(ctx)
	if len(cmds) != 5 {
		t.Errorf("a follower proposed events")
	}
	var nilRec *EventRecorder
	nilRec.Record("Pool", "p", state.EventNormal, "Step", "x") // no panic
}
