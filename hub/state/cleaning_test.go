package state

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// r11 stamps cmd with the cleaning rules.
func r11(cmd *roostv1.Command) *roostv1.Command { return withRules(RulesCleaning, cmd) }

func cleaningResultCmd(server string, index uint64, ok bool, errMsg string, disks ...string) *roostv1.Command {
	return statusCmd(&roostv1.UpdateServerStatus{Name: server, CleaningResult: &roostv1.CleaningResult{
		Index: index, Succeeded: ok, Error: errMsg, Disks: disks}})
}

// releasableServer is uuidA, Available, then claimed by Machine workers-abcde
// of the explicit Pool workers whose class (MachineClass "standard" of
// baseObjects) cleans with cleaning.
func releasableServer(t *testing.T, h *harness, cleaning *roostv1.MachineCleaning) {
	t.Helper()
	objs := baseObjects()
	for _, o := range objs {
		if mc := o.GetMachineClass(); mc != nil {
			mc.Spec.Cleaning = cleaning
		}
	}
	h.mustApply(r11(h.objects(append(objs, poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.Replicas = nil }))...)))
	availableServer(h, uuidA, "52:54:00:00:00:01")
	h.mustApply(r11(createMachinesCmd(false, newMachine("workers-abcde", uuidA, "workers"))))
	h.mustApply(r11(statusCmd(&roostv1.UpdateServerStatus{Name: uuidA, HasBootedRevision: true, BootedRevision: 3})))
}

func wantState(t *testing.T, h *harness, state, reasonPart string) *roostv1.Server {
	t.Helper()
	s := getServer(t, h.f, uuidA)
	if s.GetStatus().GetState() != state || !strings.Contains(s.GetStatus().GetStateReason(), reasonPart) {
		t.Fatalf("state %q (%q), want %q containing %q", s.GetStatus().GetState(), s.GetStatus().GetStateReason(), state, reasonPart)
	}
	return s
}

func TestReleaseCleansTheServer(t *testing.T) {
	h := newHarness(t, Options{})
	releasableServer(t, h, &roostv1.MachineCleaning{Mode: CleaningZero, DataDisks: true})
	res := h.mustApply(r11(deleteMachinesCmd("workers", nil, []string{uuidA})))
	s := wantState(t, h, ServerCleaning, "released by Machine workers-abcde")
	c := s.GetStatus().GetCleaning()
	if c.GetMode() != CleaningZero || !c.GetDataDisks() || c.GetIndex() != res.Index || c.GetAttempts() != 1 || c.GetDecommission() {
		t.Fatalf("cleaning %v", c)
	}
	if in := CleaningInstruction(s); in.GetIndex() != res.Index || in.GetMode() != CleaningZero || !in.GetDataDisks() {
		t.Errorf("instruction %v", in)
	}
	if cd := findCondition(s.GetStatus().GetConditions(), ConditionCleaned); cd.GetStatus() != "False" || cd.GetReason() != "Cleaning" {
		t.Errorf("Cleaned condition %v", cd)
	}
	// Never claimable while Cleaning.
	e := wantCode(t, h.apply(r11(createMachinesCmd(false, newMachine("workers-fghij", uuidA, "workers")))).Err, codes.FailedPrecondition)
	if !strings.Contains(e.Message, "is Cleaning, not Available") {
		t.Errorf("message %q", e.Message)
	}
	// Connecting again (an agent's new stream) does not make it Available.
	h.mustApply(r11(statusCmd(&roostv1.UpdateServerStatus{Name: uuidA, Connected: true})))
	wantState(t, h, ServerCleaning, "")
	// An agent's conditions cannot fake the hub's Cleaned condition.
	h.mustApply(r11(statusCmd(&roostv1.UpdateServerStatus{Name: uuidA, HasConditions: true,
		Conditions: []*roostv1.Condition{{Type: ConditionCleaned, Status: "True", Reason: "Cleaned"}}})))
	if cd := findCondition(getServer(t, h.f, uuidA).GetStatus().GetConditions(), ConditionCleaned); cd.GetStatus() != "False" {
		t.Errorf("agent set the Cleaned condition: %v", cd)
	}
	// A result of another attempt changes nothing.
	h.mustApply(r11(cleaningResultCmd(uuidA, res.Index-1, true, "")))
	wantState(t, h, ServerCleaning, "")

	h.mustApply(r11(cleaningResultCmd(uuidA, res.Index, true, "", "/dev/vda: zero: 8 GiB written")))
	s = wantState(t, h, ServerAvailable, "cleaned: /dev/vda: zero")
	if s.GetStatus().GetBootedRevision() != 0 || s.GetStatus().GetCleaning().GetFinishedAt() == nil {
		t.Errorf("status %v", s.GetStatus())
	}
	if cd := findCondition(s.GetStatus().GetConditions(), ConditionCleaned); cd.GetStatus() != "True" {
		t.Errorf("Cleaned condition %v", cd)
	}
	if CleaningInstruction(s) != nil {
		t.Error("an Available Server is still asked to clean")
	}
	// The same result again (resent on a new stream) changes nothing.
	if got := h.mustApply(r11(cleaningResultCmd(uuidA, res.Index, false, "late"))); got.Err != nil {
		t.Fatal(got.Err)
	}
	wantState(t, h, ServerAvailable, "")
	// Claimable again.
	h.mustApply(r11(createMachinesCmd(false, newMachine("workers-fghij", uuidA, "workers"))))
	wantState(t, h, ServerClaimed, "")
	var got []string
	for _, r := range reasons(listEvents(t, h.f, kindServer, uuidA)) {
		if strings.Contains(r, "Clean") {
			got = append(got, r)
		}
	}
	if want := []string{"Server/" + uuidA + " CleaningStarted×1", "Server/" + uuidA + " Cleaned×1"}; !slices.Equal(got, want) {
		t.Errorf("cleaning events %q, want %q", got, want)
	}
}

