package state

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// ---- revision helpers

func putRevisionCmd(server, machine string, n int64) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_PutRevision{PutRevision: &roostv1.PutRevision{
		Revision: &roostv1.Revision{Spec: &roostv1.RevisionSpec{Server: server, Machine: machine, Number: n,
			ImageVersion: "2026.11.0", Ignition: []byte(`{"ignition":{"version":"3.3.0"}}`)}},
		Uid: fmt.Sprintf("00000000-0000-4000-8000-%012d", 500+n),
	}}}
}

// bootReport is an agent report: booted revision n, Healthy (True,
// False or "" for no condition) and the failed revisions.
func bootReport(server string, n int64, healthy string, failed ...*roostv1.FailedRevision) *roostv1.Command {
	u := &roostv1.UpdateServerStatus{Name: server, HasBootedRevision: true, BootedRevision: n, HasConditions: true}
	if healthy != "" {
		u.Conditions = []*roostv1.Condition{{Type: AgentHealthy, Status: healthy, Reason: "BootAssessed", Message: "assessed " + healthy}}
	}
	if len(failed) > 0 {
		u.HasFailedRevisions, u.FailedRevisions = true, failed
	}
	return statusCmd(u)
}

func reachabilityCmd(server string, reachable bool) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_SetServerReachability{SetServerReachability: &roostv1.SetServerReachability{
		Changes: []*roostv1.ReachabilityChange{{Name: server, Reachable: reachable}}}}}
}

// revisionPhases renders server's Revisions as "N=Phase", oldest first.
func revisionPhases(f *FSM, server string) string {
	var out []string
	for _, r := range f.Revisions(server) {
		out = append(out, fmt.Sprintf("%d=%s", r.GetSpec().GetNumber(), r.GetStatus().GetPhase()))
	}
	return strings.Join(out, " ")
}

func getRevision(t *testing.T, f *FSM, server string, n int64) *roostv1.Revision {
	t.Helper()
	o, err := f.Get("Revision", RevisionName(server, n))
	if err != nil {
		t.Fatal(err)
	}
	return o.GetRevision()
}

// cond returns m's condition typ as "Status/Reason".
func cond(m *roostv1.Machine, typ string) string {
	c := findCondition(m.GetStatus().GetConditions(), typ)
	return c.GetStatus() + "/" + c.GetReason()
}

// standalonePool is Pool "edge" without a cluster (standalone hosts).
func standalonePool(h *harness) {
	h.mustApply(h.objects(machineClassObj("standard"), poolObj("edge", "", func(s *roostv1.PoolSpec) { s.Replicas = nil })))
}

// claimedServer enrolls uuid, makes it Available and claims it for pool
// (standalone when "") as Machine name.
func claimedServer(h *harness, uuid, mac, name, pool string) {
	availableServer(h, uuid, mac)
	h.mustApply(createMachinesCmd(false, newMachine(name, uuid, pool)))
}

// ---- tests

