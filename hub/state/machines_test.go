package state

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

const uuidB = "4c4c4544-0042-3510-8052-b4c04f4d4e32"

func createMachinesCmd(byController bool, ms ...*roostv1.NewMachine) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_CreateMachines{CreateMachines: &roostv1.CreateMachines{Machines: ms, ByController: byController}}}
}

func newMachine(name, server, pool string) *roostv1.NewMachine {
	return &roostv1.NewMachine{Name: name, Uid: "00000000-0000-4000-8000-0000000" + strings.Repeat("c", 5), Server: server, Pool: pool}
}

func deleteMachinesCmd(pool string, names, servers []string) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_DeleteMachines{DeleteMachines: &roostv1.DeleteMachines{Pool: pool, Names: names, Servers: servers}}}
}

func getMachine(t *testing.T, f *FSM, name string) *roostv1.Machine {
	t.Helper()
	o, err := f.Get("Machine", name)
	if err != nil {
		t.Fatal(err)
	}
	return o.GetMachine()
}

// availableServer enrolls a Server with the "abcdef" token (created if
// missing, no pool) and connects it, so it is Available.
func availableServer(h *harness, uuid, mac string) {
	if _, err := h.f.Get("EnrollmentToken", "abcdef"); err != nil {
		h.mustApply(putEnrollTokenCmd("abcdef", tokSecret))
	}
	h.mustApply(enrollCmd(tokSecret, uuid, []string{mac}, inventory(16, 64)))
	h.mustApply(statusCmd(&roostv1.UpdateServerStatus{Name: uuid, Connected: true}))
}

// explicitPool is Pool "workers" of Cluster "prod" without replicas.
func explicitPool(h *harness) {
	h.mustApply(h.objects(append(baseObjects(), poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.Replicas = nil }))...))
}

