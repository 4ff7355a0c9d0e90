package fleetmetrics_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/roostfleet/roost/hub/fleetmetrics"
	"github.com/roostfleet/roost/hub/state"
)

// monitoringDir holds the dashboard and alerting rules shipped in docs.
const monitoringDir = "../../docs/monitoring"

var (
	fqName     = regexp.MustCompile(`fqName: "([^"]+)"`)
	roostNames = regexp.MustCompile(`\broost_[a-z_]+\b`)
)

// exported returns the series names the fleet metrics export, with a
// histogram's _bucket, _sum and _count.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc, 64)
	fleetmetrics.NewCollector(state.New(state.Options{}), nil).Describe(ch)
	reg := prometheus.NewRegistry()
	ev := fleetmetrics.NewEvents(reg)
	ev.LeaseGranted("p", 0)
	ev.DrainFinished("p", fleetmetrics.DrainDrained, 0)
	ev.Enrolled(fleetmetrics.EnrollEnrolled)
	close(ch)
	names := map[string]bool{}
	for d := range ch {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		names[m[1]] = true
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+s] = true
			}
		}
	}
	return names
}

// checkNames fails for every roost_ series expr names that is not exported.
func checkNames(t *testing.T, names map[string]bool, where, expr string) int {
	t.Helper()
	found := roostNames.FindAllString(expr, -1)
	for _, n := range found {
		if !names[n] {
			t.Errorf("%s: %q names %s, which the fleet metrics do not export", where, expr, n)
		}
	}
	return len(found)
}

// The Grafana dashboard is valid JSON, and every query of its panels and
// variables names series the fleet metrics export.
func TestDashboardQueriesExportedSeries(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(monitoringDir, "roost-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("roost-dashboard.json: %v", err)
	}
	names := exported(t)
	used := map[string]bool{}
	queries := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if checkNames(t, names, "panel "+p.Title, tg.Expr) == 0 {
				t.Errorf("panel %s: %q names no roost_ series", p.Title, tg.Expr)
			}
			for _, n := range roostNames.FindAllString(tg.Expr, -1) {
				used[strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count")] = true
			}
			queries++
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			checkNames(t, names, "variable "+v.Name, q["query"].(string))
		}
	}
	if queries < 10 {
		t.Errorf("the dashboard has %d queries, want a panel per fleet series", queries)
	}
	// Every exported family is on the dashboard.
	for n := range names {
		if !strings.HasSuffix(n, "_bucket") && !strings.HasSuffix(n, "_sum") && !strings.HasSuffix(n, "_count") && !used[n] {
			t.Errorf("no panel shows %s", n)
		}
	}
}

// promtool accepts the alerting rules, their unit tests (one per alert)
// pass, and the rules name only exported series.
func TestAlertingRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getuid() != 0 {
			t.Skip("promtool is missing (install it with images/deps.sh --monitoring as root)")
		}
		if out, err := exec.Command("../../images/deps.sh", "--monitoring").CombinedOutput(); err != nil {
			t.Fatalf("images/deps.sh --monitoring: %v\n%s", err, out)
		}
		if promtool, err = exec.LookPath("promtool"); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"check", "rules", "roost-alerts.yaml"}, {"test", "rules", "roost-alerts.test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = monitoringDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	rules, err := os.ReadFile(filepath.Join(monitoringDir, "roost-alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(monitoringDir, "roost-alerts.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(rules, &file); err != nil {
		t.Fatal(err)
	}
	names, alerts := exported(t), 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if checkNames(t, names, "alert "+r.Alert, r.Expr) == 0 {
				t.Errorf("alert %s: %q names no roost_ series", r.Alert, r.Expr)
			}
			if !strings.Contains(string(tests), "alertname: "+r.Alert+"\n") {
				t.Errorf("roost-alerts.test.yaml does not test alert %s", r.Alert)
			}
			alerts++
		}
	}
	if alerts < 3 {
		t.Errorf("%d alerts, want at least pool halted, servers unreachable and rollout stuck", alerts)
	}
}
