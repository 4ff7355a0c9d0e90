package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub/ca"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// TestTokenAndServerCommands runs the token and server commands against a
// real hub, with one server enrolled through AgentService.
func TestTokenAndServerCommands(t *testing.T) {
	_, config, run := realHubCLI(t)

	r := run("token", "create", "--uses", "2", "--label", "rack=r12", "--require-approval")
	if r.code != 0 || !strings.Contains(r.out, "secret, shown once; 2 uses") || !strings.Contains(r.out, "label rack=r12, held for approval") {
		t.Fatalf("token create: exit %d\n%s%s", r.code, r.out, r.err)
	}
	secret := strings.TrimSpace(strings.Split(r.out, "\n")[1])
	name := secret[:6]
	r = run("token", "create", "-o", "json", "--ttl", "1h")
	var tj struct{ Token, Name, ExpiresAt string }
	if r.code != 0 || json.Unmarshal([]byte(r.out), &tj) != nil || len(tj.Token) != 23 || tj.Name != tj.Token[:6] || tj.ExpiresAt == "" {
		t.Fatalf("token create -o json: exit %d %q %s", r.code, r.out, r.err)
	}
	for _, bad := range [][]string{{"--uses", "-1"}, {"--label", "nokey"}, {"--ttl", "-1s"}} {
		if r := run(append([]string{"token", "create"}, bad...)...); r.code != ExitUsage {
			t.Errorf("token create %v: exit %d", bad, r.code)
		}
	}
	if r := run("token", "create", "--pool", "nope"); r.code != ExitFailed || !strings.Contains(r.err, `Pool "nope" does not exist`) {
		t.Errorf("token create --pool nope: exit %d %s", r.code, r.err)
	}

	r = run("token", "list")
	if r.code != 0 || !strings.HasPrefix(r.out, "NAME ") || !strings.Contains(r.out, name) || strings.Contains(r.out, secret[7:]) {
		t.Fatalf("token list: exit %d\n%s%s", r.code, r.out, r.err)
	}
	for _, col := range []string{"EXPIRES", "USES", "POOL", "STATE", "Active", "0/2"} {
		if !strings.Contains(r.out, col) {
			t.Errorf("token list lacks %q:\n%s", col, r.out)
		}
	}

	// Enroll a server as an agent would.
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
	resp, err := roostv1.NewAgentServiceClient(conn).Enroll(context.Background(), &roostv1.EnrollRequest{Token: secret, CsrPem: csr,
		Identity:  &roostv1.ServerIdentity{SystemUuid: "4c4c4544-0042-3510-8052-b4c04f4d4e31", PermanentMacs: []string{"52:54:00:00:00:01"}},
		Inventory: &roostv1.Inventory{Cpu: &roostv1.CPUInfo{Cores: 8, Threads: 16}, MemoryBytes: 64 << 30, Arch: "amd64", Firmware: "UEFI"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := resp.GetServerName()

	r = run("get", "servers")
	if r.code != 0 {
		t.Fatalf("get servers: %d %s", r.code, r.err)
	}
	header := strings.Fields(strings.Split(r.out, "\n")[0])
	if strings.Join(header, " ") != "NAME UUID STATE POOL CPUS MEMORY IMAGE REVISION LAST-SEEN AGE" {
		t.Errorf("get servers header: %v", header)
	}
	if !strings.Contains(r.out, srv) || !strings.Contains(r.out, "Enrolling") || !strings.Contains(r.out, "16 ") || !strings.Contains(r.out, "64Gi") {
		t.Errorf("get servers:\n%s", r.out)
	}
	if r := run("get", "servers", "-l", "roost.io/cpus=16,rack=r12", "-o", "name"); strings.TrimSpace(r.out) != "server/"+srv {
		t.Errorf("select by derived and token labels: %q %s", r.out, r.err)
	}

	for _, args := range [][]string{
		{"server", "label", srv, "zone=a", "gpu=a100"},
		{"server", "label", srv, "gpu-"},
		{"server", "cordon", srv},
		{"server", "approve", srv},
	} {
		if r := run(args...); r.code != 0 {
			t.Fatalf("%v: exit %d %s", args, r.code, r.err)
		}
	}
	if r := run("server", "label", srv, "roost.io/cpus=1"); r.code != ExitUsage {
		t.Errorf("setting a derived label: exit %d %s", r.code, r.err)
	}
	r = run("describe", "server", srv)
	for _, want := range []string{"zone=a", "Unschedulable:", "Inventory:", "64Gi (68719476736 bytes)", "Approved"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("describe server lacks %q:\n%s", want, r.out)
		}
	}
	if strings.Contains(r.out, "gpu=") {
		t.Errorf("label not removed:\n%s", r.out)
	}
	r = run("get", "servers")
	if !strings.Contains(r.out, "SchedulingDisabled") {
		t.Errorf("cordoned server:\n%s", r.out)
	}

	if r := run("token", "revoke", name); r.code != 0 {
		t.Fatalf("token revoke: %d %s", r.code, r.err)
	}
	if r := run("token", "list"); !strings.Contains(r.out, "Revoked") || !strings.Contains(r.out, "1/2") {
		t.Errorf("token list after revoke:\n%s", r.out)
	}
	if r := run("token", "revoke", "zzzzzz"); r.code != ExitFailed {
		t.Errorf("revoke unknown: exit %d", r.code)
	}
	if r := run("server", "decommission", srv, "--reason", "failed PSU"); r.code != 0 {
		t.Fatalf("decommission: %d %s", r.code, r.err)
	}
	if r := run("get", "servers"); !strings.Contains(r.out, "Decommissioned") {
		t.Errorf("after decommission:\n%s", r.out)
	}
	if r := run("server", "approve", "nope"); r.code != ExitFailed {
		t.Errorf("approve unknown: exit %d", r.code)
	}
}
