package state

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

const bmcPassword = "hunter2-bmc-Pa55"

func testBMC() *roostv1.BMC {
	return &roostv1.BMC{Address: "redfish+https://10.20.0.17/redfish/v1/Systems/1", Username: "roost", Password: bmcPassword}
}

func registerCmd(name string, macs []string, pool string) *roostv1.Command {
	return withRules(RulesBMC, &roostv1.Command{Command: &roostv1.Command_RegisterServer{RegisterServer: &roostv1.RegisterServer{
		Name: name, Uid: "00000000-0000-4000-8000-00000000cccc", Bmc: testBMC(), Macs: macs, Pool: pool}}})
}

func bmcActionCmd(name string, action roostv1.ServerAction, mod func(*roostv1.ModifyServer)) *roostv1.Command {
	c := &roostv1.ModifyServer{Name: name, Action: action, OperationId: "op-1"}
	if mod != nil {
		mod(c)
	}
	return withRules(RulesBMC, &roostv1.Command{Command: &roostv1.Command_ModifyServer{ModifyServer: c}})
}

func updateBMCCmd(u *roostv1.UpdateServerBMC) *roostv1.Command {
	return withRules(RulesBMC, &roostv1.Command{Command: &roostv1.Command_UpdateServerBmc{UpdateServerBmc: u}})
}

const isoDigest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestRegisterServer(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(append(baseObjects(), poolObj("px", "prod"))...))
	res := h.mustApply(registerCmd("r12u7", []string{"52:54:00:AA:00:01"}, "px"))
	if got := actions(res); len(got) != 1 || got[0] != "Server/r12u7=created" {
		t.Fatalf("results %v", got)
	}
	s := getServer(t, h.f, "r12u7")
	if s.GetStatus().GetState() != ServerRegistered || s.GetSpec().GetPool() != "px" || !s.GetStatus().GetBmc().GetCredentialsSet() {
		t.Fatalf("server %v", s)
	}
	if got := s.GetSpec().GetPermanentMacs(); len(got) != 1 || got[0] != "52:54:00:aa:00:01" {
		t.Fatalf("macs %v", got)
	}
	// A read never shows the credentials.
	o, _ := h.f.Get("Server", "r12u7")
	js, _ := protojson.Marshal(resource.StripWriteOnly(o))
	if strings.Contains(string(js), bmcPassword) || strings.Contains(string(js), `"roost"`) {
		t.Fatalf("read shows the BMC account: %s", js)
	}

	// Refusals: an unknown pool, a MAC of another Server, a bad address,
	// MACs on an existing Server.
	wantCode(t, h.apply(registerCmd("r12u8", nil, "nope")).Err, codes.NotFound)
	wantCode(t, h.apply(registerCmd("r12u8", []string{"52:54:00:aa:00:01"}, "")).Err, codes.FailedPrecondition)
	bad := registerCmd("r12u8", nil, "")
	bad.GetRegisterServer().Bmc.Address = "https://u:" + bmcPassword + "@10.0.0.1/redfish/v1/Systems/1"
	e := wantCode(t, h.apply(bad).Err, codes.InvalidArgument)
	if strings.Contains(e.Error(), bmcPassword) {
		t.Fatalf("refusal quotes the password: %v", e)
	}
	// Again with the same BMC: unchanged.
	if got := actions(h.mustApply(registerCmd("r12u7", []string{"52:54:00:aa:00:01"}, "px"))); got[0] != "Server/r12u7=unchanged" {
		t.Fatalf("re-register: %v", got)
	}
	// Before it enrolled, a new registration replaces the record.
	if got := actions(h.mustApply(registerCmd("r12u7", []string{"52:54:00:aa:00:02"}, ""))); got[0] != "Server/r12u7=configured" {
		t.Fatalf("re-register: %v", got)
	}
	// Once it enrolled, MACs and pool come from the enrollment.
	h.mustApply(putEnrollTokenCmd("abcdef", tokSecret))
	h.mustApply(withRules(RulesBMC, enrollCmd(tokSecret, uuidA, []string{"52:54:00:aa:00:02"}, inventory(8, 32))))
	wantCode(t, h.apply(registerCmd("r12u7", []string{"52:54:00:aa:00:02"}, "")).Err, codes.FailedPrecondition)
	if got := actions(h.mustApply(registerCmd("r12u7", nil, ""))); got[0] != "Server/r12u7=unchanged" {
		t.Fatalf("BMC of an enrolled server: %v", got)
	}
	// Older rules do not know the command.
	wantCode(t, h.apply(withRules(RulesBMC-1, registerCmd("r12u9", nil, ""))).Err, codes.InvalidArgument)
}

