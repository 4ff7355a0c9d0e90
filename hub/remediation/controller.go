package remediation

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/roostfleet/roost/hub/controller"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// drainPoll is how often a release waiting for its Node's drain asks
// PrepareRelease again.
const drainPoll = 2 * time.Second

// Controller replaces failed Machines of Pools with replicas (see the
// package doc): a hub/controller loop keyed by Pool name.
type Controller struct {
	IsLeader func() bool
	FSM      *state.FSM
	// Propose writes a command through Raft (on the leader).
	Propose func(context.Context, *roostv1.Command) error
	// Barrier, if set, runs once per leadership term before the first read.
	Barrier func(context.Context) error
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// PrepareRelease, if set, is asked before a replaced Machine is
	// released: it drains worker Machines' Nodes without waiting (hub/
	// clusters Controller.PrepareRelease); the release is proposed once it
	// says done.
	PrepareRelease func(context.Context, []*roostv1.Machine) (done bool, err error)
	Metrics        *controller.Metrics
	Log            *slog.Logger
}

// Run reconciles each Pool whose Machines, Servers or Leases changed
// while this member leads; a Machine's unhealthyTimeout requeues its Pool
// when it runs out.
func (c *Controller) Run(ctx context.Context) {
	(&controller.Controller{
		Name: "remediation", Reconcile: c.Reconcile, Watch: c.FSM.Subscribe, IsLeader: c.IsLeader, Barrier: c.Barrier,
		Sources: poolSources(c.FSM, true), Metrics: c.Metrics, Log: c.Log,
	}).Run(ctx)
}

// Step reconciles every Pool once; the first error is returned after
// every Pool was tried. It does not check leadership.
func (c *Controller) Step(ctx context.Context) error {
	var first error
	for _, name := range controller.Names(c.FSM.Reader().List("Pool")) {
		if _, err := c.Reconcile(ctx, name); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Reconcile replaces Pool pool's failed Machines: it releases a replaced
// Machine that may go, marks failed Machines Remediating within
// maxInFlight unless the Pool is frozen, and keeps the Pool's Remediating
// condition. RequeueAfter is when the next Machine's unhealthyTimeout
// runs out, or the drain poll of a release.
func (c *Controller) Reconcile(ctx context.Context, pool string) (controller.Result, error) {
	t := now(c.Now)
	v := readPool(c.FSM.Reader(), pool, t)
	if v == nil {
		return controller.Result{}, nil
	}
	p := v.pool
	if p.GetSpec().Replicas == nil {
		return controller.Result{}, c.syncPoolCondition(ctx, v, nil)
	}
	pol := PolicyOf(p)
	replicas := int(p.GetSpec().GetReplicas())
	var held, kept []member
	readyKept := 0
	for _, mb := range v.members {
		if mb.remediating() {
			held = append(held, mb)
			continue
		}
		kept = append(kept, mb)
		if mb.ready() {
			readyKept++
		}
	}

	// A Machine marked for Unreachable that is Ready again before any
	// Server was claimed for it (none matched) is kept: the mark is
	// cleared.
	if len(kept) < replicas {
		for _, mb := range held {
			mark := state.FindCondition(mb.m.GetStatus().GetConditions(), state.MachineRemediating)
			if mark.GetReason() != state.ReasonUnreachable || mb.unreachable() || !mb.ready() {
				continue
			}
			if err := c.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_SetConditions{SetConditions: &roostv1.SetConditions{
				Kind: "Machine", Name: mb.name(), Clear: []string{state.MachineRemediating}}}}); err != nil {
				return controller.Result{}, fmt.Errorf("pool %s: keeping Machine %s: %w", pool, mb.name(), err)
			}
			logOf(c.Log).Info("a Machine marked for replacement is Ready again before a Server was claimed for it: kept", "pool", pool, "machine", mb.name())
			return controller.Result{}, nil // the change reconciles the Pool again
		}
	}

	// A replaced Machine is released once its Server is reachable (the
	// release path needs its agent) and the Pool has its replicas Ready.
	if readyKept >= replicas {
		for _, mb := range held {
			if mb.unreachable() {
				continue
			}
			if wait, err := c.release(ctx, pool, mb); wait > 0 || err != nil {
				return controller.Result{RequeueAfter: wait}, err
			}
			return controller.Result{}, nil // the release changes the Pool: reconciled again
		}
	}

	// Replacements under way: slots the pool controller has not claimed
	// yet, and claimed Machines not yet Ready.
	inFlight := max(0, replicas-len(kept))
	for _, mb := range kept {
		if mb.installing() {
			inFlight++
		}
	}
	type candidate struct {
		mb          member
		reason, msg string
		due         time.Time
	}
	var cands []candidate
	var next time.Time
	for _, mb := range kept {
		reason, msg, due := mb.failure(pol)
		switch {
		case reason == "":
		case due.After(t):
			if next.IsZero() || due.Before(next) {
				next = due
			}
		default:
			cands = append(cands, candidate{mb, reason, msg, due})
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		if !cands[i].due.Equal(cands[j].due) {
			return cands[i].due.Before(cands[j].due)
		}
		return cands[i].mb.name() < cands[j].mb.name()
	})
	res := controller.Result{}
	if !next.IsZero() {
		res.RequeueAfter = next.Sub(t)
	}
	var marked []member
	if len(cands) > 0 {
		frozenReason, _ := freeze(v, pol)
		switch {
		case Frozen(p) || frozenReason != "":
			// Frozen: nothing is replaced; the unfreeze (a Pool
			// change) reconciles again.
		case pol.MaxInFlight == 0:
		default:
			for _, cd := range cands {
				if inFlight >= pol.MaxInFlight {
					break
				}
				cond := &roostv1.Condition{Type: state.MachineRemediating, Status: "True", Reason: cd.reason,
					Message: cd.msg + "; replaced by another Server of the pool, released once reachable and the pool has its replicas Ready"}
				if err := c.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_SetConditions{SetConditions: &roostv1.SetConditions{
					Kind: "Machine", Name: cd.mb.name(), Set: []*roostv1.Condition{cond}}}}); err != nil {
					return res, fmt.Errorf("pool %s: marking Machine %s Remediating: %w", pool, cd.mb.name(), err)
				}
				logOf(c.Log).Info("replacing a failed Machine", "pool", pool, "machine", cd.mb.name(), "reason", cd.reason, "message", cd.msg)
				inFlight++
				marked = append(marked, member{m: withCondition(cd.mb.m, cond), server: cd.mb.server})
			}
		}
	}
	return res, c.syncPoolCondition(ctx, v, append(held, marked...))
}

