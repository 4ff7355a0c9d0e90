package fleetmetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// RolloutPhases are the phases roost_pool_rollout_phase is exported for,
// each pool having 1 for its current phase and 0 for the others.
var RolloutPhases = []string{state.RolloutIdle, state.RolloutWaiting, state.RolloutProgressing,
	state.RolloutSettling, state.RolloutPaused, state.RolloutHalted}

// Collector computes the fleet gauges from one read-only snapshot of the
// state per scrape, in O(objects) time, without copying objects.
type Collector struct {
	fsm *state.FSM
	now func() time.Time

	machines, servers, revisions, leases                     *prometheus.Desc
	rolloutPhase, updated, total, unavailable, failed, ratio *prometheus.Desc
	frozen                                                   *prometheus.Desc
}

// NewCollector returns the fleet gauges of fsm's state; register it with a
// prometheus.Registerer. now is the clock deciding which Leases are held
// (nil means time.Now).
func NewCollector(fsm *state.FSM, now func() time.Time) *Collector {
	if now == nil {
		now = time.Now
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &Collector{fsm: fsm, now: now,
		machines: d("roost_machines", "Machines by pool, cluster and phase (Requested, Scheduled, Provisioned, Joined, Ready, Destroyed); pool and cluster are empty for standalone Machines.",
			"pool", "cluster", "phase"),
		servers: d("roost_servers", "Servers by the pool and cluster of the Machine claiming them (empty when unclaimed), lifecycle state and reachability (Reachable, Unreachable, or Unknown before the first heartbeat or once decommissioned).",
			"pool", "cluster", "state", "reachability"),
		revisions: d("roost_revisions", "Revisions by the pool and cluster of their Machine and phase (Pending, Booted, Good, Failed, Superseded).",
			"pool", "cluster", "phase"),
		leases: d("roost_leases", "Reboot Leases held now (not expired) by pool, cluster and phase (Draining, Granted).",
			"pool", "cluster", "phase"),
		rolloutPhase: d("roost_pool_rollout_phase", "1 for the pool's current rollout phase (Idle, Waiting, Progressing, Settling, Paused, Halted), 0 for the others.",
			"pool", "cluster", "phase"),
		updated: d("roost_pool_rollout_updated_machines", "Machines of the pool Ready on a Revision of the rollout's target version.",
			"pool", "cluster"),
		total: d("roost_pool_rollout_machines", "Machines of the pool the rollout counts.",
			"pool", "cluster"),
		unavailable: d("roost_pool_rollout_unavailable_machines", "Machines of the pool not Ready or holding a reboot Lease.",
			"pool", "cluster"),
		failed: d("roost_pool_rollout_failed_machines", "Machines of the pool that failed on the rollout's target and are not acknowledged.",
			"pool", "cluster"),
		frozen: d("roost_pool_frozen", "1 while the pool is Frozen by the safety controller (no replacement, no reboot), with the reason (TooManyUnhealthy, ClusterUnreachable, OverReplicated); 0 with reason \"\" otherwise.",
			"pool", "cluster", "reason"),
		ratio: d("roost_pool_rollout_progress_ratio", "updated / total Machines of the pool's rollout, 0 to 1 (1 for an empty pool).",
			"pool", "cluster"),
	}
}

// Describe sends the descriptors of every fleet gauge.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.machines, c.servers, c.revisions, c.leases, c.rolloutPhase, c.updated, c.total, c.unavailable, c.failed, c.ratio, c.frozen} {
		ch <- d
	}
}

// where is a pool and its cluster.
type where struct{ pool, cluster string }

// key is a label tuple of one gauge: a pool and its cluster plus up to two
// more values.
type key struct {
	where
	a, b string
}

