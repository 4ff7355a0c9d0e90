package state

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

func secretHash(secret string) string {
	s := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(s[:])
}

const (
	tokSecret = "abcdef.0123456789abcdef"
	uuidA     = "4c4c4544-0042-3510-8052-b4c04f4d4e31"
)

func putEnrollTokenCmd(name, secret string, mods ...func(*roostv1.EnrollmentTokenSpec)) *roostv1.Command {
	spec := &roostv1.EnrollmentTokenSpec{SecretSha256: secretHash(secret)}
	for _, m := range mods {
		m(spec)
	}
	return &roostv1.Command{Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{
		Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: name}, Spec: spec}, Uid: "00000000-0000-4000-8000-00000000aaaa"}}}
}

func inventory(cpus int32, memGiB int64) *roostv1.Inventory {
	return &roostv1.Inventory{
		Cpu: &roostv1.CPUInfo{Model: "EPYC 7313", Sockets: 1, Cores: cpus / 2, Threads: cpus}, MemoryBytes: memGiB << 30,
		Disks:  []*roostv1.DiskInfo{{Name: "nvme0n1", SizeBytes: 960 << 30}, {Name: "sda", SizeBytes: 4000 << 30, Rotational: true}, {Name: "sdb", SizeBytes: 8 << 30, Removable: true}},
		Nics:   []*roostv1.NICInfo{{Name: "eno1", Mac: "52:54:00:00:00:01", SpeedMbps: 25000}, {Name: "br0", Virtual: true}},
		System: &roostv1.SystemInfo{Vendor: "Dell Inc.", Product: "PowerEdge R6525"}, Firmware: "UEFI", Arch: "amd64",
	}
}

func enrollCmd(secret, uuid string, macs []string, inv *roostv1.Inventory) *roostv1.Command {
	id := strings.SplitN(secret, ".", 2)[0]
	return &roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{
		TokenName: id, SecretSha256: secretHash(secret), Identity: &roostv1.ServerIdentity{SystemUuid: uuid, PermanentMacs: macs},
		Inventory: inv, AgentVersion: "v0.1.0", Uid: "00000000-0000-4000-8000-00000000bbbb"}}}
}

func getServer(t *testing.T, f *FSM, name string) *roostv1.Server {
	t.Helper()
	o, err := f.Get("Server", name)
	if err != nil {
		t.Fatal(err)
	}
	return o.GetServer()
}

func getToken(t *testing.T, f *FSM, name string) *roostv1.EnrollmentToken {
	t.Helper()
	o, err := f.Get("EnrollmentToken", name)
	if err != nil {
		t.Fatal(err)
	}
	return o.GetEnrollmentToken()
}

func TestServerNames(t *testing.T) {
	macs := []string{"52:54:00:00:00:02", "52:54:00:00:00:01"}
	_, fp := MACFingerprint(macs)
	for _, tc := range []struct{ uuid, want string }{
		{strings.ToUpper(uuidA), uuidA},
		{"", "mac-" + fp[:20]},
		{"00000000-0000-0000-0000-000000000000", "mac-" + fp[:20]},
		{"FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", "mac-" + fp[:20]},
		{"03000200-0400-0500-0006-000700080009", "mac-" + fp[:20]},
		{"not-a-uuid", "mac-" + fp[:20]},
	} {
		name, _, _, _ := baseServerName(&roostv1.ServerIdentity{SystemUuid: tc.uuid, PermanentMacs: macs})
		if name != tc.want {
			t.Errorf("name(%q) = %q, want %q", tc.uuid, name, tc.want)
		}
	}
	// MAC order and case do not matter.
	_, fp2 := MACFingerprint([]string{"52:54:00:00:00:01", "52:54:00:00:00:02", "52:54:00:00:00:01"})
	_, fp3 := MACFingerprint([]string{"52:54:00:00:00:02", "52:54:00:00:00:01"})
	if fp2 != fp3 || fp2 != fp {
		t.Errorf("fingerprints differ: %s %s %s", fp, fp2, fp3)
	}
}