// withCondition is a shallow view of m carrying cond, for the Pool's
// message before the store has it.
func withCondition(m *roostv1.Machine, cond *roostv1.Condition) *roostv1.Machine {
	st := &roostv1.MachineStatus{Conditions: append(append([]*roostv1.Condition(nil), m.GetStatus().GetConditions()...), cond)}
	return &roostv1.Machine{Metadata: m.GetMetadata(), Spec: m.GetSpec(), Status: st}
}

// release releases replaced Machine mb, its Node drained first; wait > 0
// says to come back then (the drain runs).
func (c *Controller) release(ctx context.Context, pool string, mb member) (wait time.Duration, err error) {
	if c.PrepareRelease != nil {
		done, err := c.PrepareRelease(ctx, []*roostv1.Machine{mb.m})
		if err != nil {
			logOf(c.Log).Info("a replaced Machine waits for its release", "pool", pool, "machine", mb.name(), "err", err)
			return drainPoll, nil
		}
		if !done {
			return drainPoll, nil
		}
	}
	if err := c.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_DeleteMachines{DeleteMachines: &roostv1.DeleteMachines{
		Pool: pool, Names: []string{mb.name()}}}}); err != nil {
		return 0, fmt.Errorf("pool %s: releasing replaced Machine %s: %w", pool, mb.name(), err)
	}
	logOf(c.Log).Info("released a replaced Machine", "pool", pool, "machine", mb.name())
	return 0, nil
}

// syncPoolCondition keeps Pool v's Remediating condition: True naming
// each Machine of held and why, absent when held is empty.
func (c *Controller) syncPoolCondition(ctx context.Context, v *poolView, held []member) error {
	cur := state.FindCondition(v.pool.GetStatus().GetConditions(), state.PoolRemediating)
	sc := &roostv1.SetConditions{Kind: "Pool", Name: v.pool.GetMetadata().GetName()}
	if len(held) == 0 {
		if cur == nil {
			return nil
		}
		sc.Clear = []string{state.PoolRemediating}
	} else {
		sort.Slice(held, func(i, j int) bool { return held[i].name() < held[j].name() })
		parts := make([]string, 0, len(held))
		for _, mb := range held {
			c := state.FindCondition(mb.m.GetStatus().GetConditions(), state.MachineRemediating)
			parts = append(parts, fmt.Sprintf("%s (%s: %s)", mb.name(), c.GetReason(), strings.SplitN(c.GetMessage(), ";", 2)[0]))
		}
		msg := fmt.Sprintf("replacing %d Machine(s): %s", len(held), strings.Join(parts, "; "))
		if cur.GetStatus() == "True" && cur.GetMessage() == msg {
			return nil
		}
		sc.Set = []*roostv1.Condition{{Type: state.PoolRemediating, Status: "True", Reason: "Replacing", Message: msg}}
	}
	return c.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_SetConditions{SetConditions: sc}})
}
