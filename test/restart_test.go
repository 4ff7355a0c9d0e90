package test

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/roostfleet/roost/test/harness"
)

// appliableKinds are the kinds `roostctl apply` creates, with the plural
// `roostctl get` is given.
var appliableKinds = []struct{ Kind, Plural string }{
	{"Pool", "pools"},
	{"Cluster", "clusters"},
	{"MachineClass", "machineclasses"},
	{"NetworkProfile", "networkprofiles"},
	{"MaintenanceWindow", "maintenancewindows"},
}

// TestRestartKeepsObjects is the single-node durability acceptance test: a
// manifest with one object of each appliable kind is applied with
// roostctl; the hub is stopped with SIGTERM, then killed with SIGKILL, and
// started again on the same data dir each time; `roostctl get KIND -o yaml`
// must be byte-identical to before every time.
func TestRestartKeepsObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test (real roost-hub and roostctl): run `make test-root`")
	}
	harness.CtlBinary(t) // skips when roostctl is missing
	m := harness.StartMember(t, harness.MemberOptions{NodeID: "hub-1"})
	cfg := m.WaitAdminConfig(harness.HealthyTimeout)

	manifest := allManifest(t)
	r := harness.MustCtl(t, cfg, "apply", "-f", manifest)
	harness.Report(t, "applied %s in %s: %s", filepath.Base(manifest), r.Duration.Round(1e6), strings.Join(strings.Fields(r.Stdout), " "))

	// The hub's controllers write status after an apply (a Pool's rollout,
	// a Cluster's reachability): compare once the state has settled.
	before := settledAll(t, cfg)
	for _, k := range appliableKinds {
		out := before[k.Kind]
		if !strings.Contains(out, "kind: "+k.Kind+"\n") || !strings.Contains(out, "\nspec:") {
			t.Fatalf("roostctl get %s -o yaml after apply holds no %s with a spec:\n%s", k.Plural, k.Kind, out)
		}
		harness.Report(t, "%-18s %4d bytes of YAML", k.Kind, len(out))
	}

	for _, stop := range []struct {
		name string
		sig  syscall.Signal
	}{{"SIGTERM", syscall.SIGTERM}, {"SIGKILL", syscall.SIGKILL}} {
		m.Stop(stop.sig)
		took := m.Restart()
		harness.Report(t, "after %s: restarted on the same data dir, healthy in %s", stop.name, took.Round(1e6))
		after := getAll(t, cfg)
		for _, k := range appliableKinds {
			if after[k.Kind] != before[k.Kind] {
				t.Errorf("after %s and restart, `roostctl get %s -o yaml` differs.\nbefore:\n%s\nafter:\n%s", stop.name, k.Plural, before[k.Kind], after[k.Kind])
			}
		}
		if !t.Failed() {
			harness.Report(t, "after %s: `get -o yaml` of all %d kinds byte-identical", stop.name, len(appliableKinds))
		}
	}
}

// settledAll is getAll once it has not changed for six seconds (within 40 s).
func settledAll(t *testing.T, cfg string) map[string]string {
	t.Helper()
	// Settled: unchanged for six seconds, longer than the slowest
	// controller's tick (the cluster controller's 5 s), so status the
	// controllers write after an apply (a Pool's ReplicaFailure, a
	// Cluster's reachability) is in.
	prev, same := getAll(t, cfg), 0
	for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline); {
		time.Sleep(time.Second)
		cur := getAll(t, cfg)
		if !maps.Equal(prev, cur) {
			prev, same = cur, 0
			continue
		}
		if same++; same == 6 {
			return cur
		}
	}
	t.Fatalf("the hub's objects kept changing for 40 s after apply")
	return nil
}

// getAll returns `roostctl get KIND -o yaml` for every appliable kind.
func getAll(t *testing.T, cfg string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range appliableKinds {
		out[k.Kind] = harness.MustCtl(t, cfg, "get", k.Plural, "-o", "yaml").Stdout
	}
	return out
}

// allManifest returns examples/all.yaml, or, when it is missing, a manifest
// made in t.TempDir() from the per-kind example files, referenced kinds first.
func allManifest(t *testing.T) string {
	t.Helper()
	all := harness.RepoFile(t, "examples/all.yaml")
	if _, err := os.Stat(all); err == nil {
		return all
	}
	var b strings.Builder
	for _, f := range []string{"cluster.yaml", "machineclass.yaml", "networkprofile.yaml", "maintenancewindow.yaml", "pool.yaml"} {
		data, err := os.ReadFile(harness.RepoFile(t, filepath.Join("examples", f)))
		if err != nil {
			t.Fatalf("neither examples/all.yaml nor examples/%s: %v", f, err)
		}
		b.WriteString("---\n")
		b.Write(data)
		b.WriteString("\n")
	}
	path := filepath.Join(t.TempDir(), "all.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMain(m *testing.M) { harness.Main(m) }
