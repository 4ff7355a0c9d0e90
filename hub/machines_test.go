package hub_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// propose applies cmd through the hub's Raft log, as the API does.
func (f *agentFixture) propose(cmd *roostv1.Command) {
	f.t.Helper()
	cmd.Time = timestamppb.Now()
	data, err := proto.Marshal(cmd)
	if err != nil {
		f.t.Fatal(err)
	}
	res, _, err := f.h.Node().Apply(context.Background(), data)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := res.(*state.ApplyResult).Err; err != nil {
		f.t.Fatal(err)
	}
}

// availableServer creates an Available Server through the commands
// enrollment and the agent's first connection use (no agent runs).
func (f *agentFixture) availableServer(token, id, mac string) {
	f.t.Helper()
	sum := sha256.Sum256([]byte(token))
	f.propose(&roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{
		TokenName: strings.SplitN(token, ".", 2)[0], SecretSha256: hex.EncodeToString(sum[:]), Uid: uuid.NewString(), AgentVersion: "v0.1.0",
		Identity:  &roostv1.ServerIdentity{SystemUuid: id, PermanentMacs: []string{mac}},
		Inventory: &roostv1.Inventory{Cpu: &roostv1.CPUInfo{Cores: 8, Threads: 16}, MemoryBytes: 64 << 30, Arch: "amd64", Firmware: "UEFI"},
	}}})
	f.propose(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{Name: id, Connected: true}}})
}

// cleaned records the agent's successful result of Server name's
// current cleaning (no agent runs), as the agent stream proposes it.
func (f *agentFixture) cleaned(name string) {
	f.t.Helper()
	idx := f.server(name).GetStatus().GetCleaning().GetIndex()
	f.propose(&roostv1.Command{RulesVersion: state.RulesVersion, Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{
		Name: name, CleaningResult: &roostv1.CleaningResult{Index: idx, Succeeded: true}}}})
}

func (f *agentFixture) server(name string) *roostv1.Server {
	f.t.Helper()
	o, err := f.h.FSM().Get("Server", name)
	if err != nil {
		f.t.Fatal(err)
	}
	return o.GetServer()
}

func wantStatus(t *testing.T, err error, code codes.Code, substr string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), substr) {
		t.Fatalf("error %v, want %s containing %q", err, code, substr)
	}
}

