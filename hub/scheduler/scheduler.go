// Package scheduler is the hub's pool controller: for every Pool with
// replicas it claims matching Available Servers until the Pool has that
// many Machines, and releases the newest Machines when it has more; while
// it cannot claim enough, the Pool's ReplicaFailure condition says why. It runs
// only while this member leads, reads the replicated state, and changes it
// only by proposing CreateMachines and DeleteMachines commands, so a step
// that races with another write simply fails and is retried on the next
// tick from fresh state.
package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/roostfleet/roost/hub/leader"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Snapshot is the part of the state one step reads.
type Snapshot struct {
	Pools          []*roostv1.Pool
	MachineClasses []*roostv1.MachineClass
	Servers        []*roostv1.Server
	Machines       []*roostv1.Machine
}

// Controller reconciles Pools with replicas.
type Controller struct {
	IsLeader func() bool
	// Read returns the current state.
	Read func() (Snapshot, error)
	// Propose writes a command through Raft (on the leader).
	Propose func(context.Context, *roostv1.Command) error
	// Barrier, if set, is called once per leadership term before the
	// first read, so a new leader does not plan from a state that lags
	// the log.
	Barrier func(context.Context) error
	// NewName returns a fresh Machine name for pool; NewUID a fresh UID.
	NewName func(pool string) string
	NewUID  func() string
	// PrepareRelease, if set, is asked before surplus Machines are
	// released: it cordons and drains worker Machines' Nodes without
	// waiting (hub/clusters Controller.PrepareRelease), and the release is
	// proposed only once it says done; an error (a drain blocked by a
	// PodDisruptionBudget, a Cluster API down) postpones the release to a
	// later tick.
	PrepareRelease func(context.Context, []*roostv1.Machine) (done bool, err error)
	// Tick is the reconcile period; default 2s.
	Tick time.Duration
	Log  *slog.Logger

	// waiting holds, per Pool, the last "cannot do anything" note logged,
	// so a shortfall is logged once, not every tick.
	waiting map[string]string
	// term runs Barrier once per leadership term.
	term leader.Term
}

// Run reconciles until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	tick := c.Tick
	if tick <= 0 {
		tick = 2 * time.Second
	}
	leader.RunEvery(ctx, tick, c.Log, "pool controller", c.Step)
}

func (c *Controller) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// Step reconciles every Pool once, when this member leads. Each Pool gets
// at most one command; the first error is returned after all Pools were
// tried.
func (c *Controller) Step(ctx context.Context) error {
	c.term.IsLeader, c.term.Barrier = c.IsLeader, c.Barrier
	if ok, err := c.term.Ready(ctx); !ok {
		return err
	}
	snap, err := c.Read()
	if err != nil {
		return err
	}
	var first error
	for _, p := range snap.Pools {
		pname := p.GetMetadata().GetName()
		if err := c.syncReplicaFailure(ctx, p, ReplicaFailure(snap, p)); err != nil && first == nil {
			first = fmt.Errorf("pool %s: %w", pname, err)
		}
		cmd, note := Plan(snap, p, c.NewName, c.NewUID)
		if cmd == nil {
			c.note(pname, note)
			continue
		}
		if wait := c.drainFirst(ctx, snap, cmd); wait != "" {
			c.note(pname, wait)
			continue
		}
		delete(c.waiting, pname)
		if err := c.Propose(ctx, cmd); err != nil {
			if first == nil {
				first = fmt.Errorf("pool %s: %w", p.GetMetadata().GetName(), err)
			}
			continue
		}
		c.log().Info("pool controller: "+note, "pool", p.GetMetadata().GetName())
	}
	return first
}

// note logs why pool waits, once per reason.
func (c *Controller) note(pool, note string) {
	if note != "" && c.waiting[pool] != note {
		c.log().Info("pool controller: "+note, "pool", pool)
	}
	if c.waiting == nil {
		c.waiting = map[string]string{}
	}
	c.waiting[pool] = note
}

// drainFirst asks PrepareRelease about the Machines a DeleteMachines cmd
// releases; it returns why the release must wait, or "" to go ahead.
func (c *Controller) drainFirst(ctx context.Context, snap Snapshot, cmd *roostv1.Command) string {
	dm := cmd.GetDeleteMachines()
	if dm == nil || c.PrepareRelease == nil {
		return ""
	}
	var ms []*roostv1.Machine
	for _, m := range snap.Machines {
		for _, n := range dm.GetNames() {
			if m.GetMetadata().GetName() == n {
				ms = append(ms, m)
			}
		}
	}
	done, err := c.PrepareRelease(ctx, ms)
	switch {
	case err != nil:
		return "surplus Machines wait for their release: " + err.Error()
	case !done:
		return fmt.Sprintf("draining the Nodes of %d surplus Machines before releasing them", len(ms))
	}
	return ""
}