func TestBMCOperations(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(registerCmd("r12u7", []string{"52:54:00:aa:00:01"}, ""))
	h.mustApply(bmcActionCmd("r12u7", roostv1.ServerAction_SERVER_ACTION_POWER, func(c *roostv1.ModifyServer) { c.Power = "cycle" }))
	op := getServer(t, h.f, "r12u7").GetStatus().GetBmc().GetOperation()
	if op.GetAction() != BMCPowerCycle || op.GetId() != "op-1" {
		t.Fatalf("operation %v", op)
	}
	wantCode(t, h.apply(bmcActionCmd("r12u7", roostv1.ServerAction_SERVER_ACTION_POWER, func(c *roostv1.ModifyServer) { c.Power = "reboot" })).Err, codes.InvalidArgument)
	wantCode(t, h.apply(bmcActionCmd("r12u7", roostv1.ServerAction_SERVER_ACTION_BOOT_ONCE, func(c *roostv1.ModifyServer) { c.BootDevice = "floppy" })).Err, codes.InvalidArgument)
	wantCode(t, h.apply(bmcActionCmd("r12u7", roostv1.ServerAction_SERVER_ACTION_PROVISION, func(c *roostv1.ModifyServer) { c.MediaDigest = "sha256:x" })).Err, codes.InvalidArgument)
	wantCode(t, h.apply(bmcActionCmd("nope", roostv1.ServerAction_SERVER_ACTION_POWER, func(c *roostv1.ModifyServer) { c.Power = "on" })).Err, codes.NotFound)
	wantCode(t, h.apply(withRules(RulesBMC-1, bmcActionCmd("r12u7", roostv1.ServerAction_SERVER_ACTION_POWER, func(c *roostv1.ModifyServer) { c.Power = "on" }))).Err, codes.InvalidArgument)

	// A later request replaces the pending one.
	h.mustApply(bmcActionCmd("r12u7", roostv1.ServerAction_SERVER_ACTION_PROVISION, func(c *roostv1.ModifyServer) { c.MediaDigest, c.OperationId = isoDigest, "op-2" }))
	op = getServer(t, h.f, "r12u7").GetStatus().GetBmc().GetOperation()
	if op.GetAction() != BMCProvision || op.GetMediaDigest() != isoDigest {
		t.Fatalf("operation %v", op)
	}
	// The controller's report of an older operation keeps the pending one.
	h.mustApply(updateBMCCmd(&roostv1.UpdateServerBMC{Server: "r12u7", DoneOperation: "op-1", PowerState: "Off"}))
	if getServer(t, h.f, "r12u7").GetStatus().GetBmc().GetOperation() == nil {
		t.Fatal("a report of op-1 cleared op-2")
	}
	h.mustApply(updateBMCCmd(&roostv1.UpdateServerBMC{Server: "r12u7", DoneOperation: "op-2", PowerState: "On", SetMedia: true, MediaDigest: isoDigest,
		SystemUuid: strings.ToUpper(uuidA), Set: []*roostv1.Condition{{Type: ConditionBMCOperation, Status: "True", Reason: "Succeeded"}}}))
	b := getServer(t, h.f, "r12u7").GetStatus().GetBmc()
	if b.GetOperation() != nil || b.GetPowerState() != "On" || b.GetMediaDigest() != isoDigest || b.GetSystemUuid() != uuidA {
		t.Fatalf("bmc status %v", b)
	}
	wantCode(t, h.apply(updateBMCCmd(&roostv1.UpdateServerBMC{Server: "r12u7", Set: []*roostv1.Condition{{Type: "Ready", Status: "True"}}})).Err, codes.InvalidArgument)

	// A Server without a BMC has no BMC operations.
	h.mustApply(putEnrollTokenCmd("abcdef", tokSecret))
	h.mustApply(enrollCmd(tokSecret, "4c4c4544-0042-3510-8052-b4c04f4d4e32", []string{"52:54:00:00:00:09"}, inventory(8, 32)))
	wantCode(t, h.apply(bmcActionCmd("4c4c4544-0042-3510-8052-b4c04f4d4e32", roostv1.ServerAction_SERVER_ACTION_POWER, func(c *roostv1.ModifyServer) { c.Power = "on" })).Err, codes.FailedPrecondition)
}

