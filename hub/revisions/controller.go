package revisions

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/roostfleet/roost/hub/controller"
	"github.com/roostfleet/roost/hub/leader"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Controller renders a new Revision for every claimed Server whose inputs
// changed. It runs only while this member leads and writes only through
// PutRevision commands, so a render that races with another write fails
// and is redone from fresh state. A Server whose newest Revision failed
// gets no new one until its inputs change (the hub never retries a failed
// Revision by itself). Run reconciles one Machine per change of its
// inputs (Reconcile); Step plans every Machine from one snapshot without
// copying and skips, without hashing, every Machine whose inputs are the
// very stored objects its last plan found nothing to write for (see
// memo); a new leadership term starts from an empty memo.
type Controller struct {
	IsLeader func() bool
	// FSM is the replicated state read at each step.
	FSM *state.FSM
	// Propose writes a command through Raft (on the leader).
	Propose func(context.Context, *roostv1.Command) error
	// Barrier, if set, runs once per leadership term before the first read.
	Barrier func(context.Context) error
	NewUID  func() string
	// Metrics, if set, receives Run's queue metrics.
	Metrics *controller.Metrics
	Log     *slog.Logger

	// term runs Barrier once per leadership term.
	term leader.Term
	// notes holds, per Machine, the last "cannot render" note logged;
	// notesMu guards it (Run reconciles several Machines at once).
	notesMu sync.Mutex
	notes   map[string]string
	// memo is what the last Step found; nil before the first Step of a
	// leadership term.
	memo *memo
	// evaluated counts the Machines the last Step planned (not skipped).
	evaluated int
}

// memo lets a Step skip what cannot have changed since the last one.
type memo struct {
	// machines holds, per Machine, the inputs its last plan read when that
	// plan wrote nothing (no Revision due, or a note): while they are the
	// same stored objects the plan would come out the same, so the Machine
	// is skipped without hashing. Every entry was checked against the
	// last Step's snapshot.
	machines map[string]memoKey
	// watch holds the last Step's snapshot's Reader.Watch channel of each
	// of watchedKinds: an unchanged channel means no object of the kind
	// was written since.
	watch [len(watchedKinds)]<-chan struct{}
	// complete: the last Step memoized every Machine (it wrote nothing
	// and nothing failed).
	complete bool
}

// watchedKinds are the kinds a Revision is rendered from.
var watchedKinds = [...]string{"Machine", "Server", "Pool", "MachineClass", "NetworkProfile", "Cluster", "ImageRelease", "Revision", "Extension"}

const (
	watchServer   = 1
	watchRevision = 7
)

// memoKey identifies the inputs one plan of a Machine read: each stored
// object (nil when absent or not read) and its modify index. The state
// never modifies a stored message (a write stores a new one, so a
// deleted and re-created object, or a restored snapshot, is a different
// message), and every write sets the modify index: a key is equal only
// for the same object versions.
type memoKey struct {
	machine *roostv1.Machine
	server  *roostv1.Server
	pool    *roostv1.Pool
	class   *roostv1.MachineClass
	profile *roostv1.NetworkProfile
	cluster *roostv1.Cluster
	release *roostv1.ImageRelease
	// latest is the Server's newest Revision, if latestRead.
	latest     *roostv1.Revision
	latestRead bool
	indexes    [8]uint64
	// extensions is Inputs.extensionsKey: the resolved Extensions, or why
	// they could not be.
	extensions string
}

func newMemoKey(in Inputs, latest *roostv1.Revision, latestRead bool) memoKey {
	return memoKey{machine: in.Machine, server: in.Server, pool: in.Pool, class: in.MachineClass,
		profile: in.NetworkProfile, cluster: in.Cluster, release: in.Release, latest: latest, latestRead: latestRead,
		indexes: [8]uint64{in.Machine.GetMetadata().GetModifyIndex(), in.Server.GetMetadata().GetModifyIndex(),
			in.Pool.GetMetadata().GetModifyIndex(), in.MachineClass.GetMetadata().GetModifyIndex(),
			in.NetworkProfile.GetMetadata().GetModifyIndex(), in.Cluster.GetMetadata().GetModifyIndex(),
			in.Release.GetMetadata().GetModifyIndex(), latest.GetMetadata().GetModifyIndex()}, extensions: in.extensionsKey}
}