func TestPutRevisionNumbering(t *testing.T) {
	h := newHarness(t, Options{})
	standalonePool(h)
	claimedServer(h, uuidA, "52:54:00:00:00:01", "edge-1", "edge")

	// Validation.
	e := wantCode(t, h.apply(putRevisionCmd("", "", 0)).Err, codes.InvalidArgument)
	if len(e.Violations) != 3 {
		t.Errorf("violations %v", e.Violations)
	}
	wantCode(t, h.apply(putRevisionCmd("gone", "edge-1", 1)).Err, codes.NotFound)
	// Numbering starts at 1 and must be the next one.
	e = wantCode(t, h.apply(putRevisionCmd(uuidA, "edge-1", 2)).Err, codes.FailedPrecondition)
	if !strings.Contains(e.Message, "the next Revision is 1") {
		t.Errorf("message %q", e.Message)
	}
	// The Machine named must hold the Server.
	e = wantCode(t, h.apply(putRevisionCmd(uuidA, "edge-2", 1)).Err, codes.FailedPrecondition)
	if !strings.Contains(e.Message, "Machine edge-2 no longer holds Server "+uuidA) {
		t.Errorf("message %q", e.Message)
	}
	if len(h.f.Revisions(uuidA)) != 0 {
		t.Fatal("a refused PutRevision stored a Revision")
	}

	res := h.mustApply(putRevisionCmd(uuidA, "edge-1", 1))
	if got := actions(res); len(got) != 1 || got[0] != "Revision/"+RevisionName(uuidA, 1)+"=created" {
		t.Errorf("actions %v", got)
	}
	r := getRevision(t, h.f, uuidA, 1)
	if r.GetStatus().GetPhase() != RevisionPending || r.GetMetadata().GetCreateIndex() != res.Index ||
		r.GetMetadata().GetUid() == "" || r.GetMetadata().GetCreationTimestamp().AsTime() != timeAt(res.Index) || r.GetKind() != "Revision" {
		t.Errorf("revision %v", r)
	}
	// The same number again, or one skipping ahead, is refused.
	wantCode(t, h.apply(putRevisionCmd(uuidA, "edge-1", 1)).Err, codes.FailedPrecondition)
	wantCode(t, h.apply(putRevisionCmd(uuidA, "edge-1", 3)).Err, codes.FailedPrecondition)

	// The Machine follows: status.revision, Provisioned waits for the boot.
	m := getMachine(t, h.f, "edge-1")
	if m.GetStatus().GetRevision() != 1 || m.GetStatus().GetBootedRevision() != 0 || cond(m, MachineProvisioned) != "False/WaitingForBoot" {
		t.Errorf("machine status %v", m.GetStatus())
	}
	// What the agent gets.
	d, gen := h.f.DesiredRevision(uuidA)
	if d.GetSpec().GetNumber() != 1 || gen != res.Index {
		t.Errorf("DesiredRevision = %v, %d", d, gen)
	}

	// Once the Machine is released, no Revision can be put for it, and
	// nothing is desired any more; the history stays.
	h.mustApply(deleteMachinesCmd("edge", nil, []string{uuidA}))
	wantCode(t, h.apply(putRevisionCmd(uuidA, "edge-1", 2)).Err, codes.FailedPrecondition)
	if d, gen := h.f.DesiredRevision(uuidA); d != nil || gen != 0 {
		t.Errorf("DesiredRevision after release = %v, %d", d, gen)
	}
	if l := h.f.LatestRevision(uuidA); l.GetSpec().GetNumber() != 1 {
		t.Errorf("LatestRevision after release = %v", l)
	}
	// A new Machine for the Server continues the numbering; the desired
	// Revision must be rendered for it.
	h.mustApply(createMachinesCmd(false, &roostv1.NewMachine{Name: "edge-9", Uid: "00000000-0000-4000-8000-000000000999", Server: uuidA, Pool: "edge"}))
	if d, _ := h.f.DesiredRevision(uuidA); d != nil {
		t.Errorf("DesiredRevision names the old Machine's Revision: %v", d)
	}
	wantCode(t, h.apply(putRevisionCmd(uuidA, "edge-9", 1)).Err, codes.FailedPrecondition)
	h.mustApply(putRevisionCmd(uuidA, "edge-9", 2))
	if d, _ := h.f.DesiredRevision(uuidA); d.GetSpec().GetMachine() != "edge-9" || d.GetSpec().GetNumber() != 2 {
		t.Errorf("DesiredRevision = %v", d)
	}
	if m := getMachine(t, h.f, "edge-9"); m.GetStatus().GetRevision() != 2 {
		t.Errorf("new machine's revision = %d (revisions of another Machine must not count)", m.GetStatus().GetRevision())
	}
}

