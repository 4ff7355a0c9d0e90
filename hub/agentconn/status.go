package agentconn

import (
	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// HelloUpdate is the status change an agent's hello announces for srv, its
// recorded Server: connected (a Server still Enrolling becomes Enrolled),
// a new agent version, booted Revision or applied generation. It returns
// nil when the hello changes nothing.
func HelloUpdate(srv *roostv1.Server, hello *roostv1.Hello) *roostv1.UpdateServerStatus {
	cur := srv.GetStatus()
	upd := &roostv1.UpdateServerStatus{Name: srv.GetMetadata().GetName(), Connected: cur.GetState() == state.ServerEnrolling}
	changed := upd.Connected
	if v := hello.GetAgentVersion(); v != "" && v != cur.GetAgentVersion() {
		upd.AgentVersion, changed = v, true
	}
	if r := hello.GetBootedRevision(); r != cur.GetBootedRevision() {
		upd.HasBootedRevision, upd.BootedRevision, changed = true, r, true
	}
	if g := hello.GetLastAppliedGeneration(); g != cur.GetAppliedGeneration() {
		upd.HasAppliedGeneration, upd.AppliedGeneration, changed = true, g, true
	}
	if !changed {
		return nil
	}
	return upd
}

// StatusUpdate is the part of st, a status Server name's agent reported,
// that differs from the Server's recorded status: inventory, booted
// Revision, applied generation, the agent's conditions, and failed
// Revisions the state keeps and has not marked Failed or Good yet. It
// returns nil when nothing changed. Errors: the FSM's (NotFound when the
// Server is not recorded).
func (r *Registry) StatusUpdate(name string, st *roostv1.AgentStatus) (*roostv1.UpdateServerStatus, error) {
	o, err := r.fsm.Get("Server", name)
	if err != nil {
		return nil, err
	}
	cur := o.GetServer().GetStatus()
	upd := &roostv1.UpdateServerStatus{Name: name}
	changed := false
	if st.GetInventory() != nil && !proto.Equal(st.GetInventory(), cur.GetInventory()) {
		upd.Inventory, changed = st.GetInventory(), true
	}
	if st.GetBootedRevision() != cur.GetBootedRevision() {
		upd.HasBootedRevision, upd.BootedRevision, changed = true, st.GetBootedRevision(), true
	}
	if st.GetAppliedGeneration() != cur.GetAppliedGeneration() {
		upd.HasAppliedGeneration, upd.AppliedGeneration, changed = true, st.GetAppliedGeneration(), true
	}
	if !sameAgentConditions(st.GetConditions(), cur.GetConditions()) {
		upd.HasConditions, upd.Conditions, changed = true, st.GetConditions(), true
	}
	if st.GetHasFailedRevisions() && len(st.GetFailedRevisions()) > 0 {
		// only Revisions the FSM keeps and has not marked yet are news
		phase := map[int64]string{}
		for _, rev := range r.fsm.Revisions(name) {
			phase[rev.GetSpec().GetNumber()] = rev.GetStatus().GetPhase()
		}
		for _, f := range st.GetFailedRevisions() {
			if p, ok := phase[f.GetNumber()]; ok && p != state.RevisionFailed && p != state.RevisionGood {
				upd.HasFailedRevisions, upd.FailedRevisions, changed = true, st.GetFailedRevisions(), true
				break
			}
		}
	}
	if !changed {
		return nil, nil
	}
	return upd, nil
}

// sameAgentConditions compares what the agent sent with the recorded
// conditions it owns (hub-owned types and transition times ignored).
func sameAgentConditions(sent, recorded []*roostv1.Condition) bool {
	type key struct{ typ, status, reason, msg string }
	a, b := map[key]bool{}, map[key]bool{}
	for _, c := range sent {
		if c.GetType() != state.ConditionApproved && c.GetType() != state.ConditionDuplicateUUID {
			a[key{c.GetType(), c.GetStatus(), c.GetReason(), c.GetMessage()}] = true
		}
	}
	for _, c := range recorded {
		if c.GetType() != state.ConditionApproved && c.GetType() != state.ConditionDuplicateUUID {
			b[key{c.GetType(), c.GetStatus(), c.GetReason(), c.GetMessage()}] = true
		}
	}
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