// Run renders, while this member leads and until ctx ends, for each
// Machine whose inputs changed: a hub/controller loop keyed by Machine
// name, without resync (only the state drives it).
func (c *Controller) Run(ctx context.Context) {
	(&controller.Controller{
		Name: "revisions", Reconcile: c.Reconcile, Watch: c.FSM.Subscribe, IsLeader: c.IsLeader, Barrier: c.Barrier,
		Sources: c.sources(), Metrics: c.Metrics, Log: c.Log,
		// A render costs little CPU and then waits for its Raft commit:
		// one at a time, a fleet of 10,000 claimed at once took over an
		// hour to get its first Revisions. Machines are independent.
		Workers: RenderWorkers,
	}).Run(ctx)
}

// RenderWorkers is how many Machines Run renders for at once.
const RenderWorkers = 8

// setNote records note as Machine name's last note ("" forgets it) and
// says whether it changed.
func (c *Controller) setNote(name, note string) bool {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	if c.notes == nil {
		c.notes = map[string]string{}
	}
	changed := c.notes[name] != note
	if note == "" {
		delete(c.notes, name)
	} else {
		c.notes[name] = note
	}
	return changed
}

// sources map the changes of what a Revision is rendered from to the
// Machines they concern: a Machine's own, its Server's and the Server's
// Revisions' (through the Machine holding the Server), its Pool's, its
// MachineClass's and NetworkProfile's (its Pool's, or its own when
// standalone), its Cluster's, an ImageRelease's (the Machines of the
// Pools it may be the pick of), and an Extension's (every Machine).
func (c *Controller) sources() []controller.Source {
	machineOf := func(server string) []string {
		if m := c.FSM.Reader().MachineOf(server); m != nil {
			return []string{m.GetMetadata().GetName()}
		}
		return nil
	}
	// ofPools returns the Machines of the Pools pool selects, and the
	// standalone Machines machine selects.
	ofPools := func(pool func(*roostv1.PoolSpec) bool, machine func(*roostv1.MachineSpec) bool) []string {
		r := c.FSM.Reader()
		var out []string
		for _, o := range r.List("Pool") {
			if pool(o.GetPool().GetSpec()) {
				for _, m := range r.MachinesOfPool(resource.NameOf(o)) {
					out = append(out, m.GetMetadata().GetName())
				}
			}
		}
		for _, o := range r.List("Machine") {
			if m := o.GetMachine(); m.GetSpec().GetPool() == "" && machine(m.GetSpec()) {
				out = append(out, m.GetMetadata().GetName())
			}
		}
		return out
	}
	return []controller.Source{
		{Kind: "Machine", Keys: controller.ByName},
		{Kind: "Server", Keys: func(ev *roostv1.WatchEvent) []string { return machineOf(resource.NameOf(ev.GetObject())) }},
		{Kind: "Revision", Keys: func(ev *roostv1.WatchEvent) []string {
			return machineOf(ev.GetObject().GetRevision().GetSpec().GetServer())
		}},
		{Kind: "Pool", Keys: func(ev *roostv1.WatchEvent) []string {
			var out []string
			for _, m := range c.FSM.Reader().MachinesOfPool(resource.NameOf(ev.GetObject())) {
				out = append(out, m.GetMetadata().GetName())
			}
			return out
		}},
		{Kind: "MachineClass", Keys: func(ev *roostv1.WatchEvent) []string {
			name := resource.NameOf(ev.GetObject())
			return ofPools(func(p *roostv1.PoolSpec) bool { return p.GetMachineClass() == name },
				func(m *roostv1.MachineSpec) bool { return m.GetMachineClass() == name })
		}},
		{Kind: "NetworkProfile", Keys: func(ev *roostv1.WatchEvent) []string {
			name := resource.NameOf(ev.GetObject())
			return ofPools(func(p *roostv1.PoolSpec) bool { return p.GetNetworkProfile() == name },
				func(m *roostv1.MachineSpec) bool { return m.GetNetworkProfile() == name })
		}},
		{Kind: "Cluster", Keys: func(ev *roostv1.WatchEvent) []string {
			name := resource.NameOf(ev.GetObject())
			var out []string
			for _, o := range c.FSM.Reader().List("Machine") {
				if m := o.GetMachine(); m.GetStatus().GetCluster() == name {
					out = append(out, m.GetMetadata().GetName())
				}
			}
			return out
		}},
		{Kind: "ImageRelease", Keys: func(ev *roostv1.WatchEvent) []string {
			rel := ev.GetObject().GetImageRelease().GetSpec()
			// rel may be (or have been, before its channels changed) the
			// pick of every Pool but those pinned to another version.
			picks := func(p *roostv1.PoolSpec) bool {
				return p.GetImageVersion() == "" || p.GetImageVersion() == rel.GetVersion()
			}
			return ofPools(picks, func(*roostv1.MachineSpec) bool { return true })
		}},
		{Kind: "Extension", Keys: func(*roostv1.WatchEvent) []string { return controller.Names(c.FSM.Reader().List("Machine")) }},
	}
}