func TestAssignAndUnassign(t *testing.T) {
	h := newHarness(t, Options{})
	explicitPool(h)
	availableServer(h, uuidA, "52:54:00:00:00:01")
	sub, err := h.f.Subscribe("Machine", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	res := h.mustApply(createMachinesCmd(false, newMachine("workers-abcde", uuidA, "workers")))
	if got := actions(res); len(got) != 1 || got[0] != "Machine/workers-abcde=created" {
		t.Errorf("actions %v", got)
	}
	m := getMachine(t, h.f, "workers-abcde")
	if m.GetStatus().GetPhase() != PhaseScheduled || m.GetStatus().GetCluster() != "prod" || m.GetSpec().GetServer() != uuidA {
		t.Fatalf("machine %v", m)
	}
	prov := findCondition(m.GetStatus().GetConditions(), MachineProvisioned)
	if prov.GetStatus() != "False" || prov.GetReason() != ReasonWaitingForRevision {
		t.Errorf("Provisioned = %v", prov)
	}
	if p, _ := h.f.Get("Pool", "workers"); p.GetPool().GetStatus().GetMachines() != 1 {
		t.Errorf("pool status %v", p.GetPool().GetStatus())
	}
	srv := getServer(t, h.f, uuidA)
	if srv.GetStatus().GetState() != ServerClaimed || srv.GetSpec().GetPool() != "workers" {
		t.Fatalf("server %v", srv)
	}

	// One Machine per Server.
	e := wantCode(t, h.apply(createMachinesCmd(false, newMachine("workers-fghij", uuidA, "workers"))).Err, codes.FailedPrecondition)
	if !strings.Contains(e.Message, "already claimed by Machine workers-abcde") {
		t.Errorf("message %q", e.Message)
	}
	// The Pool, and the Server, cannot be deleted while the Machine holds them.
	e = wantCode(t, h.apply(deleteCmd("Pool", "workers")).Err, codes.FailedPrecondition)
	if !strings.Contains(e.Message, `Machine "workers-abcde"`) {
		t.Errorf("message %q", e.Message)
	}
	wantCode(t, h.apply(deleteCmd("Server", uuidA)).Err, codes.FailedPrecondition)
	// Unassigning from another pool is refused.
	h.mustApply(h.objects(poolObj("other", "prod", func(s *roostv1.PoolSpec) { s.Replicas = nil })))
	wantCode(t, h.apply(deleteMachinesCmd("other", nil, []string{uuidA})).Err, codes.FailedPrecondition)

	res = h.mustApply(deleteMachinesCmd("workers", nil, []string{uuidA}))
	if len(res.Results) != 1 || res.Results[0].GetName() != "workers-abcde" || res.Results[0].GetAction() != ActionDeleted {
		t.Fatalf("results %v", res.Results)
	}
	if _, err := h.f.Get("Machine", "workers-abcde"); err == nil {
		t.Fatal("machine still there")
	}
	if p, _ := h.f.Get("Pool", "workers"); p.GetPool().GetStatus().GetMachines() != 0 {
		t.Errorf("pool status %v", p.GetPool().GetStatus())
	}
	srv = getServer(t, h.f, uuidA)
	if srv.GetStatus().GetState() != ServerAvailable || srv.GetSpec().GetPool() != "" {
		t.Fatalf("server %v", srv)
	}
	var last *roostv1.WatchEvent
	for len(sub.Events()) > 0 {
		last = <-sub.Events()
	}
	if last.GetType() != roostv1.WatchEvent_TYPE_DELETED || last.GetObject().GetMachine().GetStatus().GetPhase() != PhaseDestroyed {
		t.Errorf("last event %v", last)
	}
	h.mustApply(deleteCmd("Pool", "workers"))
}

func TestClaimRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(h *harness)
		pool  string
		code  codes.Code
		want  string
	}{
		{"cordoned", func(h *harness) { h.mustApply(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_CORDON)) }, "workers", codes.FailedPrecondition, "cordoned"},
		{"unreachable", func(h *harness) {
			h.mustApply(&roostv1.Command{Command: &roostv1.Command_SetServerReachability{SetServerReachability: &roostv1.SetServerReachability{
				Changes: []*roostv1.ReachabilityChange{{Name: uuidA}}}}})
		}, "workers", codes.FailedPrecondition, "Unreachable"},
		{"decommissioned", func(h *harness) { h.mustApply(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_DECOMMISSION)) }, "", codes.FailedPrecondition, "Decommissioned"},
		{"pending approval", func(h *harness) {
			h.mustApply(putEnrollTokenCmd("zzzzzz", "zzzzzz.0123456789abcdef", func(s *roostv1.EnrollmentTokenSpec) { s.RequireApproval = true }))
			h.mustApply(enrollCmd("zzzzzz.0123456789abcdef", uuidB, []string{"52:54:00:00:00:09"}, inventory(16, 64)))
			h.mustApply(statusCmd(&roostv1.UpdateServerStatus{Name: uuidB, Connected: true}))
		}, "workers", codes.FailedPrecondition, "PendingApproval"},
		{"enrolling", func(h *harness) {
			h.mustApply(enrollCmd(tokSecret, uuidB, []string{"52:54:00:00:00:09"}, inventory(16, 64)))
		}, "workers", codes.FailedPrecondition, "Enrolling, not Available"},
		{"selector", func(h *harness) {
			h.mustApply(enrollCmd(tokSecret, uuidB, []string{"52:54:00:00:00:09"}, inventory(8, 64)))
			h.mustApply(statusCmd(&roostv1.UpdateServerStatus{Name: uuidB, Connected: true}))
		}, "workers", codes.FailedPrecondition, "does not match the server selector of MachineClass standard"},
		{"replicas pool", func(h *harness) {
			h.mustApply(h.objects(poolObj("auto", "prod")))
		}, "auto", codes.FailedPrecondition, "has replicas: 3"},
		{"pre-assigned elsewhere", func(h *harness) {
			h.mustApply(h.objects(poolObj("other", "prod", func(s *roostv1.PoolSpec) { s.Replicas = nil })))
			h.mustApply(putEnrollTokenCmd("yyyyyy", "yyyyyy.0123456789abcdef", func(s *roostv1.EnrollmentTokenSpec) { s.Pool = "other" }))
			h.mustApply(enrollCmd("yyyyyy.0123456789abcdef", uuidB, []string{"52:54:00:00:00:09"}, inventory(16, 64)))
			h.mustApply(statusCmd(&roostv1.UpdateServerStatus{Name: uuidB, Connected: true}))
		}, "workers", codes.FailedPrecondition, "pre-assigned to Pool other"},
		{"unknown pool", func(h *harness) {}, "nope", codes.NotFound, "nope"},
		{"unknown server", func(h *harness) {}, "workers", codes.NotFound, "gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			explicitPool(h)
			availableServer(h, uuidA, "52:54:00:00:00:01")
			tc.setup(h)
			server := uuidA
			if _, err := h.f.Get("Server", uuidB); err == nil {
				server = uuidB
			}
			if tc.name == "unknown server" {
				server = "gone"
			}
			before := snapshotBytes(t, h.f)
			e := wantCode(t, h.apply(createMachinesCmd(false, newMachine("m1", server, tc.pool))).Err, tc.code)
			if !strings.Contains(e.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", e.Error(), tc.want)
			}
			// Nothing changed but the index.
			h2 := restoreNew(t, before)
			if a, b := readTables(t, h2), readTables(t, h.f); !equalMsgs(a.objects["Server"], b.objects["Server"]) || len(b.objects["Machine"]) != 0 {
				t.Error("a refused claim changed the state")
			}
		})
	}
}