func TestCleaningFailsAndIsRetried(t *testing.T) {
	h := newHarness(t, Options{})
	releasableServer(t, h, nil)
	res := h.mustApply(r11(deleteMachinesCmd("workers", nil, []string{uuidA})))
	if c := getServer(t, h.f, uuidA).GetStatus().GetCleaning(); c.GetMode() != CleaningMetadata || c.GetDataDisks() {
		t.Fatalf("default cleaning %v", c)
	}
	h.mustApply(r11(cleaningResultCmd(uuidA, res.Index, false, "/dev/vdb: open: read-only file system")))
	s := wantState(t, h, ServerCleaningFailed, "cleaning attempt 1 failed: /dev/vdb: open: read-only file system")
	if evs := reasons(listEvents(t, h.f, kindServer, uuidA)); !slices.Contains(evs, "Server/"+uuidA+" CleaningFailed×1") {
		t.Errorf("events %q, want a CleaningFailed one", evs)
	}
	if cd := findCondition(s.GetStatus().GetConditions(), ConditionCleaned); cd.GetReason() != "CleaningFailed" {
		t.Errorf("Cleaned condition %v", cd)
	}
	if CleaningInstruction(s) != nil {
		t.Error("a CleaningFailed Server is asked to clean without a retry")
	}
	// Refused: claims, and the old behaviour's Available.
	wantCode(t, h.apply(r11(createMachinesCmd(false, newMachine("workers-fghij", uuidA, "workers")))).Err, codes.FailedPrecondition)
	h.mustApply(r11(statusCmd(&roostv1.UpdateServerStatus{Name: uuidA, Connected: true})))
	wantState(t, h, ServerCleaningFailed, "")

	// A retry is a new attempt with a new index, by the class's current
	// cleaning policy.
	mc := machineClassObj("standard")
	mc.GetMachineClass().Spec.Cleaning = &roostv1.MachineCleaning{Mode: CleaningZero}
	h.mustApply(r11(h.objects(mc)))
	retry := h.mustApply(r11(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_CLEAN)))
	s = wantState(t, h, ServerCleaning, "cleaning again (attempt 2)")
	if c := s.GetStatus().GetCleaning(); c.GetIndex() != retry.Index || c.GetAttempts() != 2 || c.GetMode() != CleaningZero || c.GetMachineClass() != "standard" {
		t.Fatalf("cleaning %v", c)
	}
	// The first attempt's result, arriving late, is ignored.
	h.mustApply(r11(cleaningResultCmd(uuidA, res.Index, false, "old")))
	wantState(t, h, ServerCleaning, "")
	h.mustApply(r11(cleaningResultCmd(uuidA, retry.Index, true, "")))
	wantState(t, h, ServerAvailable, "cleaned: nothing to wipe")
}

