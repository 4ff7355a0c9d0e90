package agentconn

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// DesiredState is what the hub wants Server name to run now: its newest
// Revision while a Machine holds it (generation = the Raft index of the
// Revision's last change), else revision 0 and generation 0; for a worker
// whose Node is not registered yet, the newest bootstrap token the leader
// created for its Machine (kubelet_bootstrap). A Server that is Cleaning
// (no Machine holds it) is asked to wipe its disks (cleaning).
func (r *Registry) DesiredState(name string) *roostv1.DesiredState {
	rev, idx := r.fsm.DesiredRevision(name)
	if rev == nil {
		d := &roostv1.DesiredState{}
		if o := r.fsm.Reader().Get("Server", name); o != nil {
			d.Cleaning = state.CleaningInstruction(o.GetServer())
		}
		return d
	}
	return &roostv1.DesiredState{
		Generation: int64(idx), Revision: rev.GetSpec().GetNumber(), Spec: rev.GetSpec(),
		Failed:           rev.GetStatus().GetPhase() == state.RevisionFailed,
		KubeletBootstrap: r.kubeletBootstrap(name),
	}
}

// kubeletBootstrap is the bootstrap token of Server name's worker Machine
// that expires last, with its Cluster's API endpoint; nil for standalone
// Machines, registered Nodes and when the leader has created none.
func (r *Registry) kubeletBootstrap(name string) *roostv1.KubeletBootstrap {
	m := r.fsm.MachineOf(name)
	if m == nil || m.GetStatus().GetCluster() == "" || m.GetStatus().GetNodeName() != "" {
		return nil
	}
	var newest *roostv1.BootstrapToken
	for _, t := range r.fsm.BootstrapTokens() {
		if t.GetMachine() == m.GetMetadata().GetName() && t.GetCluster() == m.GetStatus().GetCluster() &&
			t.GetExpiresAt().AsTime().After(r.now()) {
			newest = t // sorted by expiry
		}
	}
	if newest == nil {
		return nil
	}
	o, err := r.fsm.Get("Cluster", newest.GetCluster())
	if err != nil {
		return nil
	}
	return &roostv1.KubeletBootstrap{ApiServer: o.GetCluster().GetSpec().GetApiEndpoint(),
		Token: newest.GetTokenId() + "." + newest.GetSecret(), ExpiresAt: newest.GetExpiresAt()}
}

// Push sends Server name's desired state on st unless the same was sent on
// it already. The error is the stream's.
func (r *Registry) Push(name string, st *Stream) error {
	d := r.DesiredState(name)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.last != nil && proto.Equal(st.last, d) {
		return nil
	}
	if err := st.send(&roostv1.HubMessage{Message: &roostv1.HubMessage_Desired{Desired: d}}); err != nil {
		return err
	}
	st.last = d
	return nil
}

// Run watches Revisions and Machines and pushes each change to the
// affected agent's stream, until ctx ends. After a watch ends (snapshot
// restore, falling behind) it re-subscribes and re-checks every stream.
// A failed push is left to the stream's own loop, which sees the broken
// stream.
func (r *Registry) Run(ctx context.Context) {
	for ctx.Err() == nil {
		r.watch(ctx)
		for n, st := range r.all() {
			go r.Push(n, st) //nolint:errcheck // the stream's own loop sees a broken stream
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// watch pushes the desired state of the Server each Revision, Machine and
// Server event is about (Push sends only what changed), until ctx ends or a subscription closes.
func (r *Registry) watch(ctx context.Context) {
	subs := make([]*state.Subscription, 0, 3)
	for _, kind := range []string{"Revision", "Machine", "Server"} {
		sub, err := r.fsm.Subscribe(kind, r.fsm.LastIndex())
		if err != nil {
			r.log.Warn("desired-state push: watch failed", "kind", kind, "err", err)
			for _, o := range subs {
				o.Close()
			}
			return
		}
		subs = append(subs, sub)
	}
	defer func() {
		for _, o := range subs {
			o.Close()
		}
	}()
	for {
		var ev *roostv1.WatchEvent
		var ok bool
		select {
		case <-ctx.Done():
			return
		case ev, ok = <-subs[0].Events():
		case ev, ok = <-subs[1].Events():
		case ev, ok = <-subs[2].Events():
		}
		if !ok {
			return
		}
		var server string
		switch o := ev.GetObject().GetKind().(type) {
		case *roostv1.Object_Revision:
			server = o.Revision.GetSpec().GetServer()
		case *roostv1.Object_Machine:
			server = o.Machine.GetSpec().GetServer()
		case *roostv1.Object_Server:
			server = o.Server.GetMetadata().GetName() // a cleaning started or retried
		}
		if st := r.get(server); st != nil {
			go r.Push(server, st) //nolint:errcheck // the stream's own loop sees a broken stream
		}
	}
}
