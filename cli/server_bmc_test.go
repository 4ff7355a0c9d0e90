package cli

import (
	"net"
	"strings"
	"testing"
	"time"
)

// TestServerBMCVerbs runs register, power, boot and provision against a
// real hub whose BMC controller reaches no BMC (a closed port): the
// commands record their operations, the outcome is a clear condition,
// bad input is exit code 2 or 1 with the field, and the BMC credentials
// appear in no output.
func TestServerBMCVerbs(t *testing.T) {
	_, _, run := realHubCLI(t)
	dir := t.TempDir()
	const password = "s3cret-BMC-pass-4f2a"
	pwFile := writeFile(t, dir, "bmc-pass", password+"\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	addr := "redfish+http://" + closed + "/redfish/v1/Systems/1"

	// Usage errors: exit 2, nothing sent.
	for _, args := range [][]string{
		{"server", "register", "r12u7", "--bmc", addr, "--bmc-username", "roost"},
		{"server", "power", "r12u7", "reboot"},
		{"server", "boot", "r12u7", "--from", "cd"},
		{"server", "boot", "r12u7", "--from", "floppy", "--once"},
		{"server", "provision", "r12u7"},
	} {
		if r := run(args...); r.code != ExitUsage {
			t.Errorf("%v: exit %d, want %d; %s", args, r.code, ExitUsage, r.err)
		}
	}
	// The hub refuses a bad address with its field, without echoing it.
	bad := "redfish+https://roost:" + password + "@10.0.0.1/redfish/v1/Systems/1"
	if r := run("server", "register", "r12u7", "--bmc", bad, "--bmc-username", "roost", "--bmc-password-file", pwFile); r.code != ExitUsage ||
		!strings.Contains(r.err, "bmc.address") || strings.Contains(r.err, password) {
		t.Errorf("register with credentials in the address: exit %d\n%s", r.code, r.err)
	}
	// A server without a BMC has no power to switch.
	if r := run("server", "power", "nope", "on"); r.code != ExitFailed {
		t.Errorf("power of an unknown server: exit %d %s", r.code, r.err)
	}

	r := run("server", "register", "r12u7", "--bmc", addr, "--bmc-username", "roost", "--bmc-password-file", pwFile,
		"--mac", "52:54:00:AA:00:01", "--insecure-skip-verify", "-o", "json")
	if r.code != 0 || !strings.Contains(r.out, `"state": "Registered"`) || !strings.Contains(r.out, `"credentialsSet": true`) {
		t.Fatalf("register: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if !strings.Contains(r.err, "insecureSkipVerify") {
		t.Errorf("register with --insecure-skip-verify did not warn: %q", r.err)
	}
	if r := run("server", "power", "r12u7", "cycle"); r.code != 0 || r.out != "server/r12u7 power cycle requested\n" {
		t.Errorf("power cycle: exit %d %q %s", r.code, r.out, r.err)
	}
	// The controller finds the BMC unreachable: BMCReachable and
	// BMCOperation say so.
	var describe string
	deadline := time.Now().Add(20 * time.Second)
	for {
		describe = run("describe", "server", "r12u7").out
		if strings.Contains(describe, "Unreachable") && strings.Contains(describe, "PowerCycle failed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no BMCOperation=False Unreachable within 20s:\n%s", describe)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r := run("server", "boot", "r12u7", "--from", "pxe", "--once"); r.code != 0 || r.out != "server/r12u7 boot once from pxe requested\n" {
		t.Errorf("boot: exit %d %q %s", r.code, r.out, r.err)
	}
	iso := writeFile(t, dir, "enroll.iso", "CD001 not really an ISO")
	if r := run("server", "provision", "r12u7", "--iso", iso); r.code != 0 || r.out != "server/r12u7 provisioning requested\n" {
		t.Errorf("provision: exit %d %q %s", r.code, r.out, r.err)
	}
	wide := run("get", "servers", "-o", "wide")
	if !strings.Contains(wide.out, "POWER") || !strings.Contains(wide.out, "Unknown,Unreachable") {
		t.Errorf("get servers -o wide:\n%s%s", wide.out, wide.err)
	}
	for _, args := range [][]string{{"get", "server", "r12u7", "-o", "yaml"}, {"get", "server", "r12u7", "-o", "json"}, {"describe", "server", "r12u7"}} {
		r := run(args...)
		if strings.Contains(r.out+r.err, password) || strings.Contains(r.out, "username") {
			t.Errorf("%v shows the BMC account:\n%s", args, r.out)
		}
	}
}