// Collect reads one snapshot of the state and sends every fleet gauge.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	r := c.fsm.Reader()
	pools := map[string]where{}
	rollouts := map[where]*roostv1.RolloutStatus{}
	for _, o := range r.List("Pool") {
		p := o.GetPool()
		w := where{p.GetMetadata().GetName(), p.GetSpec().GetCluster()}
		pools[w.pool], rollouts[w] = w, p.GetStatus().GetRollout()
		v, reason := 0.0, ""
		if cond := state.FindCondition(p.GetStatus().GetConditions(), state.PoolFrozen); cond.GetStatus() == "True" {
			v, reason = 1, cond.GetReason()
		}
		ch <- prometheus.MustNewConstMetric(c.frozen, prometheus.GaugeValue, v, w.pool, w.cluster, reason)
	}
	at := func(pool string) where {
		if w, ok := pools[pool]; ok {
			return w
		}
		return where{pool: pool}
	}

	machines := map[key]int{}
	byServer := map[string]where{}  // claimed Server → pool
	byMachine := map[string]where{} // Machine → pool
	for _, o := range r.List("Machine") {
		m := o.GetMachine()
		w := at(m.GetSpec().GetPool())
		machines[key{w, state.MachinePhase(m), ""}]++
		byMachine[m.GetMetadata().GetName()] = w
		if s := m.GetSpec().GetServer(); s != "" {
			byServer[s] = w
		}
	}
	send(ch, c.machines, machines, 1)

	servers := map[key]int{}
	for _, o := range r.List("Server") {
		s := o.GetServer()
		reach := s.GetStatus().GetReachability()
		if reach == "" {
			reach = "Unknown"
		}
		servers[key{byServer[s.GetMetadata().GetName()], s.GetStatus().GetState(), reach}]++
	}
	send(ch, c.servers, servers, 2)

	revisions := map[key]int{}
	r.EachRevision(func(rv *roostv1.Revision) {
		revisions[key{byMachine[rv.GetSpec().GetMachine()], rv.GetStatus().GetPhase(), ""}]++
	})
	send(ch, c.revisions, revisions, 1)

	leases := map[key]int{}
	now := c.now()
	for _, o := range r.List("Lease") {
		l := o.GetLease().GetSpec()
		if !l.GetExpiresAt().AsTime().After(now) {
			continue
		}
		phase := l.GetPhase()
		if phase == "" {
			phase = state.LeaseGranted
		}
		leases[key{at(l.GetPool()), phase, ""}]++
	}
	send(ch, c.leases, leases, 1)

	for w, ro := range rollouts {
		known := false
		for _, ph := range RolloutPhases {
			v := 0.0
			if ro.GetPhase() == ph {
				v, known = 1, true
			}
			ch <- prometheus.MustNewConstMetric(c.rolloutPhase, prometheus.GaugeValue, v, w.pool, w.cluster, ph)
		}
		if !known && ro.GetPhase() != "" {
			ch <- prometheus.MustNewConstMetric(c.rolloutPhase, prometheus.GaugeValue, 1, w.pool, w.cluster, ro.GetPhase())
		}
		ratio := 1.0
		if ro.GetTotal() > 0 {
			ratio = float64(ro.GetUpdated()) / float64(ro.GetTotal())
		}
		for _, g := range []struct {
			d *prometheus.Desc
			v float64
		}{{c.updated, float64(ro.GetUpdated())}, {c.total, float64(ro.GetTotal())}, {c.unavailable, float64(ro.GetUnavailable())},
			{c.failed, float64(len(ro.GetFailedMachines()))}, {c.ratio, ratio}} {
			ch <- prometheus.MustNewConstMetric(g.d, prometheus.GaugeValue, g.v, w.pool, w.cluster)
		}
	}
}

// send sends one gauge of d per label tuple of counts: pool, cluster and
// the key's first extra (1 or 2) values.
func send(ch chan<- prometheus.Metric, d *prometheus.Desc, counts map[key]int, extra int) {
	for k, n := range counts {
		labels := []string{k.pool, k.cluster, k.a, k.b}[:2+extra]
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(n), labels...)
	}
}