func TestDerivedLabels(t *testing.T) {
	got := DerivedLabels(inventory(32, 128))
	want := map[string]string{
		LabelArch: "amd64", LabelCPUs: "32", LabelCPUCores: "16", LabelCPUSockets: "1", LabelMemoryGiB: "128",
		LabelFirmware: "uefi", LabelDisks: "2", LabelSSDs: "1", LabelDiskGiB: "4960", LabelLargestDisk: "4000",
		LabelNICs: "1", LabelMaxNICSpeed: "25000", LabelVendor: "Dell-Inc", LabelProduct: "PowerEdge-R6525",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d labels, want %d: %v", len(got), len(want), got)
	}
	// Selectors can use them.
	for _, sel := range []string{"roost.io/cpus>=16", "roost.io/memory-gib>=64", "roost.io/arch=amd64", "roost.io/firmware=uefi"} {
		r, err := resource.ParseRequirement(sel)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Matches(got) {
			t.Errorf("%s does not match %v", sel, got)
		}
	}
}

func TestEnrollDuplicateUUIDAndReenroll(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(clusterObj("prod", nil), machineClassObj("standard"), poolObj("workers", "prod")))
	h.mustApply(putEnrollTokenCmd("abcdef", tokSecret, func(s *roostv1.EnrollmentTokenSpec) {
		s.Pool = "workers"
		s.ServerLabels = map[string]string{"rack": "r12"}
	}))
	macsA := []string{"52:54:00:00:00:01"}
	macsB := []string{"52:54:00:00:00:02"}
	h.mustApply(enrollCmd(tokSecret, uuidA, macsA, inventory(8, 16)))
	first := getServer(t, h.f, uuidA)
	if first.GetSpec().GetPool() != "workers" || first.GetMetadata().GetLabels()["rack"] != "r12" || first.GetMetadata().GetLabels()[LabelCPUs] != "8" {
		t.Fatalf("server = %v", first)
	}

	// Re-enrolling the same UUID with the same MACs updates it.
	res := h.mustApply(enrollCmd(tokSecret, strings.ToUpper(uuidA), macsA, inventory(16, 32)))
	if res.Results[0].GetName() != uuidA || res.Results[0].GetAction() != ActionConfigured {
		t.Fatalf("re-enroll results = %v", res.Results)
	}
	again := getServer(t, h.f, uuidA)
	if again.GetMetadata().GetUid() != first.GetMetadata().GetUid() || again.GetMetadata().GetLabels()[LabelCPUs] != "16" {
		t.Errorf("re-enrolled server = %v", again)
	}

	// Same UUID, other MACs: both kept and flagged.
	res = h.mustApply(enrollCmd(tokSecret, uuidA, macsB, inventory(8, 16)))
	_, fpB := MACFingerprint(macsB)
	dupName := uuidA + "-" + fpB[:8]
	if res.Results[0].GetName() != dupName || res.Results[0].GetAction() != ActionCreated {
		t.Fatalf("duplicate results = %v", res.Results)
	}
	for name, other := range map[string]string{uuidA: dupName, dupName: uuidA} {
		c := findCondition(getServer(t, h.f, name).GetStatus().GetConditions(), ConditionDuplicateUUID)
		if c == nil || c.GetStatus() != "True" || !strings.Contains(c.GetMessage(), other) {
			t.Errorf("%s DuplicateUUID condition = %v, want one naming %s", name, c, other)
		}
	}
	// The newcomer re-enrolling updates itself, not the first.
	res = h.mustApply(enrollCmd(tokSecret, uuidA, macsB, inventory(8, 16)))
	if res.Results[0].GetName() != dupName || res.Results[0].GetAction() != ActionConfigured {
		t.Fatalf("duplicate re-enroll results = %v", res.Results)
	}
	if n := h.f.Count("Server"); n != 2 {
		t.Errorf("%d servers, want 2", n)
	}
	// No identity at all is refused.
	wantCode(t, h.apply(enrollCmd(tokSecret, "00000000-0000-0000-0000-000000000000", nil, nil)).Err, codes.InvalidArgument)
}

func statusCmd(u *roostv1.UpdateServerStatus) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: u}}
}

func modifyCmd(name string, a roostv1.ServerAction, mods ...func(*roostv1.ModifyServer)) *roostv1.Command {
	c := &roostv1.ModifyServer{Name: name, Action: a}
	for _, m := range mods {
		m(c)
	}
	return &roostv1.Command{Command: &roostv1.Command_ModifyServer{ModifyServer: c}}
}

