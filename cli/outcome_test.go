package cli

import (
	"strings"
	"testing"

	"github.com/roostfleet/roost/apierror"
)

// A write the hub may have applied exits 4 and says how to check and how to
// retry it safely; one refused before it was proposed exits 3, one refused
// by the state 1.
func TestWriteOutcomeExitCodes(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	manifest := writeFile(t, t.TempDir(), "c.yaml", clusterYAML)

	f.applyErr = apierror.OutcomeUnknown("leadership changed while the write was committing")
	r := runCLI(t, "", "--config", config, "--timeout", "700ms", "--request-id", "deploy-7", "apply", "-f", manifest)
	if r.code != ExitUnknown || !strings.Contains(r.err, "error: outcome unknown: the hub may have applied it (") ||
		!strings.Contains(r.err, "check with 'roostctl get KIND NAME'") || !strings.Contains(r.err, "--request-id deploy-7 within an hour") {
		t.Errorf("unknown outcome: exit %d, stderr %q", r.code, r.err)
	}
	if len(f.applies) < 2 {
		t.Errorf("%d attempts: a write with a request ID is retried after an unknown outcome", len(f.applies))
	}

	f.applies = nil
	f.applyErr = apierror.NotApplied("no hub leader elected yet; retry")
	r = runCLI(t, "", "--config", config, "--timeout", "700ms", "apply", "-f", manifest)
	if r.code != ExitUnreachable || !strings.Contains(r.err, "hub unreachable") {
		t.Errorf("not applied: exit %d, stderr %q", r.code, r.err)
	}

	f.applies = nil
	f.applyErr = apierror.FailedPrecondition("pool workers is in use")
	r = runCLI(t, "", "--config", config, "apply", "-f", manifest)
	if r.code != ExitFailed || len(f.applies) != 1 {
		t.Errorf("refused: exit %d after %d attempts, stderr %q", r.code, len(f.applies), r.err)
	}

	r = runCLI(t, "", "--config", config, "--request-id", "has space", "apply", "-f", manifest)
	if r.code != ExitUsage || !strings.Contains(r.err, "--request-id") {
		t.Errorf("bad --request-id: exit %d, stderr %q", r.code, r.err)
	}
}

func TestCheckCommand(t *testing.T) {
	for path, want := range map[string]string{
		"roostctl token create":           "roostctl token list",
		"roostctl hub join":               "roostctl hub join-tokens list",
		"roostctl hub join-tokens revoke": "roostctl hub join-tokens list",
		"roostctl pool assign":            "roostctl get machines",
		"roostctl apply":                  "roostctl get KIND NAME",
		"roostctl image trust add":        "roostctl image trust list",
		"roostctl imaginary":              "roostctl get KIND NAME",
	} {
		if got := checkCommand(path); got != want {
			t.Errorf("checkCommand(%q) = %q, want %q", path, got, want)
		}
	}
}