func (c *Controller) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// newTerm is the Barrier leader.Term runs once per leadership term: it
// forgets the memo, then runs c.Barrier.
func (c *Controller) newTerm(ctx context.Context) error {
	c.memo = nil
	if c.Barrier != nil {
		return c.Barrier(ctx)
	}
	return nil
}

// Step renders what is due, once, when this member leads. The first error
// is returned after every Machine was tried. It reads one snapshot of the
// state without copying (state.Reader) and skips a Machine whose inputs
// are the very objects of its last plan that wrote nothing.
func (c *Controller) Step(ctx context.Context) error {
	c.term.IsLeader, c.term.Barrier = c.IsLeader, c.newTerm
	if ok, err := c.term.Ready(ctx); !ok {
		c.memo = nil
		return err
	}
	if c.notes == nil {
		c.notes = map[string]string{}
	}
	c.evaluated = 0
	v := newView(c.FSM.Reader())
	var watch [len(watchedKinds)]<-chan struct{}
	for i, k := range watchedKinds {
		watch[i] = v.r.Watch(k)
	}
	mm := c.memo
	if mm == nil {
		mm = &memo{machines: map[string]memoKey{}}
		c.memo = mm
	} else {
		if mm.complete && mm.watch == watch {
			return nil // nothing a Revision is rendered from was written
		}
		// The memo's Servers (Revisions) are the current ones when no
		// Server (Revision) was written since the last Step.
		v.sameServers = mm.watch[watchServer] == watch[watchServer]
		v.sameRevisions = mm.watch[watchRevision] == watch[watchRevision]
	}
	mm.watch, mm.complete = watch, false
	machines := v.r.List("Machine")
	var first error
	kept := 0
	for _, o := range machines {
		m := o.GetMachine()
		name := m.GetMetadata().GetName()
		old, ok := mm.machines[name]
		var prev *memoKey
		if ok && old.machine == m && old.indexes[0] == m.GetMetadata().GetModifyIndex() {
			prev = &old
		}
		key, wrote, err := c.reconcileMachine(ctx, v, m, prev)
		if err != nil && first == nil {
			first = err
		}
		switch {
		case !wrote && ok && old == key:
			kept++
		case !wrote:
			c.evaluated++
			mm.machines[name] = key
			kept++
		default:
			c.evaluated++
			// Not memoized: the next Step reads the Revision written (or
			// renders again when the write failed).
			delete(mm.machines, name)
		}
	}
	if len(mm.machines) > kept { // Machines that are gone
		live := make(map[string]bool, len(machines))
		for _, o := range machines {
			live[o.GetMachine().GetMetadata().GetName()] = true
		}
		for name := range mm.machines {
			if !live[name] {
				delete(mm.machines, name)
			}
		}
	}
	mm.complete = first == nil && kept == len(machines)
	return first
}

