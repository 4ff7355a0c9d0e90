package hub_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// scrape GETs the hub's /metrics and returns the value of every sample of
// the gauges and counters named, keyed by name and labels in name order
// ("roost_servers{pool=,state=Available}").
func scrape(t *testing.T, h *hub.Hub, names ...string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + h.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, name := range names {
		for _, m := range mfs[name].GetMetric() {
			out[sampleKey(name, m.GetLabel())] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return out
}

func sampleKey(name string, labels []*dto.LabelPair) string {
	var kv []string
	for _, l := range labels {
		kv = append(kv, l.GetName()+"="+l.GetValue())
	}
	slices.Sort(kv)
	return name + "{" + strings.Join(kv, ",") + "}"
}

func key(name string, kv ...string) string {
	var parts []string
	for i := 0; i < len(kv); i += 2 {
		parts = append(parts, kv[i]+"="+kv[i+1])
	}
	slices.Sort(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

// fleetFromState counts, from the hub's state, what the fleet gauges
// should say: Servers and Machines by pool and phase/state, and each
// pool's rollout phase.
func fleetFromState(t *testing.T, f *state.FSM) map[string]float64 {
	t.Helper()
	want := map[string]float64{}
	clusterOf := map[string]string{}
	pools, _, err := f.List("Pool", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range pools {
		p := o.GetPool()
		clusterOf[p.GetMetadata().GetName()] = p.GetSpec().GetCluster()
		for _, ph := range []string{"Idle", "Waiting", "Progressing", "Settling", "Paused", "Halted"} {
			v := 0.0
			if p.GetStatus().GetRollout().GetPhase() == ph {
				v = 1
			}
			want[key("roost_pool_rollout_phase", "pool", p.GetMetadata().GetName(), "cluster", p.GetSpec().GetCluster(), "phase", ph)] = v
		}
	}
	machines, _, err := f.List("Machine", "")
	if err != nil {
		t.Fatal(err)
	}
	poolOf := map[string]string{}
	for _, o := range machines {
		m := o.GetMachine()
		pool := m.GetSpec().GetPool()
		poolOf[m.GetSpec().GetServer()] = pool
		want[key("roost_machines", "pool", pool, "cluster", clusterOf[pool], "phase", state.MachinePhase(m))]++
	}
	servers, _, err := f.List("Server", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range servers {
		s := o.GetServer()
		reach := s.GetStatus().GetReachability()
		if reach == "" {
			reach = "Unknown"
		}
		pool := poolOf[s.GetMetadata().GetName()]
		want[key("roost_servers", "pool", pool, "cluster", clusterOf[pool], "state", s.GetStatus().GetState(), "reachability", reach)]++
	}
	return want
}

// The hub's /metrics serves the fleet series: the gauges match the
// state, and the leader counts enrollments by result.
func TestFleetMetricsMatchState(t *testing.T) {
	h := startHub(t, t.TempDir(), hub.Options{HTTPAddr: "127.0.0.1:0"})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(h.AdminConfigPath()); return err == nil })
	cfg, err := client.LoadConfig(h.AdminConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	f := &agentFixture{t: t, h: h, admin: dial(t, h.AdminConfigPath()), cfg: cfg}
	ctx := context.Background()

	tok := f.token(&roostv1.CreateEnrollmentTokenRequest{MaxUses: 1})
	anon := f.agentClient(nil, nil)
	req, _ := enrollReq(t, tok, testUUID, "52:54:00:00:00:01")
	if _, err := anon.Enroll(ctx, req); err != nil {
		t.Fatal(err)
	}
	req, _ = enrollReq(t, tok, "", "52:54:00:00:00:02")
	if _, err := anon.Enroll(ctx, req); err == nil {
		t.Fatal("a used-up token enrolled a Server")
	}
	more := f.token(&roostv1.CreateEnrollmentTokenRequest{})
	req, _ = enrollReq(t, more, testUUID, "52:54:00:00:00:01") // the same Server again
	if _, err := anon.Enroll(ctx, req); err != nil {
		t.Fatal(err)
	}
	var servers []string
	for i := range 3 {
		id := fmt.Sprintf("4c4c4544-0042-3510-8052-00000000001%d", i)
		f.availableServer(more, id, fmt.Sprintf("52:54:00:00:01:%02x", i))
		servers = append(servers, id)
	}
	if _, err := f.admin.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{
		cluster("prod", "v1.34.4"),
		resource.Wrap(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "workers"}, Spec: &roostv1.PoolSpec{Cluster: "prod"}}),
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.admin.AssignServers(ctx, &roostv1.AssignServersRequest{Pool: "workers", Servers: servers[:2]}); err != nil {
		t.Fatal(err)
	}

	var got, want map[string]float64
	waitFor(t, "the fleet gauges to match the state", func() bool {
		want = fleetFromState(t, h.FSM())
		got = scrape(t, h, "roost_servers", "roost_machines", "roost_pool_rollout_phase")
		return maps.Equal(got, want)
	})
	if want[key("roost_machines", "pool", "workers", "cluster", "prod", "phase", state.PhaseScheduled)]+
		want[key("roost_machines", "pool", "workers", "cluster", "prod", "phase", state.PhaseProvisioned)] != 2 {
		t.Errorf("state counted from the FSM lacks the two Machines of pool workers: %v", want)
	}
	counts := scrape(t, h, "roost_enrollments_total")
	for result, n := range map[string]float64{"enrolled": 1, "reenrolled": 1, "refused": 1} {
		if k := key("roost_enrollments_total", "result", result); counts[k] != n {
			t.Errorf("%s = %v, want %v (all: %v)", k, counts[k], n, counts)
		}
	}
}