func TestServerLifecycle(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(putEnrollTokenCmd("abcdef", tokSecret, func(s *roostv1.EnrollmentTokenSpec) { s.RequireApproval = true }))
	h.mustApply(enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:01"}, inventory(8, 16)))
	state := func() string { return getServer(t, h.f, uuidA).GetStatus().GetState() }
	if state() != ServerEnrolling {
		t.Fatalf("state = %s", state())
	}
	h.mustApply(statusCmd(&roostv1.UpdateServerStatus{Name: uuidA, Connected: true}))
	if state() != ServerPendingApproval {
		t.Fatalf("state after connect = %s", state())
	}
	h.mustApply(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_APPROVE))
	if state() != ServerAvailable {
		t.Fatalf("state after approve = %s", state())
	}

	// Status updates: an unchanged update writes nothing.
	inv := inventory(64, 512)
	h.mustApply(statusCmd(&roostv1.UpdateServerStatus{Name: uuidA, Inventory: inv, HasBootedRevision: true, BootedRevision: 3,
		HasConditions: true, Conditions: []*roostv1.Condition{{Type: "NetworkReady", Status: "True"}, {Type: ConditionApproved, Status: "False"}}}))
	s := getServer(t, h.f, uuidA)
	if s.GetMetadata().GetLabels()[LabelCPUs] != "64" || s.GetStatus().GetBootedRevision() != 3 {
		t.Errorf("after status: %v", s)
	}
	if c := findCondition(s.GetStatus().GetConditions(), ConditionApproved); c.GetStatus() != "True" {
		t.Errorf("agent overwrote the hub's Approved condition: %v", c)
	}
	if c := findCondition(s.GetStatus().GetConditions(), "NetworkReady"); c.GetStatus() != "True" {
		t.Errorf("NetworkReady = %v", c)
	}
	mod := s.GetMetadata().GetModifyIndex()
	h.mustApply(statusCmd(&roostv1.UpdateServerStatus{Name: uuidA, Inventory: inv, HasBootedRevision: true, BootedRevision: 3}))
	if got := getServer(t, h.f, uuidA).GetMetadata().GetModifyIndex(); got != mod {
		t.Errorf("an unchanged status moved modifyIndex %d → %d", mod, got)
	}

	// Labels, cordon.
	h.mustApply(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_LABEL, func(c *roostv1.ModifyServer) { c.SetLabels = map[string]string{"rack": "r1", "gpu": "a100"} }))
	h.mustApply(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_LABEL, func(c *roostv1.ModifyServer) { c.RemoveLabels = []string{"gpu"} }))
	wantCode(t, h.apply(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_LABEL, func(c *roostv1.ModifyServer) { c.SetLabels = map[string]string{LabelCPUs: "1"} })).Err, codes.InvalidArgument)
	s = getServer(t, h.f, uuidA)
	if l := s.GetMetadata().GetLabels(); l["rack"] != "r1" || l["gpu"] != "" || l[LabelCPUs] != "64" {
		t.Errorf("labels = %v", l)
	}
	gen := s.GetMetadata().GetGeneration()
	h.mustApply(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_CORDON))
	s = getServer(t, h.f, uuidA)
	if !s.GetSpec().GetUnschedulable() || s.GetMetadata().GetGeneration() != gen+1 {
		t.Errorf("cordon: %v", s.GetSpec())
	}
	if res := h.mustApply(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_CORDON)); res.Results[0].GetAction() != ActionUnchanged {
		t.Errorf("second cordon: %v", res.Results)
	}
	h.mustApply(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_UNCORDON))

	// Decommission; status from a decommissioned agent is refused; approve too.
	h.mustApply(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_DECOMMISSION, func(c *roostv1.ModifyServer) { c.Reason = "broken PSU" }))
	s = getServer(t, h.f, uuidA)
	if s.GetStatus().GetState() != ServerDecommissioned || s.GetStatus().GetStateReason() != "broken PSU" {
		t.Errorf("decommission: %v", s.GetStatus())
	}
	wantCode(t, h.apply(statusCmd(&roostv1.UpdateServerStatus{Name: uuidA, Connected: true})).Err, codes.FailedPrecondition)
	wantCode(t, h.apply(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_APPROVE)).Err, codes.FailedPrecondition)
	// Enrolling again brings it back (to Enrolling, held for approval again).
	h.mustApply(putEnrollTokenCmd("ghijkl", "ghijkl.0123456789abcdef"))
	h.mustApply(enrollCmd("ghijkl.0123456789abcdef", uuidA, []string{"52:54:00:00:00:01"}, inventory(8, 16)))
	if st := getServer(t, h.f, uuidA).GetStatus(); st.GetState() != ServerEnrolling || st.GetEnrollmentToken() != "ghijkl" {
		t.Errorf("after re-enroll: %v", st)
	}
	h.mustApply(statusCmd(&roostv1.UpdateServerStatus{Name: uuidA, Connected: true}))
	if state() != ServerAvailable {
		t.Errorf("state = %s (token ghijkl needs no approval)", state())
	}
	// Deny.
	h.mustApply(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_DENY))
	if st := getServer(t, h.f, uuidA).GetStatus(); st.GetState() != ServerDecommissioned || st.GetStateReason() != "denied by an operator" {
		t.Errorf("deny: %v", st)
	}
	wantCode(t, h.apply(modifyCmd("nope", roostv1.ServerAction_SERVER_ACTION_CORDON)).Err, codes.NotFound)
}