func TestClaimAllOrNothing(t *testing.T) {
	h := newHarness(t, Options{})
	explicitPool(h)
	availableServer(h, uuidA, "52:54:00:00:00:01")
	availableServer(h, uuidB, "52:54:00:00:00:02")
	h.mustApply(modifyCmd(uuidB, roostv1.ServerAction_SERVER_ACTION_CORDON))
	e := wantCode(t, h.apply(createMachinesCmd(false, newMachine("m1", uuidA, "workers"), newMachine("m2", uuidB, "workers"))).Err, codes.FailedPrecondition)
	if len(e.Violations) != 1 || e.Violations[0].Field != "machines[1].server" {
		t.Errorf("violations %v", e.Violations)
	}
	if getServer(t, h.f, uuidA).GetStatus().GetState() != ServerAvailable {
		t.Error("first server claimed by a refused command")
	}
	wantCode(t, h.apply(createMachinesCmd(false, newMachine("m1", uuidA, "workers"), newMachine("m1", uuidB, "workers"))).Err, codes.InvalidArgument)
	wantCode(t, h.apply(createMachinesCmd(false, newMachine("Bad_Name", uuidA, "workers"))).Err, codes.InvalidArgument)
}

func TestStandaloneMachine(t *testing.T) {
	h := newHarness(t, Options{})
	availableServer(h, uuidA, "52:54:00:00:00:01")
	h.mustApply(createMachinesCmd(false, newMachine("edge-1", uuidA, "")))
	m := getMachine(t, h.f, "edge-1")
	if !Standalone(m) || m.GetStatus().GetPhase() != PhaseScheduled || m.GetStatus().GetCluster() != "" {
		t.Fatalf("machine %v", m)
	}
	if s := getServer(t, h.f, uuidA); s.GetStatus().GetState() != ServerClaimed || s.GetSpec().GetPool() != "" {
		t.Fatalf("server %v", s)
	}
	// A claimed Server cannot be decommissioned; deleting the Machine
	// (generic delete) releases it.
	wantCode(t, h.apply(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_DECOMMISSION)).Err, codes.FailedPrecondition)
	res := h.mustApply(deleteCmd("Machine", "edge-1"))
	if len(res.Results) != 1 || res.Results[0].GetAction() != ActionDeleted {
		t.Fatalf("results %v", res.Results)
	}
	if s := getServer(t, h.f, uuidA); s.GetStatus().GetState() != ServerAvailable {
		t.Fatalf("server %v", s)
	}
	wantCode(t, h.apply(deleteCmd("Machine", "edge-1")).Err, codes.NotFound)
}

func TestMachinePhase(t *testing.T) {
	cond := func(typ, st string) *roostv1.Condition { return &roostv1.Condition{Type: typ, Status: st} }
	for _, tc := range []struct {
		m    *roostv1.Machine
		want string
	}{
		{&roostv1.Machine{}, PhaseRequested},
		{&roostv1.Machine{Spec: &roostv1.MachineSpec{Server: "s"}}, PhaseScheduled},
		{&roostv1.Machine{Spec: &roostv1.MachineSpec{Server: "s"}, Status: &roostv1.MachineStatus{Conditions: []*roostv1.Condition{
			cond(MachineProvisioned, "True")}}}, PhaseProvisioned},
		{&roostv1.Machine{Spec: &roostv1.MachineSpec{Server: "s"}, Status: &roostv1.MachineStatus{Conditions: []*roostv1.Condition{
			cond(MachineProvisioned, "True"), cond(MachineJoined, "True")}}}, PhaseJoined},
		{&roostv1.Machine{Spec: &roostv1.MachineSpec{Server: "s"}, Status: &roostv1.MachineStatus{Conditions: []*roostv1.Condition{
			cond(MachineProvisioned, "True"), cond(MachineJoined, "True"), cond(MachineReady, "True")}}}, PhaseReady},
		// Milestones count in order only.
		{&roostv1.Machine{Spec: &roostv1.MachineSpec{Server: "s"}, Status: &roostv1.MachineStatus{Conditions: []*roostv1.Condition{
			cond(MachineJoined, "True"), cond(MachineReady, "True")}}}, PhaseScheduled},
		{&roostv1.Machine{Spec: &roostv1.MachineSpec{Server: "s"}, Status: &roostv1.MachineStatus{Phase: PhaseDestroyed}}, PhaseDestroyed},
	} {
		if got := MachinePhase(tc.m); got != tc.want {
			t.Errorf("MachinePhase(%v) = %s, want %s", tc.m, got, tc.want)
		}
	}
}

