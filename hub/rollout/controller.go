package rollout

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/hub/controller"
	"github.com/roostfleet/roost/hub/revisions"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// DefaultTick is how often the Controller re-plans every Pool, for what
// time alone changes (a window opening, a settle delay ending, a Lease
// expiring); a change of a Pool's objects re-plans it at once.
const DefaultTick = 2 * time.Second

// Controller records each Pool's rollout status (see the package doc) and
// admits reboots. Set the exported fields, then call Run. It is a
// hub/controller loop keyed by Pool name.
type Controller struct {
	IsLeader func() bool
	// FSM is the replicated state read at each reconcile.
	FSM *state.FSM
	// Propose writes a command through Raft (on the leader).
	Propose func(context.Context, *roostv1.Command) error
	// Barrier, if set, runs once per leadership term before the first read.
	Barrier func(context.Context) error
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Tick is the period of the resync of every Pool; default DefaultTick.
	Tick time.Duration
	// Metrics, if set, receives the loop's queue metrics.
	Metrics *controller.Metrics
	// Recorder, if set, records the rollout's decisions about single
	// Servers as Events (a Lease that expired before its Revision booted);
	// run its Run beside the controller's. What the Pool's status shows is
	// recorded by the state itself.
	Recorder *controller.EventRecorder
	Log      *slog.Logger

	admits admissions
	sched  scheduleCache
}

// Run reconciles each Pool whose objects changed, and every Pool each
// Tick, while this member leads, until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	tick := c.Tick
	if tick <= 0 {
		tick = DefaultTick
	}
	(&controller.Controller{
		Name: "rollout", Reconcile: c.Reconcile, Watch: c.FSM.Subscribe, IsLeader: c.IsLeader, Barrier: c.Barrier,
		Sources: c.sources(), Resync: tick, ResyncKeys: c.poolNames, Metrics: c.Metrics, Log: c.Log,
	}).Run(ctx)
}

// poolNames lists every Pool.
func (c *Controller) poolNames() []string { return controller.Names(c.FSM.Reader().List("Pool")) }

// sources map the changes a Pool's plan reads to the Pool: its own, its
// Machines', their Servers' and Leases' (by the Machine holding the
// Server), and (to every Pool) ImageReleases' and MaintenanceWindows'.
func (c *Controller) sources() []controller.Source {
	poolOfServer := func(ev *roostv1.WatchEvent) []string {
		if m := c.FSM.Reader().MachineOf(resource.NameOf(ev.GetObject())); m.GetSpec().GetPool() != "" {
			return []string{m.GetSpec().GetPool()}
		}
		return nil
	}
	all := func(*roostv1.WatchEvent) []string { return c.poolNames() }
	return []controller.Source{
		{Kind: "Pool", Keys: controller.ByName},
		{Kind: "Machine", Keys: func(ev *roostv1.WatchEvent) []string {
			if p := ev.GetObject().GetMachine().GetSpec().GetPool(); p != "" {
				return []string{p}
			}
			return nil
		}},
		{Kind: "Server", Keys: poolOfServer},
		{Kind: "Lease", Keys: poolOfServer},
		{Kind: "ImageRelease", Keys: all},
		{Kind: "MaintenanceWindow", Keys: all},
	}
}

func (c *Controller) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// Step reconciles every Pool once (what a resync does); the first error
// is returned after every Pool was tried. It does not check leadership.
func (c *Controller) Step(ctx context.Context) error {
	var first error
	for _, name := range c.poolNames() {
		if _, err := c.Reconcile(ctx, name); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Reconcile records Pool pool's rollout status when it changed (one
// UpdatePoolRollout command); a Pool that does not exist is done.
func (c *Controller) Reconcile(ctx context.Context, pool string) (controller.Result, error) {
	views, err := c.Views(pool)
	if err != nil || len(views) == 0 {
		return controller.Result{}, nil // deleted meanwhile
	}
	v := views[0]
	now := c.now()
	for _, m := range v.Machines {
		if leaseExpired(m, now) {
			c.Recorder.Record("Server", m.Server, state.EventWarning, "LeaseExpired", fmt.Sprintf(
				"did not boot Revision %d within its Lease (pool %s, readyTimeout); the Lease expired at %s",
				m.Lease.GetRevision(), pool, m.Lease.GetExpiresAt().AsTime().UTC().Format(time.RFC3339)))
		}
	}
	st := Plan(v, now)
	st.AcknowledgedMachines = v.Pool.GetStatus().GetRollout().GetAcknowledgedMachines()
	if proto.Equal(st, v.Pool.GetStatus().GetRollout()) {
		return controller.Result{}, nil
	}
	if st.GetPhase() != v.Pool.GetStatus().GetRollout().GetPhase() {
		c.log().Info("pool rollout phase", "pool", pool, "phase", st.GetPhase(), "target", st.GetTargetVersion(), "reason", st.GetReason())
	}
	if err := c.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_UpdatePoolRollout{UpdatePoolRollout: &roostv1.UpdatePoolRollout{
		Pool: pool, Status: st}}}); err != nil {
		return controller.Result{}, fmt.Errorf("pool %s: %w", pool, err)
	}
	return controller.Result{}, nil
}

