package bmc

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinariesLeaveTheEmulatorOut checks that no command links the BMC
// emulator (test code) or its QMP library, and that the BMC packages stay
// leaves the hub can import (nothing of the hub, the CLI or the agent).
func TestBinariesLeaveTheEmulatorOut(t *testing.T) {
	list := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) == 0 {
			t.Fatalf("go list %s printed no dependencies", pkg)
		}
		return deps
	}
	for _, d := range list("github.com/roostfleet/roost/cmd/...") {
		if strings.HasPrefix(d, "github.com/roostfleet/roost/bmc/redfish/redfishtest") || strings.HasPrefix(d, "github.com/digitalocean/go-qemu") {
			t.Errorf("a command depends on %s, which is for tests", d)
		}
	}
	for _, pkg := range []string{"github.com/roostfleet/roost/bmc", "github.com/roostfleet/roost/bmc/redfish"} {
		for _, d := range list(pkg) {
			for _, wall := range []string{"hub", "cli", "agent", "resource", "proto"} {
				if p := "github.com/roostfleet/roost/" + wall; d == p || strings.HasPrefix(d, p+"/") {
					t.Errorf("%s depends on %s", pkg, d)
				}
			}
		}
	}
}