// Plan returns the one command that moves pool toward its replicas (nil
// when there is nothing to do or nothing possible) and a note saying what
// it does or why nothing can be done. Candidates are claimed in name order;
// surplus Machines are released newest first (highest create index, then
// name descending).
func Plan(snap Snapshot, pool *roostv1.Pool, newName func(string) string, newUID func() string) (*roostv1.Command, string) {
	if pool.GetSpec().Replicas == nil {
		return nil, ""
	}
	name := pool.GetMetadata().GetName()
	want := int(pool.GetSpec().GetReplicas())
	var members []*roostv1.Machine
	claimed := map[string]bool{}
	for _, m := range snap.Machines {
		claimed[m.GetSpec().GetServer()] = true
		if m.GetSpec().GetPool() == name && m.GetStatus().GetPhase() != state.PhaseDestroyed {
			members = append(members, m)
		}
	}
	switch have := len(members); {
	case have > want:
		sort.Slice(members, func(i, j int) bool {
			a, b := members[i].GetMetadata(), members[j].GetMetadata()
			if a.GetCreateIndex() != b.GetCreateIndex() {
				return a.GetCreateIndex() > b.GetCreateIndex()
			}
			return a.GetName() > b.GetName()
		})
		dm := &roostv1.DeleteMachines{Pool: name}
		for _, m := range members[:have-want] {
			dm.Names = append(dm.Names, m.GetMetadata().GetName())
		}
		return &roostv1.Command{Command: &roostv1.Command_DeleteMachines{DeleteMachines: dm}},
			fmt.Sprintf("releasing %d surplus Machines (%d > replicas %d)", have-want, have, want)
	case have < want:
		sel, err := selectorOf(snap, pool)
		if err != nil {
			return nil, err.Error()
		}
		var cands []*roostv1.Server
		for _, s := range snap.Servers {
			if claimed[s.GetMetadata().GetName()] || state.ClaimRefusal(s, name, "") != "" || !sel.Matches(s.GetMetadata().GetLabels()) {
				continue
			}
			cands = append(cands, s)
		}
		if len(cands) == 0 {
			return nil, fmt.Sprintf("%d of %d replicas; no matching Available Server", have, want)
		}
		sort.Slice(cands, func(i, j int) bool { return cands[i].GetMetadata().GetName() < cands[j].GetMetadata().GetName() })
		if n := want - have; len(cands) > n {
			cands = cands[:n]
		}
		cm := &roostv1.CreateMachines{ByController: true}
		for _, s := range cands {
			cm.Machines = append(cm.Machines, &roostv1.NewMachine{Name: newName(name), Uid: newUID(), Server: s.GetMetadata().GetName(), Pool: name})
		}
		return &roostv1.Command{Command: &roostv1.Command_CreateMachines{CreateMachines: cm}},
			fmt.Sprintf("claiming %d Servers (%d of %d replicas)", len(cands), have, want)
	}
	return nil, ""
}

func selectorOf(snap Snapshot, pool *roostv1.Pool) (resource.Selector, error) {
	mc := pool.GetSpec().GetMachineClass()
	if mc == "" {
		return nil, nil
	}
	for _, c := range snap.MachineClasses {
		if c.GetMetadata().GetName() == mc {
			sel, err := resource.ParseSelector(c.GetSpec().GetServerSelector())
			if err != nil {
				return nil, fmt.Errorf("MachineClass %s has an invalid server selector: %w", mc, err)
			}
			return sel, nil
		}
	}
	return nil, fmt.Errorf("MachineClass %s does not exist", mc)
}

// ReadFSM reads a Snapshot from one consistent read of the hub's state,
// without copying: the Snapshot shares messages with the store and Plan
// only reads them. (Copying every Server each tick was most of the hub's
// allocation at thousands of agents.) The error is always nil.
func ReadFSM(f *state.FSM) (Snapshot, error) {
	var snap Snapshot
	r := f.Reader()
	for _, o := range r.List("Pool") {
		snap.Pools = append(snap.Pools, o.GetPool())
	}
	for _, o := range r.List("MachineClass") {
		snap.MachineClasses = append(snap.MachineClasses, o.GetMachineClass())
	}
	for _, o := range r.List("Server") {
		snap.Servers = append(snap.Servers, o.GetServer())
	}
	for _, o := range r.List("Machine") {
		snap.Machines = append(snap.Machines, o.GetMachine())
	}
	return snap, nil
}