func TestAssignUnassignAndStandalone(t *testing.T) {
	f := newAgentFixture(t)
	ctx := context.Background()
	srvA, srvB, srvC := "4c4c4544-0042-3510-8052-00000000000a", "4c4c4544-0042-3510-8052-00000000000b", "4c4c4544-0042-3510-8052-00000000000c"
	tok := f.token(&roostv1.CreateEnrollmentTokenRequest{})
	f.availableServer(tok, srvA, "52:54:00:00:00:0a")
	f.availableServer(tok, srvB, "52:54:00:00:00:0b")
	f.availableServer(tok, srvC, "52:54:00:00:00:0c")
	if _, err := f.admin.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{
		cluster("prod", "v1.34.4"),
		resource.Wrap(&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "big"}, Spec: &roostv1.MachineClassSpec{ServerSelector: []string{"roost.io/cpus>=16"}}}),
		resource.Wrap(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "workers"}, Spec: &roostv1.PoolSpec{Cluster: "prod", MachineClass: "big"}}),
	}}); err != nil {
		t.Fatal(err)
	}

	resp, err := f.admin.AssignServers(ctx, &roostv1.AssignServersRequest{Pool: "workers", Servers: []string{srvA}})
	if err != nil {
		t.Fatal(err)
	}
	m := resp.GetMachines()[0]
	if !strings.HasPrefix(m.GetMetadata().GetName(), "workers-") || m.GetStatus().GetPhase() != state.PhaseScheduled || m.GetStatus().GetCluster() != "prod" {
		t.Fatalf("machine %v", m)
	}
	if s := f.server(srvA); s.GetStatus().GetState() != state.ServerClaimed || s.GetSpec().GetPool() != "workers" {
		t.Fatalf("server %v", s.GetStatus())
	}

	// Refusals.
	_, err = f.admin.AssignServers(ctx, &roostv1.AssignServersRequest{Pool: "workers", Servers: []string{srvA}})
	wantStatus(t, err, codes.FailedPrecondition, "already claimed by Machine "+m.GetMetadata().GetName())
	_, err = f.admin.AssignServers(ctx, &roostv1.AssignServersRequest{Pool: "workers", Servers: []string{srvB}, Hostname: m.GetMetadata().GetName()})
	wantStatus(t, err, codes.AlreadyExists, fmt.Sprintf("spec.hostname: %q is already used by Machine %s in pool workers", m.GetMetadata().GetName(), m.GetMetadata().GetName()))
	_, err = f.admin.AssignServers(ctx, &roostv1.AssignServersRequest{Pool: "workers", Servers: []string{"nope"}})
	wantStatus(t, err, codes.NotFound, "nope")
	_, err = f.admin.AssignServers(ctx, &roostv1.AssignServersRequest{Pool: "ghost", Servers: []string{srvB}})
	wantStatus(t, err, codes.NotFound, "ghost")
	_, err = f.admin.AssignServers(ctx, &roostv1.AssignServersRequest{Pool: "workers"})
	wantStatus(t, err, codes.InvalidArgument, "")
	if _, err := f.admin.UpdateServer(ctx, &roostv1.UpdateServerRequest{Name: srvC, Action: roostv1.ServerAction_SERVER_ACTION_CORDON}); err != nil {
		t.Fatal(err)
	}
	_, err = f.admin.AssignServers(ctx, &roostv1.AssignServersRequest{Pool: "workers", Servers: []string{srvB, srvC}})
	wantStatus(t, err, codes.FailedPrecondition, "cordoned")
	if s := f.server(srvB); s.GetStatus().GetState() != state.ServerAvailable {
		t.Fatal("a refused assignment claimed a server")
	}
	_, err = f.admin.Delete(ctx, &roostv1.DeleteRequest{Kind: "Pool", Name: "workers"})
	wantStatus(t, err, codes.FailedPrecondition, "Machine")

	// Standalone.
	cm, err := f.admin.CreateMachine(ctx, &roostv1.CreateMachineRequest{Server: srvB, Name: "edge-1"})
	if err != nil {
		t.Fatal(err)
	}
	if cm.GetMachine().GetSpec().GetPool() != "" || cm.GetMachine().GetStatus().GetPhase() != state.PhaseScheduled {
		t.Fatalf("standalone %v", cm.GetMachine())
	}
	_, err = f.admin.UnassignServers(ctx, &roostv1.UnassignServersRequest{Pool: "workers", Servers: []string{srvB}})
	wantStatus(t, err, codes.FailedPrecondition, "standalone")
	if _, err := f.admin.Delete(ctx, &roostv1.DeleteRequest{Kind: "machine", Name: "edge-1"}); err != nil {
		t.Fatal(err)
	}
	// Released: Cleaning until its agent reports the wipe.
	if s := f.server(srvB); s.GetStatus().GetState() != state.ServerCleaning {
		t.Fatalf("server %v", s.GetStatus())
	}
	f.cleaned(srvB)
	if s := f.server(srvB); s.GetStatus().GetState() != state.ServerAvailable {
		t.Fatalf("server %v", s.GetStatus())
	}

	un, err := f.admin.UnassignServers(ctx, &roostv1.UnassignServersRequest{Pool: "workers", Servers: []string{srvA}})
	if err != nil {
		t.Fatal(err)
	}
	if len(un.GetMachines()) != 1 || un.GetMachines()[0] != m.GetMetadata().GetName() {
		t.Fatalf("released %v", un.GetMachines())
	}
	if s := f.server(srvA); s.GetStatus().GetState() != state.ServerCleaning || s.GetSpec().GetPool() != "" {
		t.Fatalf("server %v", s)
	}
	f.cleaned(srvA)

	// A Pool with replicas claims by itself (the leader's pool
	// controller), in name order, and refuses manual assignment.
	if _, err := f.admin.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{
		resource.Wrap(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "auto"}, Spec: &roostv1.PoolSpec{Cluster: "prod", MachineClass: "big", Replicas: proto.Int32(1)}}),
	}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pool controller to claim a server", func() bool { return f.server(srvA).GetSpec().GetPool() == "auto" })
	_, err = f.admin.AssignServers(ctx, &roostv1.AssignServersRequest{Pool: "auto", Servers: []string{srvB}})
	wantStatus(t, err, codes.FailedPrecondition, "replicas")
	if _, err := f.admin.Delete(ctx, &roostv1.DeleteRequest{Kind: "Pool", Name: "workers"}); err != nil {
		t.Fatal(err)
	}
}
