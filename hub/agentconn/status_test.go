package agentconn

import (
	"testing"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func TestHelloUpdate(t *testing.T) {
	srv := func(st string) *roostv1.Server {
		return &roostv1.Server{Metadata: &roostv1.ObjectMeta{Name: "s1"}, Status: &roostv1.ServerStatus{
			State: st, AgentVersion: "v1", BootedRevision: 2, AppliedGeneration: 7}}
	}
	same := &roostv1.Hello{ServerName: "s1", AgentVersion: "v1", BootedRevision: 2, LastAppliedGeneration: 7}
	if upd := HelloUpdate(srv(state.ServerAvailable), same); upd != nil {
		t.Errorf("a hello that changes nothing: %v, want nil", upd)
	}
	if upd := HelloUpdate(srv(state.ServerEnrolling), same); upd == nil || !upd.GetConnected() || upd.GetName() != "s1" || upd.GetHasBootedRevision() {
		t.Errorf("first hello of an enrolling Server: %v, want connected only", upd)
	}
	if upd := HelloUpdate(srv(state.ServerAvailable), &roostv1.Hello{ServerName: "s1", BootedRevision: 3, LastAppliedGeneration: 7}); upd == nil ||
		!upd.GetHasBootedRevision() || upd.GetBootedRevision() != 3 || upd.GetHasAppliedGeneration() || upd.GetAgentVersion() != "" || upd.GetConnected() {
		t.Errorf("a hello with a new booted Revision and no version: %v, want the revision only", upd)
	}
}

func TestSameAgentConditions(t *testing.T) {
	c := func(typ, status string) *roostv1.Condition { return &roostv1.Condition{Type: typ, Status: status} }
	healthy := c("Healthy", "True")
	for _, tc := range []struct {
		name           string
		sent, recorded []*roostv1.Condition
		want           bool
	}{
		{"equal", []*roostv1.Condition{healthy}, []*roostv1.Condition{c("Healthy", "True")}, true},
		{"hub-owned conditions ignored", []*roostv1.Condition{healthy}, []*roostv1.Condition{healthy, c(state.ConditionApproved, "True")}, true},
		{"status changed", []*roostv1.Condition{c("Healthy", "False")}, []*roostv1.Condition{healthy}, false},
		{"one dropped", nil, []*roostv1.Condition{healthy}, false},
	} {
		if got := sameAgentConditions(tc.sent, tc.recorded); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
