package agent_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAgentDoesNotImportHubOrRaft enforces that the agent depends on the hub
// only through proto/: no package under hub/ and no Raft library.
func TestAgentDoesNotImportHubOrRaft(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/roostfleet/roost/agent/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list printed no dependencies")
	}
	for _, d := range deps {
		if d == "github.com/roostfleet/roost/hub" || strings.HasPrefix(d, "github.com/roostfleet/roost/hub/") || strings.Contains(d, "hashicorp/raft") {
			t.Errorf("the agent depends on %s; it may reach the hub only through proto/", d)
		}
	}
}
