package rollout

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/hub/leader"
	"github.com/roostfleet/roost/hub/revisions"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// DefaultTick is the Controller's reconcile period.
const DefaultTick = 2 * time.Second

// Controller records each Pool's rollout status (see the package doc) and
// admits reboots. Set the exported fields, then call Run.
type Controller struct {
	IsLeader func() bool
	// FSM is the replicated state read at each step.
	FSM *state.FSM
	// Propose writes a command through Raft (on the leader).
	Propose func(context.Context, *roostv1.Command) error
	// Barrier, if set, runs once per leadership term before the first read.
	Barrier func(context.Context) error
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxUnavailable resolves a Pool's rollout.maxUnavailable.
	MaxUnavailable func(*roostv1.Pool) int32
	Tick           time.Duration
	Log            *slog.Logger

	term leader.Term
	// admitMu serialises Admit, so two Servers of one Pool are not both
	// admitted against the same count (the FSM's Lease check is the
	// last guard).
	admitMu sync.Mutex
	sched   scheduleCache

	// Views of the state at cacheIndex: every Pool (cacheAll), by name.
	cacheMu    sync.Mutex
	cacheIndex uint64
	cacheAll   []*PoolView
	cache      map[string]*PoolView
}

// Run reconciles until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	tick := c.Tick
	if tick <= 0 {
		tick = DefaultTick
	}
	leader.RunEvery(ctx, tick, c.Log, "rollout controller", c.Step)
}

func (c *Controller) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// Step records every Pool's rollout status when it changed (one
// UpdatePoolRollout command per changed Pool), when this member leads.
func (c *Controller) Step(ctx context.Context) error {
	c.term.IsLeader, c.term.Barrier = c.IsLeader, c.Barrier
	if ok, err := c.term.Ready(ctx); !ok {
		return err
	}
	views, err := c.Views("")
	if err != nil {
		return err
	}
	now := c.now()
	var first error
	for _, v := range views {
		st := Plan(v, now)
		st.AcknowledgedMachines = v.Pool.GetStatus().GetRollout().GetAcknowledgedMachines()
		if proto.Equal(st, v.Pool.GetStatus().GetRollout()) {
			continue
		}
		name := v.Pool.GetMetadata().GetName()
		if st.GetPhase() != v.Pool.GetStatus().GetRollout().GetPhase() {
			c.log().Info("pool rollout phase", "pool", name, "phase", st.GetPhase(), "target", st.GetTargetVersion(), "reason", st.GetReason())
		}
		if err := c.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_UpdatePoolRollout{UpdatePoolRollout: &roostv1.UpdatePoolRollout{
			Pool: name, Status: st}}}); err != nil && first == nil {
			first = fmt.Errorf("pool %s: %w", name, err)
		}
	}
	return first
}

func (c *Controller) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// Admit says whether Machine m may start a reboot now (see Admit). A
// Machine of no Pool (standalone) is always admitted.
func (c *Controller) Admit(_ context.Context, m *roostv1.Machine) (bool, string) {
	pool := m.GetSpec().GetPool()
	if pool == "" {
		return true, ""
	}
	c.admitMu.Lock()
	defer c.admitMu.Unlock()
	views, err := c.Views(pool)
	if err != nil || len(views) == 0 {
		return false, fmt.Sprintf("pool %s: %v", pool, err)
	}
	now := c.now()
	return Admit(views[0], Plan(views[0], now), m.GetMetadata().GetName(), now)
}

// Views reads the Pools (only pool when not empty) and their Machines
// from one consistent read of the FSM, sorted by Pool name. The views
// share messages with the store: read only. Views of an unchanged state
// (same last Raft index) are reused: the planner takes the time apart.
func (c *Controller) Views(pool string) ([]*PoolView, error) {
	r := c.FSM.Reader()
	idx := r.LastIndex()
	c.cacheMu.Lock()
	if c.cacheIndex == idx {
		if pool == "" && c.cacheAll != nil {
			defer c.cacheMu.Unlock()
			return c.cacheAll, nil
		}
		if v := c.cache[pool]; v != nil {
			defer c.cacheMu.Unlock()
			return []*PoolView{v}, nil
		}
	}
	c.cacheMu.Unlock()

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
		v := &PoolView{Pool: p, MaxUnavailable: 1}
		if c.MaxUnavailable != nil {
			v.MaxUnavailable = c.MaxUnavailable(p)
		}
		if rel := revisions.PickRelease(releases, p.GetSpec().GetImageVersion(), p.GetSpec().GetImageChannel()); rel != nil {
			v.Target = rel.GetSpec().GetVersion()
		}
		v.Schedule, v.ScheduleErr = c.sched.get(r, p.GetSpec().GetMaintenanceWindows())
		for _, m := range r.MachinesOfPool(p.GetMetadata().GetName()) {
			if m.GetSpec().GetServer() != "" {
				v.Machines = append(v.Machines, machineView(r, m))
			}
		}
		out = append(out, v)
	}

	c.cacheMu.Lock()
	defer c.cacheMu.Unlock()
	if c.cacheIndex != idx {
		c.cacheIndex, c.cache, c.cacheAll = idx, map[string]*PoolView{}, nil
	}
	if pool == "" {
		c.cacheAll = out
	}
	for _, v := range out {
		c.cache[v.Pool.GetMetadata().GetName()] = v
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