func TestPutRevisionSupersedesPending(t *testing.T) {
	h := newHarness(t, Options{})
	standalonePool(h)
	claimedServer(h, uuidA, "52:54:00:00:00:01", "edge-1", "edge")
	h.mustApply(putRevisionCmd(uuidA, "edge-1", 1))
	h.mustApply(putRevisionCmd(uuidA, "edge-1", 2))
	if got := revisionPhases(h.f, uuidA); got != "1=Superseded 2=Pending" {
		t.Fatalf("phases %s", got)
	}
	if r := getRevision(t, h.f, uuidA, 1); !strings.Contains(r.GetStatus().GetReason(), "Revision 2 replaced it") {
		t.Errorf("reason %q", r.GetStatus().GetReason())
	}
	// 2 boots healthy; 3 and 4 follow: 2 stays Good, 3 is superseded.
	h.mustApply(bootReport(uuidA, 2, "True"))
	h.mustApply(putRevisionCmd(uuidA, "edge-1", 3))
	h.mustApply(putRevisionCmd(uuidA, "edge-1", 4))
	if got := revisionPhases(h.f, uuidA); got != "1=Superseded 2=Good 3=Superseded 4=Pending" {
		t.Fatalf("phases %s", got)
	}
	// A Server reporting that it booted a Revision still Pending (the
	// report raced the PutRevision) does not see it superseded.
	h2 := newHarness(t, Options{})
	standalonePool(h2)
	claimedServer(h2, uuidA, "52:54:00:00:00:01", "edge-1", "edge")
	h2.mustApply(bootReport(uuidA, 1, ""))
	h2.mustApply(putRevisionCmd(uuidA, "edge-1", 1))
	h2.mustApply(putRevisionCmd(uuidA, "edge-1", 2))
	if got := revisionPhases(h2.f, uuidA); got != "1=Pending 2=Pending" {
		t.Fatalf("phases %s", got)
	}
}

