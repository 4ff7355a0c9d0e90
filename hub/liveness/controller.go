package liveness

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/roostfleet/roost/hub/controller"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Metrics are the liveness gauges and counters.
type Metrics struct {
	reachable   prometheus.Gauge
	unreachable prometheus.Gauge
	ttl         prometheus.Gauge
	leading     prometheus.Gauge
	transitions *prometheus.CounterVec
	reports     prometheus.Counter
	reported    prometheus.Counter
}

// NewMetrics registers the liveness metrics with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reachable:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "roost_servers_reachable", Help: "Servers recorded reachable (set on the leader)."}),
		unreachable: prometheus.NewGauge(prometheus.GaugeOpts{Name: "roost_servers_unreachable", Help: "Servers recorded unreachable (set on the leader)."}),
		ttl:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "roost_heartbeat_ttl_seconds", Help: "Current heartbeat TTL: a Server silent this long (plus jitter) turns Unreachable."}),
		leading:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "roost_liveness_leading", Help: "1 while this member runs the liveness controller (is the leader)."}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "roost_liveness_transitions_total", Help: "Reachability transitions written to Raft, by new state."}, []string{"to"}),
		reports:     prometheus.NewCounter(prometheus.CounterOpts{Name: "roost_liveness_reports_total", Help: "Seen-reports this member sent to the leader."}),
		reported:    prometheus.NewCounter(prometheus.CounterOpts{Name: "roost_liveness_reported_servers_total", Help: "Server names this member reported to the leader."}),
	}
	if reg != nil {
		reg.MustRegister(m.reachable, m.unreachable, m.ttl, m.leading, m.transitions, m.reports, m.reported)
	}
	return m
}

// Controller runs a Tracker while this member leads: every Tick it
// evaluates and proposes the transitions as one command. Time alone
// drives it, so Run is a hub/controller loop of one key resynced each
// Tick.
type Controller struct {
	Tracker  *Tracker
	IsLeader func() bool
	// Servers lists every Server that is not decommissioned.
	Servers func() []ServerView
	// Propose writes the transitions through Raft.
	Propose func(context.Context, *roostv1.SetServerReachability) error
	// Tick is the evaluation period; default 1s.
	Tick    time.Duration
	Metrics *Metrics
	// LoopMetrics, if set, receives Run's queue metrics.
	LoopMetrics *controller.Metrics
	Log         *slog.Logger
}

// fleetKey is the one key of the liveness loop: every Server at once.
const fleetKey = "servers"

// Run evaluates every Tick while this member leads, until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.defaults()
	tick := c.Tick
	if tick <= 0 {
		tick = time.Second
	}
	(&controller.Controller{
		Name: "liveness", IsLeader: c.IsLeader, Resync: tick, ResyncKeys: func() []string { return []string{fleetKey} },
		OnStart: func(context.Context) { c.start() }, OnStop: c.stop, Metrics: c.LoopMetrics, Log: c.Log,
		Reconcile: func(ctx context.Context, _ string) (controller.Result, error) {
			c.evaluate(ctx)
			return controller.Result{}, nil
		},
	}).Run(ctx)
}

func (c *Controller) defaults() {
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// Step is one evaluation: it follows leadership changes, and while leading
// proposes the transitions.
func (c *Controller) Step(ctx context.Context) {
	c.defaults()
	leader := c.IsLeader()
	switch {
	case leader && !c.Tracker.Leading():
		c.start()
	case !leader && c.Tracker.Leading():
		c.stop()
	}
	if leader {
		c.evaluate(ctx)
	}
}

// start begins a leadership term: a grace period for every Server.
func (c *Controller) start() {
	c.Tracker.StartLeading()
	c.Metrics.leading.Set(1)
	c.Log.Info("liveness: leading; grace period before marking servers unreachable", "ttl", c.Tracker.Config().TTL(len(c.Servers())))
}

// stop ends a leadership term.
func (c *Controller) stop() {
	c.Tracker.StopLeading()
	c.Metrics.leading.Set(0)
	// The counts are the leader's: a member that lost leadership
	// (stopped or frozen meanwhile, say) must not go on exporting its
	// last ones.
	c.Metrics.reachable.Set(0)
	c.Metrics.unreachable.Set(0)
}

// evaluate proposes the transitions due now, as one command.
func (c *Controller) evaluate(ctx context.Context) {
	changes, counts := c.Tracker.Evaluate(c.Servers())
	c.Metrics.ttl.Set(counts.TTL.Seconds())
	if len(changes) > 0 {
		if err := c.Propose(ctx, &roostv1.SetServerReachability{Changes: changes}); err != nil {
			if ctx.Err() == nil {
				c.Log.Warn("liveness: recording transitions failed; retrying", "err", err, "changes", len(changes))
			}
			return // the counts include the transitions, which are not recorded
		}
	}
	c.Metrics.reachable.Set(float64(counts.Reachable))
	c.Metrics.unreachable.Set(float64(counts.Unreachable))
	if len(changes) == 0 {
		return
	}
	up, down := 0, 0
	for _, ch := range changes {
		if ch.GetReachable() {
			up++
		} else {
			down++
		}
	}
	c.Metrics.transitions.WithLabelValues("reachable").Add(float64(up))
	c.Metrics.transitions.WithLabelValues("unreachable").Add(float64(down))
	c.Log.Info("liveness: recorded transitions", "reachable", up, "unreachable", down, "ttl", counts.TTL)
}

// Reporter is where a member's agent streams report heartbeats. On the
// leader it feeds the Tracker directly; elsewhere it collects names and
// sends them to the leader once per Tick.
type Reporter struct {
	Tracker  *Tracker
	IsLeader func() bool
	// Send reports names to the leader (MemberService.ReportSeen).
	Send    func(context.Context, []string) error
	Tick    time.Duration
	Metrics *Metrics
	Log     *slog.Logger

	mu      sync.Mutex
	pending map[string]struct{}
}

// Seen records a heartbeat of the Server name.
func (r *Reporter) Seen(name string) {
	if r.IsLeader() {
		r.Tracker.Seen(name)
		return
	}
	r.mu.Lock()
	if r.pending == nil {
		r.pending = map[string]struct{}{}
	}
	r.pending[name] = struct{}{}
	r.mu.Unlock()
}

// Run flushes pending names until ctx ends.
func (r *Reporter) Run(ctx context.Context) {
	tick := r.Tick
	if tick <= 0 {
		tick = time.Second
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.Flush(ctx)
	}
}

// Flush sends the pending names now (or, on the leader, records them).
func (r *Reporter) Flush(ctx context.Context) {
	if r.Metrics == nil {
		r.Metrics = NewMetrics(nil)
	}
	if r.Log == nil {
		r.Log = slog.Default()
	}
	r.mu.Lock()
	pending := r.pending
	r.pending = nil
	r.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	names := make([]string, 0, len(pending))
	for n := range pending {
		names = append(names, n)
	}
	if r.IsLeader() {
		r.Tracker.Seen(names...)
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := r.Send(sctx, names)
	cancel()
	if err != nil {
		// Keep them for the next try; the leader's TTL is far longer
		// than a few ticks.
		r.mu.Lock()
		if r.pending == nil {
			r.pending = map[string]struct{}{}
		}
		for _, n := range names {
			r.pending[n] = struct{}{}
		}
		r.mu.Unlock()
		if ctx.Err() == nil {
			r.Log.Debug("liveness: reporting to the leader failed; will retry", "err", err, "servers", len(names))
		}
		return
	}
	r.Metrics.reports.Inc()
	r.Metrics.reported.Add(float64(len(names)))
}