// TestMachineDeterminism replays a random mix of claims, releases and
// Server changes over a small fleet on two FSMs (one watched, with a tiny
// ring) and checks that results, snapshots and a restored copy agree, and
// that the claim invariants hold throughout.
func TestMachineDeterminism(t *testing.T) {
	servers := []string{uuidA, uuidB, "4c4c4544-0042-3510-8052-b4c04f4d4e33", "gone"}
	for seed := int64(1); seed <= 10; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			gen := newHarness(t, Options{})
			var logs [][]byte
			add := func(c *roostv1.Command) {
				c.Time = timestamppb.New(timeAt(uint64(len(logs) + 1)))
				logs = append(logs, mustMarshal(t, c))
			}
			add(putEnrollTokenCmd("abcdef", tokSecret))
			for i, s := range servers[:3] {
				add(enrollCmd(tokSecret, s, []string{fmt.Sprintf("52:54:00:00:00:%02d", i)}, inventory(int32(8<<(i%2)), 64)))
				add(statusCmd(&roostv1.UpdateServerStatus{Name: s, Connected: true}))
			}
			add(gen.objects(append(baseObjects(), poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.Replicas = nil }),
				poolObj("auto", "prod", func(s *roostv1.PoolSpec) { s.MachineClass = "" }))...))
			r := rand.New(rand.NewSource(seed))
			pools := []string{"", "workers", "auto"}
			for i := 0; i < 200; i++ {
				srv := servers[r.Intn(len(servers))]
				switch r.Intn(7) {
				case 0, 1, 2:
					add(createMachinesCmd(r.Intn(2) == 0, &roostv1.NewMachine{Name: fmt.Sprint("m", r.Intn(4)),
						Uid: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Server: srv, Pool: pools[r.Intn(len(pools))]}))
				case 3:
					add(deleteMachinesCmd(pools[r.Intn(len(pools))], nil, []string{srv}))
				case 4:
					add(deleteCmd("Machine", fmt.Sprint("m", r.Intn(4))))
				case 5:
					add(modifyCmd(srv, []roostv1.ServerAction{roostv1.ServerAction_SERVER_ACTION_CORDON, roostv1.ServerAction_SERVER_ACTION_UNCORDON}[r.Intn(2)]))
				default:
					add(&roostv1.Command{Command: &roostv1.Command_SetServerReachability{SetServerReachability: &roostv1.SetServerReachability{
						Changes: []*roostv1.ReachabilityChange{{Name: srv, Reachable: r.Intn(3) > 0}}}}})
				}
			}
			a, b := newHarness(t, Options{}), newHarness(t, Options{WatchRing: 3, WatchBuffer: 1})
			sub, _ := b.f.Subscribe("", 0)
			defer sub.Close()
			created, released := 0, 0
			for i, data := range logs {
				ra, rb := a.applyRaw(data), b.applyRaw(data)
				if !equalMsgs(ra.Results, rb.Results) || fmt.Sprint(ra.Err) != fmt.Sprint(rb.Err) {
					t.Fatalf("log %d: results differ: %v %v / %v %v", i+1, ra.Results, ra.Err, rb.Results, rb.Err)
				}
				for _, res := range ra.Results {
					switch {
					case res.GetKind() == "Machine" && res.GetAction() == ActionCreated:
						created++
					case res.GetKind() == "Machine" && res.GetAction() == ActionDeleted:
						released++
					}
				}
				checkClaimInvariants(t, a.f)
			}
			if created == 0 || released == 0 {
				t.Errorf("weak random sequence: %d claims, %d releases", created, released)
			}
			sa := snapshotBytes(t, a.f)
			if !bytes.Equal(sa, snapshotBytes(t, b.f)) {
				t.Fatal("snapshots differ")
			}
			if !bytes.Equal(snapshotBytes(t, restoreNew(t, sa)), sa) {
				t.Fatal("snapshot bytes differ after restore")
			}
		})
	}
}

