package revisions

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/leader"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Controller renders a new Revision for every claimed Server whose inputs
// changed. It runs only while this member leads and writes only through
// PutRevision commands, so a render that races with another write fails
// and is redone on the next step from fresh state. A Server whose newest
// Revision failed gets no new one until its inputs change (the hub never
// retries a failed Revision by itself).
type Controller struct {
	IsLeader func() bool
	// FSM is the replicated state read at each step.
	FSM *state.FSM
	// Propose writes a command through Raft (on the leader).
	Propose func(context.Context, *roostv1.Command) error
	// Barrier, if set, runs once per leadership term before the first read.
	Barrier func(context.Context) error
	NewUID  func() string
	// Tick is the reconcile period; default 1s.
	Tick time.Duration
	Log  *slog.Logger

	// term runs Barrier once per leadership term.
	term leader.Term
	// notes holds, per Machine, the last "cannot render" note logged.
	notes map[string]string
}

// Run reconciles until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	tick := c.Tick
	if tick <= 0 {
		tick = time.Second
	}
	leader.RunEvery(ctx, tick, c.Log, "revision controller", c.Step)
}

func (c *Controller) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// Step renders what is due, once, when this member leads. The first error
// is returned after every Machine was tried.
func (c *Controller) Step(ctx context.Context) error {
	c.term.IsLeader, c.term.Barrier = c.IsLeader, c.Barrier
	if ok, err := c.term.Ready(ctx); !ok {
		return err
	}
	if c.notes == nil {
		c.notes = map[string]string{}
	}
	machines, _, err := c.FSM.List("Machine", "")
	if err != nil {
		return err
	}
	var first error
	for _, o := range machines {
		m := o.GetMachine()
		spec, skipped, note, err := c.plan(m)
		name := m.GetMetadata().GetName()
		if err != nil {
			if first == nil {
				first = fmt.Errorf("machine %s: %w", name, err)
			}
			continue
		}
		if spec == nil {
			if note != "" && c.notes[name] != note {
				c.log().Info("revision controller: "+note, "machine", name)
			}
			c.notes[name] = note
			continue
		}
		delete(c.notes, name)
		cmd := &roostv1.Command{Command: &roostv1.Command_PutRevision{PutRevision: &roostv1.PutRevision{
			Revision: &roostv1.Revision{Spec: spec}, Uid: c.NewUID(),
		}}}
		if err := c.Propose(ctx, cmd); err != nil {
			if first == nil {
				first = fmt.Errorf("machine %s: %w", name, err)
			}
			continue
		}
		c.log().Info("revision controller: rendered", "machine", name, "server", spec.GetServer(),
			"revision", spec.GetNumber(), "image", spec.GetImageVersion())
		for _, k := range sortedKeys(skipped) {
			c.log().Warn("revision controller: node label left out", "machine", name, "label", k, "reason", skipped[k])
		}
	}
	return first
}

// plan returns the next Revision for m and the Pool node labels it leaves
// out (with why), or nil and a note saying why none is due.
func (c *Controller) plan(m *roostv1.Machine) (*roostv1.RevisionSpec, map[string]string, string, error) {
	server := m.GetSpec().GetServer()
	if server == "" || m.GetStatus().GetPhase() == state.PhaseDestroyed {
		return nil, nil, "", nil
	}
	in, note, err := c.inputs(m)
	if err != nil || note != "" {
		return nil, nil, note, err
	}
	hash := in.Hash()
	var next int64 = 1
	if latest := c.FSM.LatestRevision(server); latest != nil {
		if latest.GetSpec().GetInputsSha256() == hash && latest.GetSpec().GetMachine() == m.GetMetadata().GetName() {
			return nil, nil, "", nil
		}
		next = latest.GetSpec().GetNumber() + 1
	}
	spec, err := Render(in, next)
	if err != nil {
		return nil, nil, "cannot render: " + err.Error(), nil
	}
	return spec, in.SkippedNodeLabels(), "", nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// inputs gathers what m's Revision is rendered from; a note says what is
// missing.
func (c *Controller) inputs(m *roostv1.Machine) (Inputs, string, error) {
	in := Inputs{Machine: m}
	get := func(kind, name string) (*roostv1.Object, error) {
		if name == "" {
			return nil, nil
		}
		o, err := c.FSM.Get(kind, name)
		if apierror.Code(err) == codes.NotFound {
			return nil, nil
		}
		return o, err
	}
	o, err := get("Server", m.GetSpec().GetServer())
	if err != nil || o == nil {
		return in, "", err
	}
	in.Server = o.GetServer()
	if o, err = get("Pool", m.GetSpec().GetPool()); err != nil {
		return in, "", err
	}
	in.Pool = o.GetPool()
	ps := in.Pool.GetSpec()
	class, profile := ps.GetMachineClass(), ps.GetNetworkProfile()
	if in.Pool == nil { // standalone: the Machine names its own
		class, profile = m.GetSpec().GetMachineClass(), m.GetSpec().GetNetworkProfile()
	}
	if o, err = get("MachineClass", class); err != nil {
		return in, "", err
	}
	in.MachineClass = o.GetMachineClass()
	if o, err = get("NetworkProfile", profile); err != nil {
		return in, "", err
	}
	in.NetworkProfile = o.GetNetworkProfile()
	// A worker joins the Cluster its Machine was claimed for (copied from
	// the Pool), the one the hub hands it bootstrap tokens of.
	if cl := m.GetStatus().GetCluster(); cl != "" {
		if o, err = get("Cluster", cl); err != nil {
			return in, "", err
		}
		if o == nil {
			return in, fmt.Sprintf("Cluster %s (the Machine's) does not exist", cl), nil
		}
		in.Cluster = o.GetCluster()
	}
	rels, _, err := c.FSM.List("ImageRelease", "")
	if err != nil {
		return in, "", err
	}
	in.Release = PickRelease(rels, ps.GetImageVersion(), ps.GetImageChannel())
	if in.Release == nil {
		switch {
		case ps.GetImageVersion() != "":
			return in, fmt.Sprintf("no ImageRelease has version %s (pool %s pins it)", ps.GetImageVersion(), in.Pool.GetMetadata().GetName()), nil
		case ps.GetImageChannel() != "":
			return in, fmt.Sprintf("no ImageRelease is in channel %s (pool %s follows it)", ps.GetImageChannel(), in.Pool.GetMetadata().GetName()), nil
		default:
			return in, "no ImageRelease yet (roostctl image push BUNDLE_DIR)", nil
		}
	}
	return in, "", nil
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
