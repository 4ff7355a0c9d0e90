package test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClientsDoNotImportHubOrRaft enforces that the agent depends on the
// hub only through proto/ (no package under hub/, no Raft library), and
// roostctl too, apart from hub/ca (certificate helpers, shared with
// client/).
func TestClientsDoNotImportHubOrRaft(t *testing.T) {
	allowed := map[string]string{
		"github.com/roostfleet/roost/cli/...":      "github.com/roostfleet/roost/hub/ca",
		"github.com/roostfleet/roost/cmd/roostctl": "github.com/roostfleet/roost/hub/ca",
	}
	for _, pkg := range []string{"github.com/roostfleet/roost/agent/...", "github.com/roostfleet/roost/cli/...", "github.com/roostfleet/roost/cmd/roostctl"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) == 0 {
			t.Fatalf("go list %s printed no dependencies", pkg)
		}
		for _, d := range deps {
			if d == allowed[pkg] {
				continue
			}
			if d == "github.com/roostfleet/roost/hub" || strings.HasPrefix(d, "github.com/roostfleet/roost/hub/") || strings.Contains(d, "hashicorp/raft") {
				t.Errorf("%s depends on %s; it may reach the hub only through proto/", pkg, d)
			}
		}
	}
}