// Reconcile renders Machine machine's next Revision when one is due
// (one PutRevision command), or records why none can be.
func (c *Controller) Reconcile(ctx context.Context, machine string) (controller.Result, error) {
	v := newView(c.FSM.Reader())
	o := v.r.Get("Machine", machine)
	if o == nil {
		c.setNote(machine, "")
		return controller.Result{}, nil
	}
	_, _, err := c.reconcileMachine(ctx, v, o.GetMachine(), nil)
	return controller.Result{}, err
}

// reconcileMachine plans m from v (prev as for view.gather): it proposes
// its next Revision when one is due (wrote), or records why none can be.
// key identifies the inputs the plan read; when it equals prev's, nothing
// was planned or written.
func (c *Controller) reconcileMachine(ctx context.Context, v *view, m *roostv1.Machine, prev *memoKey) (key memoKey, wrote bool, err error) {
	name := m.GetMetadata().GetName()
	in, latest, latestRead, note := v.gather(m, prev)
	key = newMemoKey(in, latest, latestRead)
	if prev != nil && *prev == key {
		return key, false, nil
	}
	spec, skipped, note := plan(in, latest, note)
	if spec == nil {
		if c.setNote(name, note) && note != "" {
			c.log().Info("revision controller: "+note, "machine", name)
		}
		if err := c.recordWaiting(ctx, m, note); err != nil {
			return key, false, fmt.Errorf("machine %s: %w", name, err)
		}
		return key, false, nil
	}
	c.setNote(name, "")
	cmd := &roostv1.Command{Command: &roostv1.Command_PutRevision{PutRevision: &roostv1.PutRevision{
		Revision: &roostv1.Revision{Spec: spec}, Uid: c.NewUID(),
	}}}
	if err := c.Propose(ctx, cmd); err != nil {
		return key, true, fmt.Errorf("machine %s: %w", name, err)
	}
	c.log().Info("revision controller: rendered", "machine", name, "server", spec.GetServer(),
		"revision", spec.GetNumber(), "image", spec.GetImageVersion())
	for _, k := range slices.Sorted(maps.Keys(skipped)) {
		c.log().Warn("revision controller: node label left out", "machine", name, "label", k, "reason", skipped[k])
	}
	return key, true, nil
}

// plan returns the next Revision for in.Machine and the Pool node labels
// it leaves out (with why), or nil and a note saying why none is due.
// latest is the Server's newest Revision; note is gather's.
func plan(in Inputs, latest *roostv1.Revision, note string) (*roostv1.RevisionSpec, map[string]string, string) {
	m := in.Machine
	if m.GetSpec().GetServer() == "" || m.GetStatus().GetPhase() == state.PhaseDestroyed || note != "" {
		return nil, nil, note
	}
	hash := in.Hash()
	var next int64 = 1
	if latest != nil {
		if h := latest.GetSpec().GetInputsSha256(); (h == hash || h == in.LegacyHash()) && latest.GetSpec().GetMachine() == m.GetMetadata().GetName() {
			return nil, nil, ""
		}
		next = latest.GetSpec().GetNumber() + 1
	}
	spec, err := Render(in, next)
	if err != nil {
		return nil, nil, "cannot render: " + err.Error()
	}
	return spec, in.SkippedNodeLabels(), ""
}

