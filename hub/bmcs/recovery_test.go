package bmcs

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/bmc"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// TestRecoveryPowerCycle: a claimed Server with a BMC that holds a reboot
// Lease and whose agent stays away is power-cycled once, RecoveryAfter
// after it was last seen and before the Lease expires; not before, not
// twice for the same Lease, and not without a Lease.
func TestRecoveryPowerCycle(t *testing.T) {
	h := newHarness(t)
	const uuid = "4c4c4544-0042-3510-8052-b4c04f4d4e31"
	h.must(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{
		Objects: []*roostv1.Object{
			resource.Wrap(&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "standard"}, Spec: &roostv1.MachineClassSpec{}}),
			resource.Wrap(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "edge"}, Spec: &roostv1.PoolSpec{MachineClass: "standard", ImageChannel: "stable"}}),
		},
		Uids: []string{"00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"}}}})
	h.register("r12u7", "redfish+http://bmc.test/redfish/v1/Systems/1")
	h.must(&roostv1.Command{Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{
		Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: "abcdef"}, Spec: &roostv1.EnrollmentTokenSpec{SecretSha256: strings.Repeat("0", 64)}},
		Uid:   "00000000-0000-4000-8000-00000000aaaa"}}})
	h.must(&roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{TokenName: "abcdef", SecretSha256: strings.Repeat("0", 64),
		Identity: &roostv1.ServerIdentity{SystemUuid: uuid, PermanentMacs: []string{"52:54:00:aa:00:01"}}, AgentVersion: "v0", Uid: "00000000-0000-4000-8000-00000000bbbb"}}})
	h.must(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{Name: "r12u7", Connected: true}}})
	h.must(&roostv1.Command{Command: &roostv1.Command_CreateMachines{CreateMachines: &roostv1.CreateMachines{Machines: []*roostv1.NewMachine{{
		Name: "edge-1", Uid: "00000000-0000-4000-8000-00000000cccc", Server: "r12u7", Pool: "edge"}}}}})

	fb := &fakeBMC{power: bmc.PowerOn, fail: map[string]error{}}
	now := time.Unix(1_800_000_000, 0)
	c := &Controller{FSM: h.fsm, Propose: h.propose, RecoveryAfter: 10 * time.Minute, Now: func() time.Time { return now },
		Connect: func(*roostv1.BMC) (bmc.BMC, error) { return fb, nil }}
	reconcile := func() time.Duration {
		t.Helper()
		fb.calls = nil
		res, err := c.Reconcile(context.Background(), "r12u7")
		if err != nil {
			t.Fatal(err)
		}
		return res.RequeueAfter
	}
	cycled := func() bool { return strings.Contains(strings.Join(fb.calls, ","), "SetPower cycle") }

	// Unreachable without a Lease: no power cycle.
	h.must(&roostv1.Command{Command: &roostv1.Command_SetServerReachability{SetServerReachability: &roostv1.SetServerReachability{
		Changes: []*roostv1.ReachabilityChange{{Name: "r12u7", Reachable: false}}}}})
	lastSeen := h.server("r12u7").GetStatus().GetLastSeen().AsTime()
	now = lastSeen.Add(time.Hour)
	if reconcile(); cycled() {
		t.Fatal("power cycled a server that holds no Lease")
	}

	// A Lease granted, the agent gone: nothing before RecoveryAfter …
	now = lastSeen.Add(time.Minute)
	h.must(&roostv1.Command{Command: &roostv1.Command_GrantLease{GrantLease: &roostv1.GrantLease{Server: "r12u7", Revision: 1,
		ExpiresAt: timestamppb.New(lastSeen.Add(30 * time.Minute)), MaxUnavailable: 1, Uid: "00000000-0000-4000-8000-00000000dddd"}}})
	if after := reconcile(); cycled() || after != DefaultProbeInterval {
		t.Fatalf("cycled %v, requeue after %s; want no cycle yet", cycled(), after)
	}
	now = lastSeen.Add(10*time.Minute - 10*time.Second)
	if after := reconcile(); cycled() || after != 10*time.Second {
		t.Fatalf("cycled %v, requeue after %s; want no cycle, again in 10s", cycled(), after)
	}
	// … then one power cycle, recorded.
	now = lastSeen.Add(10 * time.Minute)
	if reconcile(); !cycled() {
		t.Fatalf("no power cycle at RecoveryAfter: calls %v", fb.calls)
	}
	s := h.server("r12u7")
	fencing := h.fsm.Reader().Get("Lease", "r12u7").GetLease().GetSpec().GetFencingToken()
	if got := condition(s, state.ConditionBMCOperation); got.GetReason() != "RecoveryPowerCycle" || s.GetStatus().GetBmc().GetRecoveryFencingToken() != fencing {
		t.Fatalf("after the recovery: condition %v, fencing %d (lease %d)", got, s.GetStatus().GetBmc().GetRecoveryFencingToken(), fencing)
	}
	// Once per Lease.
	now = lastSeen.Add(20 * time.Minute)
	if reconcile(); cycled() {
		t.Fatal("power cycled twice for one Lease")
	}
}
