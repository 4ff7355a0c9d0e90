package cli

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// availableServerCLI enrolls a server through AgentService and records its
// first connection through the FSM command the agent stream uses.
func availableServerCLI(t *testing.T, h *hub.Hub, config, token, uuid, mac string) string {
	t.Helper()
	cfg, err := client.LoadConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := client.Dial(context.Background(), &client.Config{Hubs: cfg.Hubs, CertificateAuthority: cfg.CertificateAuthority}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	csr, _, _ := ca.NewCSR("x")
	resp, err := roostv1.NewAgentServiceClient(conn).Enroll(context.Background(), &roostv1.EnrollRequest{Token: token, CsrPem: csr,
		Identity:  &roostv1.ServerIdentity{SystemUuid: uuid, PermanentMacs: []string{mac}},
		Inventory: &roostv1.Inventory{Cpu: &roostv1.CPUInfo{Cores: 8, Threads: 16}, MemoryBytes: 64 << 30, Arch: "amd64", Firmware: "UEFI"}})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := proto.Marshal(&roostv1.Command{Time: timestamppb.Now(), Command: &roostv1.Command_UpdateServerStatus{
		UpdateServerStatus: &roostv1.UpdateServerStatus{Name: resp.GetServerName(), Connected: true}}})
	res, _, err := h.Node().Apply(context.Background(), data)
	if err != nil || res.(*state.ApplyResult).Err != nil {
		t.Fatalf("connect %s: %v %v", uuid, err, res)
	}
	return resp.GetServerName()
}

// cleanedCLI records the result of Server name's current cleaning as its
// agent would report it (the tests run no agent).
func cleanedCLI(t *testing.T, h *hub.Hub, name string, ok bool, why string) {
	t.Helper()
	o, err := h.FSM().Get("Server", name)
	if err != nil {
		t.Fatal(err)
	}
	idx := o.GetServer().GetStatus().GetCleaning().GetIndex()
	data, _ := proto.Marshal(&roostv1.Command{Time: timestamppb.Now(), RulesVersion: state.RulesVersion, Command: &roostv1.Command_UpdateServerStatus{
		UpdateServerStatus: &roostv1.UpdateServerStatus{Name: name, CleaningResult: &roostv1.CleaningResult{Index: idx, Succeeded: ok, Error: why}}}})
	res, _, err := h.Node().Apply(context.Background(), data)
	if err != nil || res.(*state.ApplyResult).Err != nil {
		t.Fatalf("cleaning result of %s: %v %v", name, err, res)
	}
}

// TestPoolAndMachineCommands assigns, describes and releases Machines
// against a real hub.
func TestPoolAndMachineCommands(t *testing.T) {
	h, config, run := realHubCLI(t)
	r := run("token", "create")
	if r.code != 0 {
		t.Fatalf("token create: %d %s", r.code, r.err)
	}
	token := strings.TrimSpace(strings.Split(r.out, "\n")[1])
	srvA := availableServerCLI(t, h, config, token, "4c4c4544-0042-3510-8052-00000000000a", "52:54:00:00:00:0a")
	srvB := availableServerCLI(t, h, config, token, "4c4c4544-0042-3510-8052-00000000000b", "52:54:00:00:00:0b")

	manifest := writeFile(t, t.TempDir(), "pool.yaml", `apiVersion: roost.io/v1
kind: Cluster
metadata: {name: prod}
spec: {apiEndpoint: "https://10.0.0.1:6443", kubernetesVersion: v1.34.4}
---
apiVersion: roost.io/v1
kind: Pool
metadata: {name: workers}
spec: {cluster: prod}
`)
	if r := run("apply", "-f", manifest); r.code != 0 {
		t.Fatalf("apply: %d %s", r.code, r.err)
	}

	r = run("pool", "assign", "workers", "server/"+srvA)
	if r.code != 0 || !strings.HasPrefix(r.out, "machine/workers-") || !strings.Contains(r.out, "created (server "+srvA+", pool workers)") {
		t.Fatalf("pool assign: exit %d\n%s%s", r.code, r.out, r.err)
	}
	machine := strings.TrimPrefix(strings.Fields(r.out)[0], "machine/")
	if r := run("pool", "assign", "workers", srvA); r.code != ExitFailed || !strings.Contains(r.err, "already claimed by Machine "+machine) {
		t.Errorf("assign twice: exit %d %s", r.code, r.err)
	}
	want := `Error from hub: spec.hostname: "` + machine + `" is already used by Machine ` + machine + ` in pool workers`
	if r := run("pool", "assign", "workers", srvB, "--hostname", machine); r.code != ExitFailed || !strings.Contains(r.err, want) {
		t.Errorf("assign a host name the pool uses: exit %d %s", r.code, r.err)
	}
	if r := run("pool", "assign", "workers"); r.code != ExitUsage {
		t.Errorf("assign without servers: exit %d", r.code)
	}
	if r := run("server", "cordon", srvB); r.code != 0 {
		t.Fatal(r.err)
	}
	if r := run("pool", "assign", "workers", srvB); r.code != ExitFailed || !strings.Contains(r.err, "cordoned") {
		t.Errorf("assign cordoned: exit %d %s", r.code, r.err)
	}
	if r := run("server", "uncordon", srvB); r.code != 0 {
		t.Fatal(r.err)
	}

	r = run("get", "machines")
	if got := strings.Join(strings.Fields(strings.Split(r.out, "\n")[0]), " "); got != "NAME SERVER POOL PHASE REVISION AGE" {
		t.Errorf("get machines header %q", got)
	}
	if !strings.Contains(r.out, machine) || !strings.Contains(r.out, "Scheduled") {
		t.Errorf("get machines:\n%s", r.out)
	}
	r = run("get", "machines", "-o", "wide")
	if !strings.Contains(r.out, "CLUSTER") || !strings.Contains(r.out, "REASON") || !strings.Contains(r.out, "prod") || !strings.Contains(r.out, "WaitingForRevision") {
		t.Errorf("get machines -o wide:\n%s", r.out)
	}
	r = run("describe", "machine", machine)
	for _, want := range []string{"Conditions:", "ServerClaimed", "WaitingForRevision", "Scheduled"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("describe machine lacks %q:\n%s", want, r.out)
		}
	}
	// the scheduler's message, or the revisions controller's once it has
	// looked at the Machine
	if !strings.Contains(r.out, "the Revision pipeline has not rendered a Revision yet") && !strings.Contains(r.out, "no ImageRelease yet (roostctl image push BUNDLE_DIR)") {
		t.Errorf("describe machine says neither why it waits for a Revision:\n%s", r.out)
	}
	if r := run("delete", "pool", "workers"); r.code != ExitFailed || !strings.Contains(r.err, "Machine") {
		t.Errorf("delete pool with machines: exit %d %s", r.code, r.err)
	}

	// Standalone.
	if r := run("machine", "create", "edge-1"); r.code != ExitUsage {
		t.Errorf("machine create without --server: exit %d %s", r.code, r.err)
	}
	r = run("machine", "create", "--server", srvB, "edge-1")
	if r.code != 0 || strings.TrimSpace(r.out) != "machine/edge-1 created (server "+srvB+", standalone)" {
		t.Fatalf("machine create: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if r := run("get", "servers"); strings.Count(r.out, "Claimed") != 2 {
		t.Errorf("servers not claimed:\n%s", r.out)
	}

	if r := run("pool", "unassign", "workers", srvB); r.code != ExitFailed || !strings.Contains(r.err, "standalone") {
		t.Errorf("unassign a standalone machine's server: exit %d %s", r.code, r.err)
	}
	if r := run("pool", "unassign", "workers", srvA); r.code != 0 || strings.TrimSpace(r.out) != "machine/"+machine+" deleted" {
		t.Errorf("pool unassign: exit %d %s%s", r.code, r.out, r.err)
	}
	if r := run("machine", "delete", "edge-1", "nope"); r.code != ExitFailed || !strings.Contains(r.out, "machine/edge-1 deleted") || !strings.Contains(r.err, "nope") {
		t.Errorf("machine delete: exit %d %s%s", r.code, r.out, r.err)
	}
	// Released: cleaned by their agents before they are Available.
	if r := run("get", "servers"); strings.Count(r.out, "Cleaning") != 2 {
		t.Errorf("servers not released:\n%s", r.out)
	}
	cleanedCLI(t, h, srvA, true, "")
	cleanedCLI(t, h, srvB, true, "")
	if r := run("get", "servers"); strings.Count(r.out, "Available") != 2 {
		t.Errorf("servers not cleaned:\n%s", r.out)
	}
	if r := run("delete", "pool", "workers"); r.code != 0 {
		t.Errorf("delete pool: exit %d %s", r.code, r.err)
	}
}