// view reads one snapshot of the state for one Step, looking each shared
// object (Pool, MachineClass, NetworkProfile, Cluster) up once and
// picking the release once per (version, channel). What it returns is
// shared with the store and must not be modified.
type view struct {
	r      *state.Reader
	objs   map[kindName]*roostv1.Object
	rels   []*roostv1.Object
	listed bool
	picked map[kindName]*roostv1.ImageRelease
	// sameServers (sameRevisions): no Server (Revision) was written since
	// the snapshot the memo was checked against.
	sameServers, sameRevisions bool
	// exts caches what each MachineClass's extensions resolve to, and
	// allExts holds every Extension (read at the first use).
	exts    map[*roostv1.MachineClass]resolved
	allExts []*roostv1.Extension
	// paths caches the upgrade paths to each target release.
	paths map[*roostv1.ImageRelease]*UpgradePaths
}

// kindName keys view's caches: a kind and a name, or a pinned version
// and a channel.
type kindName struct{ kind, name string }

func newView(r *state.Reader) *view {
	return &view{r: r, objs: map[kindName]*roostv1.Object{}, picked: map[kindName]*roostv1.ImageRelease{}}
}

// get returns the object kind/name, or nil (also for name "").
func (v *view) get(kind, name string) *roostv1.Object {
	if name == "" {
		return nil
	}
	k := kindName{kind, name}
	o, ok := v.objs[k]
	if !ok {
		o = v.r.Get(kind, name)
		v.objs[k] = o
	}
	return o
}

// release is PickRelease over every ImageRelease.
func (v *view) release(version, channel string) *roostv1.ImageRelease {
	k := kindName{version, channel}
	r, ok := v.picked[k]
	if !ok {
		if !v.listed {
			v.rels, v.listed = v.r.List("ImageRelease"), true
		}
		r = PickRelease(v.rels, version, channel)
		v.picked[k] = r
	}
	return r
}

// route is the release a Server running version moves to on its way to
// target (UpgradePaths.Next), and why it is not target; the paths are
// computed once per view and target.
func (v *view) route(target *roostv1.ImageRelease, version string) (*roostv1.ImageRelease, string) {
	if len(target.GetSpec().GetUpgradesFrom()) == 0 || version == "" {
		return target, ""
	}
	p, ok := v.paths[target]
	if !ok {
		if !v.listed {
			v.rels, v.listed = v.r.List("ImageRelease"), true
		}
		p = NewUpgradePaths(v.rels, target)
		if v.paths == nil {
			v.paths = map[*roostv1.ImageRelease]*UpgradePaths{}
		}
		v.paths[target] = p
	}
	return p.Next([]string{version})
}

// gather returns what m's Revision is rendered from, as far as it read
// it, and (latestRead) the Server's newest Revision when a plan needs it;
// a note says what is missing. prev, if not nil, is m's memo entry (of
// this very m): its Server and newest Revision are taken from it instead
// of the state when no object of their kind was written since.
func (v *view) gather(m *roostv1.Machine, prev *memoKey) (in Inputs, latest *roostv1.Revision, latestRead bool, note string) {
	server := m.GetSpec().GetServer()
	if server == "" || m.GetStatus().GetPhase() == state.PhaseDestroyed {
		return Inputs{Machine: m}, nil, false, ""
	}
	in, note = v.inputs(m, prev)
	if note != "" {
		return in, nil, false, note
	}
	if prev != nil && prev.latestRead && v.sameRevisions {
		return in, prev.latest, true, ""
	}
	return in, v.r.LatestRevision(server), true, ""
}

