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
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/roostfleet/roost/hub/controller"
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

// Controller reconciles Pools with replicas: a hub/controller loop keyed
// by Pool name (Run), or one pass over every Pool (Step).
type Controller struct {
	IsLeader func() bool
	// FSM is the replicated state Run watches and reconciles from.
	FSM *state.FSM
	// Read returns the current state for Step; nil reads FSM (ReadFSM).
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
	// Metrics, if set, receives Run's queue metrics.
	Metrics *controller.Metrics
	Log     *slog.Logger

	// waiting holds, per Pool, the last "cannot do anything" note logged,
	// so a shortfall is logged once, not every tick.
	waiting map[string]string
	// short holds the Pools short of replicas as their last Reconcile
	// found them (see shortPools).
	shortMu sync.Mutex
	short   map[string]bool
	// term runs Barrier once per leadership term.
	term leader.Term
}

// Run reconciles each Pool whose objects changed while this member
// leads, until ctx ends. Nothing but the state drives it: no resync.
func (c *Controller) Run(ctx context.Context) {
	(&controller.Controller{
		Name: "pool", Reconcile: c.Reconcile, Watch: c.FSM.Subscribe, IsLeader: c.IsLeader, Barrier: c.Barrier,
		Sources: c.sources(), Metrics: c.Metrics, Log: c.Log,
		// A Pool that cannot claim (or release) yet waits for a change
		// of its Servers or Machines; a failed drain is retried with
		// the key's backoff.
	}).Run(ctx)
}

// sources map changes to the Pools they concern: a Pool's own, its
// Machines', its MachineClass's; and a Server's or a Machine's to every
// Pool short of its replicas (a Server freed or enrolled may be claimed,
// and the ReplicaFailure message counts every Server).
func (c *Controller) sources() []controller.Source {
	return []controller.Source{
		{Kind: "Pool", Keys: controller.ByName},
		{Kind: "Machine", Keys: func(ev *roostv1.WatchEvent) []string {
			keys := c.shortPools()
			if p := ev.GetObject().GetMachine().GetSpec().GetPool(); p != "" {
				keys = append(keys, p)
			}
			return keys
		}},
		{Kind: "Server", Keys: func(*roostv1.WatchEvent) []string { return c.shortPools() }},
		{Kind: "MachineClass", Keys: func(ev *roostv1.WatchEvent) []string {
			var out []string
			for _, o := range c.FSM.Reader().List("Pool") {
				if o.GetPool().GetSpec().GetMachineClass() == resource.NameOf(ev.GetObject()) {
					out = append(out, resource.NameOf(o))
				}
			}
			return out
		}},
	}
}

// shortPools returns the Pools short of replicas, as their last Reconcile
// found them, and those being reconciled: what a Server's or another
// Pool's Machine's change may concern. It reads no state, so a watch event
// costs O(short Pools), not a scan of every Machine (at 10,000 Machines
// that scan, once per event, was a quarter of the leader's CPU). It is
// enough: a Pool becomes short only through its own Machines or spec,
// whose events key it, and its Reconcile marks it short before it reads
// the state, so an event that lands meanwhile keys it again.
func (c *Controller) shortPools() []string {
	c.shortMu.Lock()
	defer c.shortMu.Unlock()
	return slices.Sorted(maps.Keys(c.short))
}

// setShort records whether pool is short of replicas (or being
// reconciled).
func (c *Controller) setShort(pool string, short bool) {
	c.shortMu.Lock()
	defer c.shortMu.Unlock()
	if !short {
		delete(c.short, pool)
		return
	}
	if c.short == nil {
		c.short = map[string]bool{}
	}
	c.short[pool] = true
}

// countMembers counts the Machines of ms that count toward replicas.
func countMembers(ms []*roostv1.Machine) int {
	n := 0
	for _, m := range ms {
		if counts(m) {
			n++
		}
	}
	return n
}

// counts says whether Machine m counts toward its Pool's replicas: not
// Destroyed, and not being replaced (state.MachineRemediating: the
// remediation controller releases it once its replacement is Ready).
func counts(m *roostv1.Machine) bool {
	return m.GetStatus().GetPhase() != state.PhaseDestroyed && !state.Remediating(m)
}

// Reconcile moves Pool pool toward its replicas (one command at most) and
// keeps its ReplicaFailure condition. It reads every Server and Machine
// only when the Pool is short of replicas.
func (c *Controller) Reconcile(ctx context.Context, pool string) (controller.Result, error) {
	c.setShort(pool, true)
	r := c.FSM.Reader()
	o := r.Get("Pool", pool)
	if o == nil {
		c.setShort(pool, false)
		delete(c.waiting, pool)
		return controller.Result{}, nil
	}
	p := o.GetPool()
	snap := Snapshot{Pools: []*roostv1.Pool{p}}
	for _, o := range r.List("MachineClass") {
		snap.MachineClasses = append(snap.MachineClasses, o.GetMachineClass())
	}
	snap.Machines = r.MachinesOfPool(pool)
	short := p.GetSpec().Replicas != nil && countMembers(snap.Machines) < int(p.GetSpec().GetReplicas())
	c.setShort(pool, short)
	if short {
		full, _ := ReadFSM(c.FSM)
		snap.Servers, snap.Machines = full.Servers, full.Machines
	}
	wait, err := c.reconcile(ctx, snap, p)
	return controller.Result{RequeueAfter: wait}, err
}

// drainPoll is how often a Pool whose surplus Machines' Nodes drain asks
// PrepareRelease again.
const drainPoll = 2 * time.Second

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
	read := c.Read
	if read == nil {
		read = func() (Snapshot, error) { return ReadFSM(c.FSM) }
	}
	snap, err := read()
	if err != nil {
		return err
	}
	var first error
	for _, p := range snap.Pools {
		if _, err := c.reconcile(ctx, snap, p); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// reconcile moves Pool p toward its replicas from snap: its
// ReplicaFailure condition, then at most one command. A positive wait
// says to come back then: a release waits for its Nodes' drain.
func (c *Controller) reconcile(ctx context.Context, snap Snapshot, p *roostv1.Pool) (wait time.Duration, err error) {
	pname := p.GetMetadata().GetName()
	var first error
	if err := c.syncReplicaFailure(ctx, p, ReplicaFailure(snap, p)); err != nil {
		first = fmt.Errorf("pool %s: %w", pname, err)
	}
	cmd, note := Plan(snap, p, c.NewName, c.NewUID)
	if cmd == nil {
		c.note(pname, note)
		return 0, first
	}
	if why := c.drainFirst(ctx, snap, cmd); why != "" {
		c.note(pname, why)
		return drainPoll, first
	}
	delete(c.waiting, pname)
	if err := c.Propose(ctx, cmd); err != nil {
		if first == nil {
			first = fmt.Errorf("pool %s: %w", pname, err)
		}
		return 0, first
	}
	c.log().Info("pool controller: "+note, "pool", pname)
	return 0, first
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
		if m.GetSpec().GetPool() == name && counts(m) {
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
