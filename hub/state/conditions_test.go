package state

import (
	"testing"

	"google.golang.org/grpc/codes"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func setConditionsCmd(kind, name string, set []*roostv1.Condition, clear ...string) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_SetConditions{SetConditions: &roostv1.SetConditions{Kind: kind, Name: name, Set: set, Clear: clear}}}
}

func TestSetConditions(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(append(baseObjects(), poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.Replicas = nil }))...))
	short := &roostv1.Condition{Type: PoolReplicaFailure, Status: "True", Reason: ReasonNoMatchingServers, Message: "0 of 3 replicas"}

	// A Pool's ReplicaFailure: set, unchanged (no write), cleared.
	h.mustApply(setConditionsCmd("Pool", "workers", []*roostv1.Condition{short}))
	p := getPool(t, h.f, "workers")
	if c := FindCondition(p.GetStatus().GetConditions(), PoolReplicaFailure); c.GetMessage() != "0 of 3 replicas" || c.GetLastTransitionTime().AsTime() != timeAt(h.idx) {
		t.Fatalf("after set: %v", p.GetStatus())
	}
	gen, mod := p.GetMetadata().GetGeneration(), p.GetMetadata().GetModifyIndex()
	h.mustApply(setConditionsCmd("Pool", "workers", []*roostv1.Condition{short}))
	if p := getPool(t, h.f, "workers"); p.GetMetadata().GetModifyIndex() != mod || p.GetMetadata().GetGeneration() != gen {
		t.Errorf("an unchanged condition was written: %v", p.GetMetadata())
	}
	h.mustApply(setConditionsCmd("Pool", "workers", nil, PoolReplicaFailure))
	if p := getPool(t, h.f, "workers"); len(p.GetStatus().GetConditions()) != 0 || p.GetMetadata().GetGeneration() != gen {
		t.Errorf("after clear: %v (status changes keep the generation)", p)
	}

	// Only ReplicaFailure on a Pool; only the waiting message on a Machine.
	wantCode(t, h.apply(setConditionsCmd("Pool", "workers", []*roostv1.Condition{{Type: "Ready", Status: "True"}})).Err, codes.InvalidArgument)
	wantCode(t, h.apply(setConditionsCmd("Pool", "workers", nil, "Ready")).Err, codes.InvalidArgument)
	wantCode(t, h.apply(setConditionsCmd("Server", uuidA, []*roostv1.Condition{short})).Err, codes.InvalidArgument)
	wantCode(t, h.apply(setConditionsCmd("Pool", "nope", []*roostv1.Condition{short})).Err, codes.NotFound)
	claimedServer(h, uuidA, "52:54:00:00:00:01", "w1", "workers")
	waiting := &roostv1.Condition{Type: MachineProvisioned, Status: "False", Reason: ReasonWaitingForRevision, Message: "no ImageRelease is in channel stable"}
	wantCode(t, h.apply(setConditionsCmd("Machine", "w1", []*roostv1.Condition{{Type: MachineProvisioned, Status: "True", Reason: "Booted"}})).Err, codes.InvalidArgument)
	h.mustApply(setConditionsCmd("Machine", "w1", []*roostv1.Condition{waiting}))
	if c := FindCondition(getMachine(t, h.f, "w1").GetStatus().GetConditions(), MachineProvisioned); c.GetMessage() != waiting.GetMessage() {
		t.Fatalf("Provisioned %v", c)
	}
	// Once a Revision is rendered, a late message changes nothing.
	h.mustApply(putRevisionCmd(uuidA, "w1", 1))
	before := getMachine(t, h.f, "w1")
	h.mustApply(setConditionsCmd("Machine", "w1", []*roostv1.Condition{waiting}))
	if after := getMachine(t, h.f, "w1"); after.GetMetadata().GetModifyIndex() != before.GetMetadata().GetModifyIndex() {
		t.Errorf("a stale waiting message was written over %v", FindCondition(before.GetStatus().GetConditions(), MachineProvisioned))
	}
}

// Rules 12: a Pool takes Frozen and Remediating, a Machine Remediating
// (set and cleared, True with a reason only); older rules refuse them.
func TestSetConditionsRemediation(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(append(baseObjects(), poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.Replicas = nil }))...))
	frozen := &roostv1.Condition{Type: PoolFrozen, Status: "True", Reason: ReasonTooManyUnhealthy, Message: "10 of 20 Machines unhealthy"}
	wantCode(t, h.apply(withRules(RulesRemediation-1, setConditionsCmd("Pool", "workers", []*roostv1.Condition{frozen}))).Err, codes.InvalidArgument)
	h.mustApply(withRules(RulesRemediation, setConditionsCmd("Pool", "workers", []*roostv1.Condition{frozen})))
	if c := FindCondition(getPool(t, h.f, "workers").GetStatus().GetConditions(), PoolFrozen); c.GetReason() != ReasonTooManyUnhealthy {
		t.Fatalf("Frozen %v", c)
	}
	h.mustApply(withRules(RulesRemediation, setConditionsCmd("Pool", "workers", nil, PoolFrozen)))
	if c := FindCondition(getPool(t, h.f, "workers").GetStatus().GetConditions(), PoolFrozen); c != nil {
		t.Fatalf("Frozen after clear %v", c)
	}

	claimedServer(h, uuidA, "52:54:00:00:00:01", "w1", "workers")
	rem := &roostv1.Condition{Type: MachineRemediating, Status: "True", Reason: ReasonUnreachable, Message: "Server unreachable"}
	wantCode(t, h.apply(withRules(RulesRemediation-1, setConditionsCmd("Machine", "w1", []*roostv1.Condition{rem}))).Err, codes.InvalidArgument)
	wantCode(t, h.apply(withRules(RulesRemediation, setConditionsCmd("Machine", "w1", []*roostv1.Condition{{Type: MachineRemediating, Status: "False", Reason: "x"}}))).Err, codes.InvalidArgument)
	wantCode(t, h.apply(withRules(RulesRemediation, setConditionsCmd("Machine", "nope", []*roostv1.Condition{rem}))).Err, codes.NotFound)
	h.mustApply(withRules(RulesRemediation, setConditionsCmd("Machine", "w1", []*roostv1.Condition{rem})))
	if !Remediating(getMachine(t, h.f, "w1")) {
		t.Fatalf("w1 not Remediating: %v", getMachine(t, h.f, "w1").GetStatus().GetConditions())
	}
	// The Machine's milestones are recomputed without losing it.
	h.mustApply(putRevisionCmd(uuidA, "w1", 1))
	if !Remediating(getMachine(t, h.f, "w1")) {
		t.Fatalf("Remediating lost on a refresh")
	}
	h.mustApply(withRules(RulesRemediation, setConditionsCmd("Machine", "w1", nil, MachineRemediating)))
	if Remediating(getMachine(t, h.f, "w1")) {
		t.Fatalf("w1 still Remediating after clear")
	}
}