func TestSetServerReachability(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(putEnrollTokenCmd("abcdef", tokSecret))
	h.mustApply(enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:01"}, nil))
	if r := getServer(t, h.f, uuidA).GetStatus().GetReachability(); r != Reachable {
		t.Fatalf("reachability after enroll = %q", r)
	}
	seen := timestamppb.New(t0.Add(time.Minute))
	h.mustApply(&roostv1.Command{Command: &roostv1.Command_SetServerReachability{SetServerReachability: &roostv1.SetServerReachability{
		Changes: []*roostv1.ReachabilityChange{{Name: uuidA, Reachable: false, LastSeen: seen}, {Name: "gone"}}}}})
	st := getServer(t, h.f, uuidA).GetStatus()
	if st.GetReachability() != Unreachable || !proto.Equal(st.GetLastSeen(), seen) {
		t.Errorf("status = %v", st)
	}
}

// Denying or decommissioning a Claimed Server is refused with the Machine
// that claims it and the command that releases it (with a cordon first
// when its Pool has replicas, so the pool does not claim it again).
func TestTakeClaimedServerOutOfService(t *testing.T) {
	h := newHarness(t, Options{})
	explicitPool(h)
	availableServer(h, uuidA, "52:54:00:00:00:01")
	h.mustApply(createMachinesCmd(false, newMachine("workers-abcde", uuidA, "workers")))
	for _, tc := range []struct {
		action roostv1.ServerAction
		then   string
	}{{roostv1.ServerAction_SERVER_ACTION_DECOMMISSION, "decommission it"}, {roostv1.ServerAction_SERVER_ACTION_DENY, "deny it"}} {
		e := wantCode(t, h.apply(modifyCmd(uuidA, tc.action)).Err, codes.FailedPrecondition)
		want := "Server " + uuidA + " is claimed by Machine workers-abcde of Pool workers: release it with 'roostctl pool unassign workers " +
			uuidA + "' (a worker's Node is drained first), then " + tc.then
		if e.Message != want {
			t.Errorf("%v:\n got %s\nwant %s", tc.action, e.Message, want)
		}
	}

	srv := getServer(t, h.f, uuidA)
	m := getMachine(t, h.f, "workers-abcde")
	replicas := &roostv1.Pool{Spec: &roostv1.PoolSpec{Replicas: proto.Int32(3)}}
	if got, want := ReleaseHint(uuidA, m, replicas), "cordon it so Pool workers (replicas: 3) does not claim it again ('roostctl server cordon "+uuidA+"'), release it with 'roostctl pool unassign workers "+uuidA+"'"; !strings.HasPrefix(got, want) {
		t.Errorf("replicas hint:\n got %s\nwant %s…", got, want)
	}
	m.Spec.Pool = ""
	if got := ClaimedRefusal(srv, m, nil, "decommission it"); got != "Server "+uuidA+" is claimed by standalone Machine workers-abcde: release it with 'roostctl machine delete workers-abcde', then decommission it" {
		t.Errorf("standalone: %s", got)
	}
}
