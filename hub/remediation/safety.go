package remediation

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/roostfleet/roost/hub/controller"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// DefaultSafetyResync is how often the SafetyController re-evaluates
// every Pool, for what time alone changes (a Lease expiring).
const DefaultSafetyResync = 10 * time.Second

// freeze says why v's Pool must be frozen under pol: a reason of
// state.PoolFrozen and a message; "" when it need not be. The causes, in
// order: its Cluster's API unreachable (a Cluster without credentials
// does not freeze: nothing is known of it), more Machines than replicas
// (not counting those being replaced), more than maxUnhealthyPercent of
// its Machines unhealthy (and more than one).
func freeze(v *poolView, pol Policy) (reason, msg string) {
	if c := state.FindCondition(v.cluster.GetStatus().GetConditions(), state.ClusterReachable); c.GetStatus() == "False" && c.GetReason() != "NoCredentials" {
		// The Cluster's message (the client's error) is left out: it
		// varies from probe to probe, and the Pool is written on changes.
		name := v.cluster.GetMetadata().GetName()
		return state.ReasonClusterUnreachable, fmt.Sprintf("the API of Cluster %s is unreachable (%s; roostctl describe cluster %s)", name, c.GetReason(), name)
	}
	n, unhealthy := 0, 0
	var names []string
	for _, mb := range v.members {
		if mb.remediating() {
			continue
		}
		n++
		if mb.unhealthy() {
			unhealthy++
			if len(names) < 5 {
				names = append(names, mb.name())
			}
		}
	}
	if r := v.pool.GetSpec().Replicas; r != nil && n > int(*r) {
		return state.ReasonOverReplicated, fmt.Sprintf("%d Machines, more than replicas %d", n, *r)
	}
	// One unhealthy Machine is never "many at once", however small the
	// pool: a pool of two with one down still reboots and heals.
	if unhealthy > 1 && unhealthy*100 > pol.MaxUnhealthyPercent*n {
		if unhealthy > len(names) {
			names = append(names, "…")
		}
		return state.ReasonTooManyUnhealthy, fmt.Sprintf("%d of %d Machines unhealthy (%d%%), more than maxUnhealthyPercent %d%%: %v",
			unhealthy, n, unhealthy*100/n, pol.MaxUnhealthyPercent, names)
	}
	return "", ""
}

// Frozen says whether Pool p carries Frozen=True.
func Frozen(p *roostv1.Pool) bool {
	return state.FindCondition(p.GetStatus().GetConditions(), state.PoolFrozen).GetStatus() == "True"
}

// SafetyController keeps each Pool's Frozen condition (see the package
// doc): a hub/controller loop keyed by Pool name.
type SafetyController struct {
	IsLeader func() bool
	FSM      *state.FSM
	// Propose writes a command through Raft (on the leader).
	Propose func(context.Context, *roostv1.Command) error
	// Barrier, if set, runs once per leadership term before the first read.
	Barrier func(context.Context) error
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Resync is the period of the re-evaluation of every Pool; default
	// DefaultSafetyResync.
	Resync  time.Duration
	Metrics *controller.Metrics
	Log     *slog.Logger
}

// Run reconciles each Pool whose Machines, Servers, Leases or Cluster
// changed, and every Pool each Resync, while this member leads.
func (c *SafetyController) Run(ctx context.Context) {
	resync := c.Resync
	if resync <= 0 {
		resync = DefaultSafetyResync
	}
	(&controller.Controller{
		Name: "safety", Reconcile: c.Reconcile, Watch: c.FSM.Subscribe, IsLeader: c.IsLeader, Barrier: c.Barrier,
		Sources: poolSources(c.FSM, true), Resync: resync, ResyncKeys: func() []string { return controller.Names(c.FSM.Reader().List("Pool")) },
		Metrics: c.Metrics, Log: c.Log,
	}).Run(ctx)
}

// Step reconciles every Pool once; the first error is returned after
// every Pool was tried. It does not check leadership.
func (c *SafetyController) Step(ctx context.Context) error {
	var first error
	for _, name := range controller.Names(c.FSM.Reader().List("Pool")) {
		if _, err := c.Reconcile(ctx, name); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Reconcile sets or clears Pool pool's Frozen condition (one SetConditions
// when it changed).
func (c *SafetyController) Reconcile(ctx context.Context, pool string) (controller.Result, error) {
	v := readPool(c.FSM.Reader(), pool, now(c.Now))
	if v == nil {
		return controller.Result{}, nil
	}
	reason, msg := freeze(v, PolicyOf(v.pool))
	cur := state.FindCondition(v.pool.GetStatus().GetConditions(), state.PoolFrozen)
	sc := &roostv1.SetConditions{Kind: "Pool", Name: pool}
	switch {
	case reason == "" && cur == nil:
		return controller.Result{}, nil
	case reason == "":
		sc.Clear = []string{state.PoolFrozen}
	case cur.GetStatus() == "True" && cur.GetReason() == reason && cur.GetMessage() == msg:
		return controller.Result{}, nil
	default:
		sc.Set = []*roostv1.Condition{{Type: state.PoolFrozen, Status: "True", Reason: reason, Message: msg}}
	}
	if err := c.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_SetConditions{SetConditions: sc}}); err != nil {
		return controller.Result{}, fmt.Errorf("pool %s: %w", pool, err)
	}
	if reason != "" && cur.GetReason() != reason {
		logOf(c.Log).Warn("pool frozen: no replacement starts and no reboot is admitted", "pool", pool, "reason", reason, "message", msg)
	} else if reason == "" {
		logOf(c.Log).Info("pool unfrozen", "pool", pool, "was", cur.GetReason())
	}
	return controller.Result{}, nil
}

// poolSources map changes to the Pools they concern: a Pool's own, its
// Machines', their Servers' and Leases'; with clusters, a Cluster's to the
// Pools naming it.
func poolSources(f *state.FSM, clusters bool) []controller.Source {
	poolOfServer := func(ev *roostv1.WatchEvent) []string {
		if p := f.Reader().MachineOf(resource.NameOf(ev.GetObject())).GetSpec().GetPool(); p != "" {
			return []string{p}
		}
		return nil
	}
	out := []controller.Source{
		{Kind: "Pool", Keys: controller.ByName},
		{Kind: "Machine", Keys: func(ev *roostv1.WatchEvent) []string {
			if p := ev.GetObject().GetMachine().GetSpec().GetPool(); p != "" {
				return []string{p}
			}
			return nil
		}},
		{Kind: "Server", Keys: poolOfServer},
		{Kind: "Lease", Keys: poolOfServer},
	}
	if clusters {
		out = append(out, controller.Source{Kind: "Cluster", Keys: func(ev *roostv1.WatchEvent) []string {
			var keys []string
			for _, o := range f.Reader().List("Pool") {
				if o.GetPool().GetSpec().GetCluster() == resource.NameOf(ev.GetObject()) {
					keys = append(keys, resource.NameOf(o))
				}
			}
			return keys
		}})
	}
	return out
}

func now(clock func() time.Time) time.Time {
	if clock == nil {
		return time.Now()
	}
	return clock()
}

func logOf(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}