func TestRevisionHistoryLimit(t *testing.T) {
	h := newHarness(t, Options{})
	standalonePool(h)
	claimedServer(h, uuidA, "52:54:00:00:00:01", "edge-1", "edge")
	h.mustApply(putRevisionCmd(uuidA, "edge-1", 1))
	h.mustApply(bootReport(uuidA, 1, "True"))
	sub, err := h.f.Subscribe("Revision", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for n := int64(2); n <= 9; n++ {
		h.mustApply(putRevisionCmd(uuidA, "edge-1", n))
		if got := len(h.f.Revisions(uuidA)); got > MaxRevisionHistory {
			t.Fatalf("after revision %d: %d revisions kept, limit %d", n, got, MaxRevisionHistory)
		}
	}
	// The booted one (1) is kept, the newest ones fill the rest.
	if got := revisionPhases(h.f, uuidA); got != "1=Good 6=Superseded 7=Superseded 8=Superseded 9=Pending" {
		t.Fatalf("phases %s", got)
	}
	deleted := 0
	for len(sub.Events()) > 0 {
		if ev := <-sub.Events(); ev.GetType() == roostv1.WatchEvent_TYPE_DELETED {
			deleted++
		}
	}
	if deleted != 4 {
		t.Errorf("%d DELETED events, want 4 (revisions 2 to 5)", deleted)
	}
	// Numbering goes on from the newest.
	wantCode(t, h.apply(putRevisionCmd(uuidA, "edge-1", 2)).Err, codes.FailedPrecondition)
	// The booted Revision moves on; the old booted one may go now.
	h.mustApply(bootReport(uuidA, 9, "True"))
	h.mustApply(putRevisionCmd(uuidA, "edge-1", 10))
	if got := revisionPhases(h.f, uuidA); got != "6=Superseded 7=Superseded 8=Superseded 9=Good 10=Pending" {
		t.Fatalf("phases %s", got)
	}
	if m := getMachine(t, h.f, "edge-1"); m.GetStatus().GetBootedRevision() != 9 || m.GetStatus().GetRevision() != 10 {
		t.Errorf("machine status %v", m.GetStatus())
	}
}

// TestHealthyBootMakesMachineReady follows a Revision from Pending to
// Good and its Machine from Scheduled to Ready, for a Machine of a pool
// without a cluster and a standalone Machine.
func TestHealthyBootMakesMachineReady(t *testing.T) {
	for _, pool := range []string{"edge", ""} {
		t.Run(fmt.Sprintf("pool %q", pool), func(t *testing.T) {
			h := newHarness(t, Options{})
			standalonePool(h)
			claimedServer(h, uuidA, "52:54:00:00:00:01", "m1", pool)
			m := getMachine(t, h.f, "m1")
			if m.GetStatus().GetPhase() != PhaseScheduled || cond(m, MachineProvisioned) != "False/"+ReasonWaitingForRevision {
				t.Fatalf("machine %v", m.GetStatus())
			}
			h.mustApply(putRevisionCmd(uuidA, "m1", 1))

			// The agent reports its progress: the Machine says why it waits.
			h.mustApply(statusCmd(&roostv1.UpdateServerStatus{Name: uuidA, HasConditions: true, Conditions: []*roostv1.Condition{
				{Type: "Installed", Status: "True"}, {Type: "Staged", Status: "True"},
				{Type: "LeaseGranted", Status: "False", Reason: "WaitingForLease", Message: "pool edge allows 1"}}}))
			m = getMachine(t, h.f, "m1")
			if cond(m, MachineProvisioned) != "False/WaitingForLease" ||
				!strings.Contains(findCondition(m.GetStatus().GetConditions(), MachineProvisioned).GetMessage(), "LeaseGranted: pool edge allows 1") {
				t.Errorf("Provisioned = %v", findCondition(m.GetStatus().GetConditions(), MachineProvisioned))
			}

			// Booted, not assessed yet: Provisioned and Joined, not Ready.
			res := h.mustApply(bootReport(uuidA, 1, ""))
			if o, err := h.f.Get("Server", uuidA); err != nil || o.GetServer().GetStatus().GetImageVersion() != "2026.11.0" {
				t.Errorf("server image version = %q, %v", o.GetServer().GetStatus().GetImageVersion(), err)
			}
			r := getRevision(t, h.f, uuidA, 1)
			if r.GetStatus().GetPhase() != RevisionBooted || r.GetStatus().GetBootedAt().AsTime() != timeAt(res.Index) {
				t.Errorf("revision status %v", r.GetStatus())
			}
			m = getMachine(t, h.f, "m1")
			if cond(m, MachineProvisioned) != "True/Booted" || cond(m, MachineJoined) != "True/Standalone" ||
				cond(m, MachineReady) != "False/Unhealthy" || m.GetStatus().GetPhase() != PhaseJoined || m.GetStatus().GetBootedRevision() != 1 {
				t.Fatalf("machine %v", m.GetStatus())
			}
			// Assessed unhealthy: the agent's message shows.
			h.mustApply(bootReport(uuidA, 1, "False"))
			m = getMachine(t, h.f, "m1")
			if c := findCondition(m.GetStatus().GetConditions(), MachineReady); c.GetStatus() != "False" || c.GetMessage() != "assessed False" {
				t.Errorf("Ready = %v", c)
			}
			if got := revisionPhases(h.f, uuidA); got != "1=Booted" {
				t.Errorf("phases %s", got)
			}

			// Healthy: Good and Ready.
			h.mustApply(bootReport(uuidA, 1, "True"))
			if r2 := getRevision(t, h.f, uuidA, 1); r2.GetStatus().GetPhase() != RevisionGood || !r2.GetStatus().GetBootedAt().AsTime().Equal(r.GetStatus().GetBootedAt().AsTime()) {
				t.Errorf("revision status %v", r2.GetStatus())
			}
			m = getMachine(t, h.f, "m1")
			if cond(m, MachineReady) != "True/Healthy" || m.GetStatus().GetPhase() != PhaseReady ||
				findCondition(m.GetStatus().GetConditions(), MachineReady).GetMessage() != "running Revision 1" {
				t.Fatalf("machine %v", m.GetStatus())
			}
			// A Good Revision does not go back to Booted when the agent
			// reassesses (a later report without Healthy True).
			h.mustApply(bootReport(uuidA, 1, "False"))
			if got := revisionPhases(h.f, uuidA); got != "1=Good" {
				t.Errorf("phases %s", got)
			}
			if m := getMachine(t, h.f, "m1"); cond(m, MachineReady) != "False/Unhealthy" {
				t.Errorf("Ready after an unhealthy report: %s", cond(m, MachineReady))
			}
		})
	}
}

// TestClusterMachineWaitsForNode: a worker of a cluster is Provisioned
// by its boot but not Joined (the kubelet registers later), so not Ready.
func TestClusterMachineWaitsForNode(t *testing.T) {
	h := newHarness(t, Options{})
	explicitPool(h)
	claimedServer(h, uuidA, "52:54:00:00:00:01", "workers-1", "workers")
	h.mustApply(putRevisionCmd(uuidA, "workers-1", 1))
	h.mustApply(bootReport(uuidA, 1, "True"))
	m := getMachine(t, h.f, "workers-1")
	if cond(m, MachineProvisioned) != "True/Booted" || cond(m, MachineJoined) != "False/WaitingForNode" ||
		cond(m, MachineReady) != "False/"+ReasonWaitingForMilestone || m.GetStatus().GetPhase() != PhaseProvisioned {
		t.Fatalf("machine %v", m.GetStatus())
	}
	if got := revisionPhases(h.f, uuidA); got != "1=Good" {
		t.Errorf("phases %s", got)
	}
}

func TestFailedRevision(t *testing.T) {
	h := newHarness(t, Options{})
	standalonePool(h)
	claimedServer(h, uuidA, "52:54:00:00:00:01", "edge-1", "edge")
	h.mustApply(putRevisionCmd(uuidA, "edge-1", 1))
	h.mustApply(bootReport(uuidA, 1, "True"))
	h.mustApply(putRevisionCmd(uuidA, "edge-1", 2))
	if m := getMachine(t, h.f, "edge-1"); findCondition(m.GetStatus().GetConditions(), MachineReady).GetMessage() != "running Revision 1; Revision 2 pending" {
		t.Errorf("Ready = %v", findCondition(m.GetStatus().GetConditions(), MachineReady))
	}

	// The agent fell back to 1 and reports 2 failed; the same status
	// otherwise (only the failed list is new).
	reason := "boot entry roost-rev-2 ran out of tries (3 failed boots); booted revision 1"
	h.mustApply(bootReport(uuidA, 1, "True", &roostv1.FailedRevision{Number: 2, Reason: reason}))
	r := getRevision(t, h.f, uuidA, 2)
	if r.GetStatus().GetPhase() != RevisionFailed || r.GetStatus().GetReason() != reason {
		t.Fatalf("revision 2 status %v", r.GetStatus())
	}
	if got := revisionPhases(h.f, uuidA); got != "1=Good 2=Failed" {
		t.Errorf("phases %s", got)
	}
	m := getMachine(t, h.f, "edge-1")
	st := m.GetStatus()
	if st.GetRevision() != 2 || st.GetBootedRevision() != 1 || st.GetFailedRevision() != 2 || st.GetPhase() != PhaseReady ||
		cond(m, MachineReady) != "True/Healthy" || findCondition(st.GetConditions(), MachineReady).GetMessage() != "running Revision 1; Revision 2 failed" {
		t.Fatalf("machine status %v", st)
	}
	// The same report again changes nothing.
	before := snapshotBytes(t, h.f)
	h.mustApply(bootReport(uuidA, 1, "True", &roostv1.FailedRevision{Number: 2, Reason: "another reason"}))
	if r := getRevision(t, h.f, uuidA, 2); r.GetStatus().GetReason() != reason {
		t.Errorf("reason changed to %q", r.GetStatus().GetReason())
	}
	if g, w := readTables(t, h.f), readTables(t, restoreNew(t, before)); !equalMsgs(g.objects["Revision"], w.objects["Revision"]) || !equalMsgs(g.objects["Machine"], w.objects["Machine"]) {
		t.Error("a repeated failed report changed Revisions or Machines")
	}

	// A failed report for the booted Revision, or a Good one, is ignored.
	h.mustApply(bootReport(uuidA, 1, "True", &roostv1.FailedRevision{Number: 1, Reason: "nonsense"}))
	if got := revisionPhases(h.f, uuidA); got != "1=Good 2=Failed" {
		t.Errorf("phases after a failed report for the booted revision: %s", got)
	}
	h.mustApply(putRevisionCmd(uuidA, "edge-1", 3))
	h.mustApply(bootReport(uuidA, 3, "True"))
	h.mustApply(bootReport(uuidA, 3, "True", &roostv1.FailedRevision{Number: 1, Reason: "stale entry"}))
	if got := revisionPhases(h.f, uuidA); got != "1=Good 2=Failed 3=Good" {
		t.Errorf("phases after a failed report for a Good revision: %s", got)
	}
	m = getMachine(t, h.f, "edge-1")
	if st := m.GetStatus(); st.GetRevision() != 3 || st.GetBootedRevision() != 3 || st.GetFailedRevision() != 2 {
		t.Errorf("machine status %v", st)
	}
}

// TestNewestRevisionFailedBeforeAnyBoot: the first Revision failed (the
// agent still runs the enrollment image): Provisioned says so.
func TestNewestRevisionFailedBeforeAnyBoot(t *testing.T) {
	h := newHarness(t, Options{})
	standalonePool(h)
	claimedServer(h, uuidA, "52:54:00:00:00:01", "edge-1", "edge")
	h.mustApply(putRevisionCmd(uuidA, "edge-1", 1))
	h.mustApply(bootReport(uuidA, 0, "", &roostv1.FailedRevision{Number: 1, Reason: "kernel panic"}))
	m := getMachine(t, h.f, "edge-1")
	if cond(m, MachineProvisioned) != "False/RevisionFailed" ||
		findCondition(m.GetStatus().GetConditions(), MachineProvisioned).GetMessage() != "Revision 1 failed: kernel panic" ||
		m.GetStatus().GetFailedRevision() != 1 || m.GetStatus().GetPhase() != PhaseScheduled {
		t.Fatalf("machine %v", m.GetStatus())
	}
}

func TestUnreachableServerMachineNotReady(t *testing.T) {
	h := newHarness(t, Options{})
	standalonePool(h)
	claimedServer(h, uuidA, "52:54:00:00:00:01", "edge-1", "edge")
	h.mustApply(putRevisionCmd(uuidA, "edge-1", 1))
	h.mustApply(bootReport(uuidA, 1, "True"))
	if m := getMachine(t, h.f, "edge-1"); m.GetStatus().GetPhase() != PhaseReady {
		t.Fatalf("machine %v", m.GetStatus())
	}
	h.mustApply(reachabilityCmd(uuidA, false))
	m := getMachine(t, h.f, "edge-1")
	if cond(m, MachineReady) != "False/ServerUnreachable" || m.GetStatus().GetPhase() != PhaseJoined {
		t.Fatalf("machine after unreachable: %v", m.GetStatus())
	}
	if got := revisionPhases(h.f, uuidA); got != "1=Good" {
		t.Errorf("phases %s", got)
	}
	h.mustApply(reachabilityCmd(uuidA, true))
	if m := getMachine(t, h.f, "edge-1"); cond(m, MachineReady) != "True/Healthy" || m.GetStatus().GetPhase() != PhaseReady {
		t.Fatalf("machine after reachable again: %v", m.GetStatus())
	}
}

// TestNewBootDropsStaleHealthy: a report of a new booted Revision that
// carries no conditions (the agent had nothing to say yet) does not make
// that Revision Good on the last boot's Healthy=True: under
// RulesBootHealth the stale condition is dropped; older rules kept it.
func TestNewBootDropsStaleHealthy(t *testing.T) {
	for _, tc := range []struct {
		rules uint32
		want  string
	}{{RulesBootHealth, "1=Good 2=Booted"}, {RulesBootHealth - 1, "1=Good 2=Good"}} {
		t.Run(fmt.Sprintf("rules %d", tc.rules), func(t *testing.T) {
			h := newHarness(t, Options{})
			standalonePool(h)
			claimedServer(h, uuidA, "52:54:00:00:00:01", "m1", "edge")
			h.mustApply(putRevisionCmd(uuidA, "m1", 1))
			h.mustApply(bootReport(uuidA, 1, "True"))
			h.mustApply(putRevisionCmd(uuidA, "m1", 2))
			cmd := statusCmd(&roostv1.UpdateServerStatus{Name: uuidA, HasBootedRevision: true, BootedRevision: 2})
			cmd.RulesVersion = tc.rules
			h.mustApply(cmd)
			if got := revisionPhases(h.f, uuidA); got != tc.want {
				t.Errorf("phases %s, want %s", got, tc.want)
			}
		})
	}
}