// checkClaimInvariants: every Machine holds a Claimed Server whose
// spec.pool is the Machine's pool, no Server is held twice, every Claimed
// Server is held, and each Pool counts its Machines.
func checkClaimInvariants(t *testing.T, f *FSM) {
	t.Helper()
	ms, _, _ := f.List("Machine", "")
	held := map[string]string{}
	perPool := map[string]int32{}
	for _, o := range ms {
		m := o.GetMachine()
		if prev, dup := held[m.GetSpec().GetServer()]; dup {
			t.Fatalf("Server %s held by %s and %s", m.GetSpec().GetServer(), prev, m.GetMetadata().GetName())
		}
		held[m.GetSpec().GetServer()] = m.GetMetadata().GetName()
		perPool[m.GetSpec().GetPool()]++
		s := getServer(t, f, m.GetSpec().GetServer())
		if s.GetStatus().GetState() != ServerClaimed || s.GetSpec().GetPool() != m.GetSpec().GetPool() {
			t.Fatalf("Machine %v holds Server %v", m, s)
		}
	}
	ss, _, _ := f.List("Server", "")
	for _, o := range ss {
		s := o.GetServer()
		if _, ok := held[s.GetMetadata().GetName()]; s.GetStatus().GetState() == ServerClaimed && !ok {
			t.Fatalf("Server %s Claimed by no Machine", s.GetMetadata().GetName())
		}
	}
	ps, _, _ := f.List("Pool", "")
	for _, o := range ps {
		if p := o.GetPool(); p.GetStatus().GetMachines() != perPool[p.GetMetadata().GetName()] {
			t.Fatalf("Pool %s counts %d Machines, has %d", p.GetMetadata().GetName(), p.GetStatus().GetMachines(), perPool[p.GetMetadata().GetName()])
		}
	}
}

// A standalone Machine may name its MachineClass and NetworkProfile; a pool
// Machine may not, and both must exist.
func TestStandaloneMachineClassAndProfile(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(machineClassObj("edge"), networkProfileObj("bonded")))
	availableServer(h, uuidA, "52:54:00:00:00:01")
	nm := newMachine("edge-1", uuidA, "")
	nm.MachineClass = "missing"
	wantCode(t, h.apply(createMachinesCmd(false, nm)).Err, codes.NotFound)
	nm.MachineClass, nm.NetworkProfile = "edge", "bonded"
	h.mustApply(createMachinesCmd(false, nm))
	m := getMachine(t, h.f, "edge-1")
	if m.GetSpec().GetMachineClass() != "edge" || m.GetSpec().GetNetworkProfile() != "bonded" {
		t.Errorf("spec = %v", m.GetSpec())
	}
	wantCode(t, h.apply(deleteCmd("MachineClass", "edge")).Err, codes.FailedPrecondition)
}

// TestClaimRefusesLegacyBIOS: from RulesBMC on, a Server whose firmware
// is legacy BIOS is refused at claim, before any Machine exists, with the
// reason and the fix; under older rules the claim went through.
func TestClaimRefusesLegacyBIOS(t *testing.T) {
	h := newHarness(t, Options{})
	explicitPool(h)
	h.mustApply(putEnrollTokenCmd("abcdef", tokSecret))
	inv := inventory(16, 64)
	inv.Firmware = "BIOS"
	h.mustApply(enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:01"}, inv))
	h.mustApply(statusCmd(&roostv1.UpdateServerStatus{Name: uuidA, Connected: true}))
	s := getServer(t, h.f, uuidA)
	if got := ClaimBlocker(s, "workers", ""); got != "legacy BIOS" {
		t.Errorf("ClaimBlocker = %q, want legacy BIOS", got)
	}
	e := wantCode(t, h.apply(withRules(RulesBMC, createMachinesCmd(false, newMachine("m1", uuidA, "workers")))).Err, codes.FailedPrecondition)
	if !strings.Contains(e.Error(), "legacy BIOS") || !strings.Contains(e.Error(), "UEFI boot mode") {
		t.Errorf("refusal %q does not say why and what to do", e.Error())
	}
	if objs, _, _ := h.f.List("Machine", ""); len(objs) != 0 {
		t.Fatalf("a refused claim made %d Machines", len(objs))
	}
	h.mustApply(withRules(RulesBMC-1, createMachinesCmd(false, newMachine("m1", uuidA, "workers"))))
}
