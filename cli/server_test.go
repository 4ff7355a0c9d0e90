package cli

import (
	"strings"
	"testing"
)

// TestServerNoOpsAndClaimedRefusal: a server command that changes nothing
// says so (exit 0), kubectl style, and decommissioning or denying a Claimed
// server names its Machine and the command that releases it. A released
// server is Cleaning, CleaningFailed on its agent's failure (shown by get
// and describe), cleaned again by 'server clean', and a decommission cleans
// it before it is Decommissioned.
func TestServerNoOpsAndClaimedRefusal(t *testing.T) {
	h, config, run := realHubCLI(t)
	r := run("token", "create")
	if r.code != 0 {
		t.Fatalf("token create: %d %s", r.code, r.err)
	}
	token := strings.TrimSpace(strings.Split(r.out, "\n")[1])
	srv := availableServerCLI(t, h, config, token, "4c4c4544-0042-3510-8052-00000000000a", "52:54:00:00:00:0a")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "cordon", srv}, "server/" + srv + " cordoned\n"},
		{[]string{"server", "cordon", srv}, "server/" + srv + " already cordoned\n"},
		{[]string{"server", "uncordon", srv}, "server/" + srv + " uncordoned\n"},
		{[]string{"server", "uncordon", srv}, "server/" + srv + " already uncordoned\n"},
		{[]string{"server", "label", srv, "zone=a"}, "server/" + srv + " labeled\n"},
		{[]string{"server", "label", srv, "zone=a", "gpu-"}, "server/" + srv + " not labeled: zone=a is set already, gpu is not set\n"},
		{[]string{"server", "label", srv, "zone-"}, "server/" + srv + " labeled\n"},
		// Its token did not require approval: nothing to approve.
		{[]string{"server", "approve", srv}, "server/" + srv + " unchanged: nothing to approve, its enrollment token did not require approval (Available)\n"},
	} {
		if r := run(tc.args...); r.code != 0 || r.out != tc.want {
			t.Errorf("%v: exit %d, out %q, want %q; err %s", tc.args, r.code, r.out, tc.want, r.err)
		}
	}

	manifest := writeFile(t, t.TempDir(), "pool.yaml", `apiVersion: roost.io/v1
kind: Pool
metadata: {name: workers}
spec: {}
`)
	if r := run("apply", "-f", manifest); r.code != 0 {
		t.Fatalf("apply: %d %s", r.code, r.err)
	}
	r = run("pool", "assign", "workers", srv)
	if r.code != 0 {
		t.Fatalf("pool assign: %d %s", r.code, r.err)
	}
	machine := strings.Fields(r.out)[0][len("machine/"):]
	if r := run("server", "approve", srv); r.code != 0 || !strings.Contains(r.out, "unchanged: nothing to approve") || !strings.Contains(r.out, "(Claimed)") {
		t.Errorf("approve a Claimed server: exit %d %q %s", r.code, r.out, r.err)
	}
	for _, verb := range []string{"decommission", "deny"} {
		r := run("server", verb, srv)
		want := "Server " + srv + " is claimed by Machine " + machine + " of Pool workers: release it with 'roostctl pool unassign workers " + srv + "'"
		if r.code != ExitFailed || !strings.Contains(r.err, want) || !strings.Contains(r.err, "then "+verb+" it") {
			t.Errorf("%s a claimed server: exit %d\n%s\nwant it to contain %q", verb, r.code, r.err, want)
		}
	}

	// Released, it is Cleaning; its agent's failure keeps it out.
	if r := run("server", "clean", srv); r.code != ExitFailed || !strings.Contains(r.err, "is Claimed; release its Machine first") {
		t.Errorf("clean a claimed server: exit %d %q %s", r.code, r.out, r.err)
	}
	if r := run("pool", "unassign", "workers", srv); r.code != 0 {
		t.Fatalf("pool unassign: %d %s", r.code, r.err)
	}
	if r := run("get", "servers"); !strings.Contains(r.out, " Cleaning ") {
		t.Errorf("get servers after unassign:\n%s", r.out)
	}
	cleanedCLI(t, h, srv, false, "wipe /dev/vdb: open /dev/vdb: read-only file system")
	if r := run("get", "servers", "-o", "wide"); !strings.Contains(r.out, "CleaningFailed") || !strings.Contains(r.out, "read-only file system") {
		t.Errorf("get servers after a failed cleaning:\n%s", r.out)
	}
	if r := run("describe", "server", srv); !strings.Contains(r.out, "Cleaned") || !strings.Contains(r.out, "CleaningFailed") {
		t.Errorf("describe server after a failed cleaning:\n%s", r.out)
	}
	// By hand: a new attempt, then the agent's success.
	if r := run("server", "clean", srv, "nope"); r.code != ExitFailed || r.out != "server/"+srv+" cleaning\n" || !strings.Contains(r.err, "nope") {
		t.Errorf("server clean: exit %d %q %s", r.code, r.out, r.err)
	}
	cleanedCLI(t, h, srv, true, "")
	if r := run("get", "servers"); !strings.Contains(r.out, " Available ") {
		t.Errorf("get servers after the cleaning:\n%s", r.out)
	}
	// Decommissioned once cleaned; a second time changes nothing.
	if r := run("server", "decommission", srv, "--reason", "failed PSU"); r.code != 0 || r.out != "server/"+srv+" decommissioned\n" {
		t.Errorf("decommission: exit %d %q %s", r.code, r.out, r.err)
	}
	if r := run("get", "servers"); !strings.Contains(r.out, " Cleaning ") {
		t.Errorf("get servers while cleaning for the decommission:\n%s", r.out)
	}
	cleanedCLI(t, h, srv, true, "")
	if r := run("server", "decommission", srv, "--reason", "failed PSU"); r.code != 0 || r.out != "server/"+srv+" unchanged: already Decommissioned (failed PSU)\n" {
		t.Errorf("second decommission: exit %d %q %s", r.code, r.out, r.err)
	}
	r = run("get", "servers")
	if !strings.Contains(r.out, "Decommissioned") || strings.Contains(r.out, "Unreachable") || strings.Contains(r.out, " now ") {
		t.Errorf("get servers after decommission:\n%s", r.out)
	}
	r = run("describe", "server", srv)
	if !strings.Contains(r.out, "Reachability:") || !strings.Contains(r.out, "- (not tracked while Decommissioned") {
		t.Errorf("describe server after decommission:\n%s", r.out)
	}
}