func (c *Controller) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// Admit says whether Machine m may start a reboot now (see Admit). A
// Machine of no Pool (standalone) is always admitted. The Pool's plan is
// computed at most once at a time per Pool and shared by the Admits that
// arrived before it began (see admissions); waiting for it ends with ctx.
func (c *Controller) Admit(ctx context.Context, m *roostv1.Machine) (bool, string) {
	pool := m.GetSpec().GetPool()
	if pool == "" {
		return true, ""
	}
	a, err := c.admits.plan(ctx, pool, c.FSM.LastIndex(), c.now(), func() (*admission, error) {
		at, r := c.now(), c.FSM.Reader()
		views, err := c.viewsFrom(r, pool)
		if err != nil {
			return nil, err
		}
		return &admission{index: r.LastIndex(), at: at, view: views[0], status: Plan(views[0], at)}, nil
	})
	if err != nil {
		return false, fmt.Sprintf("pool %s: %v", pool, err)
	}
	return Admit(a.view, a.status, m.GetMetadata().GetName(), c.now())
}

// Views reads the Pools (only pool when not empty) and their Machines
// from one consistent read of the FSM, sorted by Pool name. The views
// share messages with the store: read only.
func (c *Controller) Views(pool string) ([]*PoolView, error) {
	return c.viewsFrom(c.FSM.Reader(), pool)
}

// viewsFrom is Views read from r.
func (c *Controller) viewsFrom(r *state.Reader, pool string) ([]*PoolView, error) {
	var pools []*roostv1.Pool
	if pool != "" {
		o := r.Get("Pool", pool)
		if o == nil {
			return nil, fmt.Errorf("pool %s does not exist", pool)
		}
		pools = append(pools, o.GetPool())
	} else {
		for _, o := range r.List("Pool") {
			pools = append(pools, o.GetPool())
		}
	}
	releases := r.List("ImageRelease")
	var out []*PoolView
	for _, p := range pools {
		v := &PoolView{Pool: p, MaxUnavailable: MaxUnavailable(p)}
		v.Schedule, v.ScheduleErr = c.sched.get(r, p.GetSpec().GetMaintenanceWindows())
		for _, m := range r.MachinesOfPool(p.GetMetadata().GetName()) {
			// A Machine being replaced (hub/remediation) is out of the
			// rollout: it does not hold the pool's maxUnavailable.
			if m.GetSpec().GetServer() != "" && !state.Remediating(m) {
				v.Machines = append(v.Machines, machineView(r, m))
			}
		}
		if rel := revisions.PickRelease(releases, p.GetSpec().GetImageVersion(), p.GetSpec().GetImageChannel()); rel != nil {
			v.Target = rel.GetSpec().GetVersion()
			if len(rel.GetSpec().GetUpgradesFrom()) > 0 {
				// The Pool moves to the next supported release of the
				// Machines furthest behind (see revisions.UpgradePaths).
				var from []string
				for _, m := range v.Machines {
					from = append(from, m.BootedVersion)
				}
				next, note := revisions.NewUpgradePaths(releases, rel).Next(from)
				v.Target, v.TargetNote = "", note
				if next != nil {
					v.Target = next.GetSpec().GetVersion()
				}
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// machineView is what Plan needs of m: from the Machine's status (desired,
// booted and failed Revision numbers; Ready and when it last became
// Ready), its Server's image version and its Lease. Revisions are read
// only for a failed Machine's reason.
func machineView(r *state.Reader, m *roostv1.Machine) MachineView {
	st := m.GetStatus()
	mv := MachineView{Name: m.GetMetadata().GetName(), Server: m.GetSpec().GetServer(), Desired: st.GetRevision(), Booted: st.GetBootedRevision()}
	mv.Provisioned = mv.Booted > 0
	mv.DesiredFailed = mv.Desired != 0 && st.GetFailedRevision() == mv.Desired
	if cond := state.FindCondition(st.GetConditions(), state.MachineReady); cond.GetStatus() == "True" {
		mv.Ready = true
		if t := cond.GetLastTransitionTime(); t != nil {
			mv.ReadySince = t.AsTime()
		}
	}
	if o := r.Get("Server", mv.Server); o != nil {
		mv.BootedVersion = o.GetServer().GetStatus().GetImageVersion()
	}
	if o := r.Get("Lease", mv.Server); o != nil {
		mv.Lease = o.GetLease().GetSpec()
	}
	if mv.DesiredFailed {
		for _, rv := range r.RevisionSummaries(mv.Server) {
			if rv.Number == mv.Desired {
				mv.DesiredFailReason = rv.Reason
			}
		}
	}
	return mv
}
