package rollout

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/roostfleet/roost/hub/fleetmetrics"
)

// histogram returns the sample count and sum of histogram name with
// labels in reg (0, 0 when absent).
func histogram(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metric
				}
			}
			return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
		}
	}
	return 0, 0
}

// The gate observes a Lease's wait from the first refused request to its
// grant, once, and each drain's duration with its result.
func TestGateRecordsLeaseWaitsAndDrains(t *testing.T) {
	gf := newGateFleet(t)
	reg := prometheus.NewRegistry()
	gf.g.Events = fleetmetrics.NewEvents(reg)
	clock := time.Now()
	gf.g.Now = func() time.Time { return clock }
	ctx := context.Background()
	srv := gf.servers[0]
	done := false
	gf.d.drains[srv] = func() (bool, error) { return done, nil }

	gf.acquire(srv) // Draining: the wait starts
	clock = clock.Add(30 * time.Second)
	if _, err := gf.g.Reconcile(ctx, srv); err != nil { // the drain starts
		t.Fatal(err)
	}
	clock = clock.Add(45 * time.Second)
	if _, err := gf.g.Reconcile(ctx, srv); err != nil { // still draining
		t.Fatal(err)
	}
	clock = clock.Add(45 * time.Second)
	done = true
	if _, err := gf.g.Reconcile(ctx, srv); err != nil { // drained, granted
		t.Fatal(err)
	}
	if r := gf.acquire(srv); !r.GetGranted() {
		t.Fatalf("request after the drain: %v", r)
	}
	gf.acquire(srv) // a held Lease asked again is no new wait
	if n, sum := histogram(t, reg, "roost_lease_wait_seconds", map[string]string{"pool": "workers"}); n != 1 || sum != 120 {
		t.Errorf("lease waits: %d observations summing to %vs, want 1 of 120s", n, sum)
	}
	if n, sum := histogram(t, reg, "roost_drain_duration_seconds", map[string]string{"pool": "workers", "result": fleetmetrics.DrainDrained}); n != 1 || sum != 90 {
		t.Errorf("drains: %d observations summing to %vs, want 1 of 90s", n, sum)
	}

	failing := gf.servers[1]
	gf.d.drains[failing] = func() (bool, error) { return false, errors.New("PodDisruptionBudget web-pdb allows no disruption") }
	gf.acquire(failing)
	if _, err := gf.g.Reconcile(ctx, failing); err != nil {
		t.Fatal(err)
	}
	if n, _ := histogram(t, reg, "roost_drain_duration_seconds", map[string]string{"pool": "workers", "result": fleetmetrics.DrainFailed}); n != 1 {
		t.Errorf("failed drains: %d observations, want 1", n)
	}
	if n, _ := histogram(t, reg, "roost_lease_wait_seconds", map[string]string{"pool": "workers"}); n != 1 {
		t.Errorf("lease waits after a failed drain: %d observations, want still 1", n)
	}
}