func TestEnrollmentMatchesRegisteredServer(t *testing.T) {
	for _, tc := range []struct {
		name string
		macs []string // registered
		uuid string   // reported by the BMC
	}{
		{"by MAC", []string{"52:54:00:00:00:01"}, ""},
		{"by BMC system UUID", nil, uuidA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.mustApply(putEnrollTokenCmd("abcdef", tokSecret))
			h.mustApply(registerCmd("r12u7", tc.macs, ""))
			if tc.uuid != "" {
				h.mustApply(updateBMCCmd(&roostv1.UpdateServerBMC{Server: "r12u7", SystemUuid: tc.uuid}))
			}
			res := h.mustApply(withRules(RulesBMC, enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:01"}, inventory(8, 32))))
			if got := actions(res); len(got) != 1 || got[0] != "Server/r12u7=configured" {
				t.Fatalf("enroll results %v", got)
			}
			s := getServer(t, h.f, "r12u7")
			if s.GetStatus().GetState() != ServerEnrolling || s.GetSpec().GetSystemUuid() != uuidA || s.GetSpec().GetBmc() == nil {
				t.Fatalf("server after enrollment: %v", s)
			}
			if o, _ := h.f.Get("Server", uuidA); o != nil {
				t.Fatal("a second Server was made under the derived name")
			}
			// It enrolls again (a new install, a lost identity): same record.
			res = h.mustApply(withRules(RulesBMC, enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:01"}, inventory(8, 32))))
			if got := actions(res); got[0] != "Server/r12u7=configured" {
				t.Fatalf("re-enroll results %v", got)
			}
		})
	}
	// Registered under the name its enrollment derives (its UUID): the
	// same record, no duplicate.
	h0 := newHarness(t, Options{})
	h0.mustApply(putEnrollTokenCmd("abcdef", tokSecret))
	h0.mustApply(registerCmd(uuidA, []string{"52:54:00:00:00:01"}, ""))
	res0 := h0.mustApply(withRules(RulesBMC, enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:01"}, inventory(8, 32))))
	if got := actions(res0); len(got) != 1 || got[0] != "Server/"+uuidA+"=configured" {
		t.Fatalf("enroll of a server registered under its UUID: %v", got)
	}
	if s := getServer(t, h0.f, uuidA); s.GetStatus().GetState() != ServerEnrolling || findCondition(s.GetStatus().GetConditions(), ConditionDuplicateUUID) != nil {
		t.Fatalf("server registered under its UUID, after enrollment: %v", s)
	}
	// Under older rules the enrollment makes a Server of its own.
	h := newHarness(t, Options{})
	h.mustApply(putEnrollTokenCmd("abcdef", tokSecret))
	h.mustApply(registerCmd("r12u7", []string{"52:54:00:00:00:01"}, ""))
	res := h.mustApply(withRules(RulesBMC-1, enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:01"}, inventory(8, 32))))
	if got := actions(res); got[0] != "Server/"+uuidA+"=created" {
		t.Fatalf("enroll under rules %d: %v", RulesBMC-1, got)
	}
}

func TestDecommissionPowersOff(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(registerCmd("r12u7", nil, ""))
	h.mustApply(bmcActionCmd("r12u7", roostv1.ServerAction_SERVER_ACTION_DECOMMISSION, nil))
	s := getServer(t, h.f, "r12u7")
	if s.GetStatus().GetState() != ServerDecommissioned || s.GetStatus().GetBmc().GetOperation().GetAction() != BMCPowerOff {
		t.Fatalf("server %v", s)
	}
}

// TestAgentReportKeepsBMCConditions: an agent's conditions replace its
// own, never the BMC controller's.
func TestAgentReportKeepsBMCConditions(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(putEnrollTokenCmd("abcdef", tokSecret))
	h.mustApply(registerCmd(uuidA, []string{"52:54:00:00:00:01"}, ""))
	h.mustApply(withRules(RulesBMC, enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:01"}, inventory(8, 32))))
	h.mustApply(updateBMCCmd(&roostv1.UpdateServerBMC{Server: uuidA, Set: []*roostv1.Condition{{Type: ConditionBMCReachable, Status: "True", Reason: "Reached"}}}))
	h.mustApply(withRules(RulesBMC, statusCmd(&roostv1.UpdateServerStatus{Name: uuidA, HasConditions: true,
		Conditions: []*roostv1.Condition{{Type: "Healthy", Status: "True"}, {Type: ConditionBMCReachable, Status: "False", Reason: "Forged"}}})))
	s := getServer(t, h.f, uuidA)
	if c := findCondition(s.GetStatus().GetConditions(), ConditionBMCReachable); c.GetReason() != "Reached" {
		t.Fatalf("BMCReachable after an agent report: %v", c)
	}
	if findCondition(s.GetStatus().GetConditions(), "Healthy") == nil {
		t.Fatal("the agent's own condition was not recorded")
	}
}

func TestBMCWarnings(t *testing.T) {
	b := testBMC()
	if w := BMCWarnings(b); len(w) != 0 {
		t.Fatalf("warnings for a verified BMC: %v", w)
	}
	b.InsecureSkipVerify = true
	if w := BMCWarnings(b); len(w) != 1 || !strings.HasPrefix(w[0], "spec.bmc.insecureSkipVerify: ") || strings.Contains(w[0], bmcPassword) {
		t.Fatalf("warnings for insecureSkipVerify: %v", w)
	}
}

func TestRegisteredServerIsNotClaimed(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(append(baseObjects(), poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.Replicas = nil }))...))
	h.mustApply(registerCmd("r12u7", nil, ""))
	e := wantCode(t, h.apply(createMachinesCmd(false, newMachine("workers-1", "r12u7", "workers"))).Err, codes.FailedPrecondition)
	if !strings.Contains(e.Error(), "roostctl server provision r12u7") {
		t.Fatalf("refusal %v", e)
	}
}