func TestCleanRefusals(t *testing.T) {
	h := newHarness(t, Options{})
	releasableServer(t, h, nil)
	e := wantCode(t, h.apply(r11(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_CLEAN))).Err, codes.FailedPrecondition)
	if !strings.Contains(e.Message, "is Claimed; release its Machine first") {
		t.Errorf("message %q", e.Message)
	}
	wantCode(t, h.apply(r11(modifyCmd("nope", roostv1.ServerAction_SERVER_ACTION_CLEAN))).Err, codes.NotFound)
	// Older members do not know the action.
	e = wantCode(t, h.apply(withRules(RulesCleaning-1, modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_CLEAN))).Err, codes.InvalidArgument)
	if !strings.Contains(e.Message, "unknown server action") {
		t.Errorf("message %q", e.Message)
	}
	wantState(t, h, ServerClaimed, "")
}

func TestReleaseUnderOlderRules(t *testing.T) {
	h := newHarness(t, Options{})
	releasableServer(t, h, &roostv1.MachineCleaning{Mode: CleaningZero})
	h.mustApply(withRules(RulesCleaning-1, deleteMachinesCmd("workers", nil, []string{uuidA})))
	s := wantState(t, h, ServerAvailable, "released by Machine workers-abcde")
	if s.GetStatus().GetCleaning() != nil {
		t.Errorf("cleaning %v", s.GetStatus().GetCleaning())
	}
	// A cleaning result is ignored under older rules.
	h.mustApply(withRules(RulesCleaning-1, cleaningResultCmd(uuidA, 1, false, "x")))
	wantState(t, h, ServerAvailable, "")
}

func TestDecommissionCleansFirst(t *testing.T) {
	h := newHarness(t, Options{})
	releasableServer(t, h, &roostv1.MachineCleaning{Mode: CleaningDiscard})
	// Claimed: refused, as before.
	wantCode(t, h.apply(r11(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_DECOMMISSION))).Err, codes.FailedPrecondition)
	rel := h.mustApply(r11(deleteMachinesCmd("workers", nil, []string{uuidA})))
	h.mustApply(r11(cleaningResultCmd(uuidA, rel.Index, true, "", "/dev/vda: discard")))
	wantState(t, h, ServerAvailable, "")

	// Available: cleaned again (the last policy), then Decommissioned.
	dec := h.mustApply(r11(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_DECOMMISSION, func(c *roostv1.ModifyServer) { c.Reason = "end of life" })))
	s := wantState(t, h, ServerCleaning, "end of life; the agent wipes it first")
	if c := s.GetStatus().GetCleaning(); !c.GetDecommission() || c.GetMode() != CleaningDiscard || c.GetIndex() != dec.Index {
		t.Fatalf("cleaning %v", c)
	}
	h.mustApply(r11(cleaningResultCmd(uuidA, dec.Index, true, "")))
	s = wantState(t, h, ServerDecommissioned, "end of life")
	if s.GetStatus().GetReachability() != "" || s.GetSpec().GetPool() != "" {
		t.Errorf("server %v", s)
	}
}

func TestDecommissionOfACleaningServer(t *testing.T) {
	h := newHarness(t, Options{})
	releasableServer(t, h, nil)
	rel := h.mustApply(r11(deleteMachinesCmd("workers", nil, []string{uuidA})))
	// While a release's cleaning runs: Decommissioned once it succeeds.
	h.mustApply(r11(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_DECOMMISSION)))
	wantState(t, h, ServerCleaning, "Decommissioned once its cleaning succeeds")
	// A failure keeps it out; a decommission then does not wait for a
	// cleaning that cannot succeed, and says the disks were not wiped.
	h.mustApply(r11(cleaningResultCmd(uuidA, rel.Index, false, "disk gone")))
	wantState(t, h, ServerCleaningFailed, "disk gone")
	h.mustApply(r11(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_DECOMMISSION)))
	wantState(t, h, ServerDecommissioned, "its disks were not wiped (the last cleaning failed: disk gone)")
	// A retry of a decommissioned Server is refused.
	wantCode(t, h.apply(r11(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_CLEAN))).Err, codes.FailedPrecondition)
}

func TestCleaningSnapshot(t *testing.T) {
	h := newHarness(t, Options{})
	releasableServer(t, h, &roostv1.MachineCleaning{Mode: CleaningZero})
	rel := h.mustApply(r11(deleteMachinesCmd("workers", nil, []string{uuidA})))
	f := restoreNew(t, snapshotBytes(t, h.f))
	o, err := f.Get("Server", uuidA)
	if err != nil {
		t.Fatal(err)
	}
	if in := CleaningInstruction(o.GetServer()); in.GetIndex() != rel.Index || in.GetMode() != CleaningZero {
		t.Errorf("restored instruction %v", in)
	}
}