// inputs gathers what m's Revision is rendered from; a note says what is
// missing (also when m's Server does not exist: only in.Machine is set
// then). prev is as for gather.
func (v *view) inputs(m *roostv1.Machine, prev *memoKey) (Inputs, string) {
	in := Inputs{Machine: m}
	if prev != nil && v.sameServers {
		in.Server = prev.server
	} else {
		in.Server = v.r.Get("Server", m.GetSpec().GetServer()).GetServer()
	}
	if in.Server == nil {
		return in, fmt.Sprintf("Server %s (the Machine's) does not exist", m.GetSpec().GetServer())
	}
	in.Pool = v.get("Pool", m.GetSpec().GetPool()).GetPool()
	ps := in.Pool.GetSpec()
	class, profile := ps.GetMachineClass(), ps.GetNetworkProfile()
	if in.Pool == nil { // standalone: the Machine names its own
		class, profile = m.GetSpec().GetMachineClass(), m.GetSpec().GetNetworkProfile()
	}
	in.MachineClass = v.get("MachineClass", class).GetMachineClass()
	in.NetworkProfile = v.get("NetworkProfile", profile).GetNetworkProfile()
	// A worker joins the Cluster its Machine was claimed for (copied from
	// the Pool), the one the hub hands it bootstrap tokens of.
	if cl := m.GetStatus().GetCluster(); cl != "" {
		in.Cluster = v.get("Cluster", cl).GetCluster()
		if in.Cluster == nil {
			return in, fmt.Sprintf("Cluster %s (the Machine's) does not exist", cl)
		}
	}
	in.Release = v.release(ps.GetImageVersion(), ps.GetImageChannel())
	if in.Release != nil {
		// A jump the release does not upgrade from goes through an
		// intermediate release, one reboot at a time.
		next, note := v.route(in.Release, in.Server.GetStatus().GetImageVersion())
		if next == nil {
			return in, note
		}
		in.Release = next
	}
	if in.Release == nil {
		switch {
		case ps.GetImageVersion() != "":
			return in, fmt.Sprintf("no ImageRelease has version %s (pool %s pins it)", ps.GetImageVersion(), in.Pool.GetMetadata().GetName())
		case ps.GetImageChannel() != "":
			return in, fmt.Sprintf("no ImageRelease is in channel %s (pool %s follows it)", ps.GetImageChannel(), in.Pool.GetMetadata().GetName())
		default:
			return in, "no ImageRelease yet (roostctl image push BUNDLE_DIR)"
		}
	}
	return in, v.extensions(&in)
}

// PickRelease chooses the ImageRelease with version, else the newest (by
// create index) in channel, else the newest of all.
func PickRelease(objs []*roostv1.Object, version, channel string) *roostv1.ImageRelease {
	var rels []*roostv1.ImageRelease
	for _, o := range objs {
		r := o.GetImageRelease()
		switch {
		case version != "":
			if r.GetSpec().GetVersion() == version {
				return r
			}
			continue
		case channel != "":
			ok := false
			for _, ch := range r.GetSpec().GetChannels() {
				ok = ok || ch == channel
			}
			if !ok {
				continue
			}
		}
		rels = append(rels, r)
	}
	if version != "" || len(rels) == 0 {
		return nil
	}
	sort.Slice(rels, func(i, j int) bool {
		return rels[i].GetMetadata().GetCreateIndex() > rels[j].GetMetadata().GetCreateIndex()
	})
	return rels[0]
}

// recordWaiting writes note, why no Revision is rendered for m, as the
// message of m's Provisioned condition while that waits for a Revision
// (SetConditions), so `roostctl describe machine` says what the hub knows;
// only when the message differs.
func (c *Controller) recordWaiting(ctx context.Context, m *roostv1.Machine, note string) error {
	cur := state.FindCondition(m.GetStatus().GetConditions(), state.MachineProvisioned)
	if note == "" || cur.GetStatus() != "False" || cur.GetReason() != state.ReasonWaitingForRevision || cur.GetMessage() == note {
		return nil
	}
	return c.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_SetConditions{SetConditions: &roostv1.SetConditions{
		Kind: "Machine", Name: m.GetMetadata().GetName(),
		Set: []*roostv1.Condition{{Type: state.MachineProvisioned, Status: "False", Reason: state.ReasonWaitingForRevision, Message: note}},
	}}})
}
