package api

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// desiredStreams pushes DesiredState to the agents connected to this
// member. A stream registers itself; one watch on Revisions (RunDesiredPush)
// sends each change to the Server's stream, so a stream needs no goroutine
// of its own for it.
type desiredStreams struct {
	mu      sync.Mutex
	streams map[string]*agentStream
}

// agentStream serialises sends on one agent stream (gRPC allows one Send
// at a time) and remembers the last desired state sent.
type agentStream struct {
	mu   sync.Mutex
	send func(*roostv1.HubMessage) error
	last *roostv1.DesiredState
}

func (d *desiredStreams) add(name string, as *agentStream) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.streams == nil {
		d.streams = map[string]*agentStream{}
	}
	d.streams[name] = as
}

func (d *desiredStreams) remove(name string, as *agentStream) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.streams[name] == as {
		delete(d.streams, name)
	}
}

func (d *desiredStreams) get(name string) *agentStream {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.streams[name]
}

func (d *desiredStreams) names() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.streams))
	for n := range d.streams {
		out = append(out, n)
	}
	return out
}

// Send sends m on the stream.
func (as *agentStream) Send(m *roostv1.HubMessage) error {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.send(m)
}

// DesiredState is what the hub wants Server name to run now: its newest
// Revision while a Machine holds it (generation = the Raft index of the
// Revision's last change), else revision 0 and generation 0; for a worker
// whose Node is not registered yet, the newest bootstrap token the leader
// created for its Machine (kubelet_bootstrap).
func (s *Server) DesiredState(name string) *roostv1.DesiredState {
	rev, idx := s.fsm.DesiredRevision(name)
	if rev == nil {
		return &roostv1.DesiredState{}
	}
	return &roostv1.DesiredState{
		Generation: int64(idx), Revision: rev.GetSpec().GetNumber(), Spec: rev.GetSpec(),
		Failed:           rev.GetStatus().GetPhase() == state.RevisionFailed,
		KubeletBootstrap: s.kubeletBootstrap(name),
	}
}

// kubeletBootstrap is the bootstrap token of Server name's worker Machine
// that expires last, with its Cluster's API endpoint; nil for standalone
// Machines, registered Nodes and when the leader has created none.
func (s *Server) kubeletBootstrap(name string) *roostv1.KubeletBootstrap {
	m := s.fsm.MachineOf(name)
	if m == nil || m.GetStatus().GetCluster() == "" || m.GetStatus().GetNodeName() != "" {
		return nil
	}
	var newest *roostv1.BootstrapToken
	for _, t := range s.fsm.BootstrapTokens() {
		if t.GetMachine() == m.GetMetadata().GetName() && t.GetCluster() == m.GetStatus().GetCluster() &&
			t.GetExpiresAt().AsTime().After(s.now()) {
			newest = t // sorted by expiry
		}
	}
	if newest == nil {
		return nil
	}
	o, err := s.fsm.Get("Cluster", newest.GetCluster())
	if err != nil {
		return nil
	}
	return &roostv1.KubeletBootstrap{ApiServer: o.GetCluster().GetSpec().GetApiEndpoint(),
		Token: newest.GetTokenId() + "." + newest.GetSecret(), ExpiresAt: newest.GetExpiresAt()}
}

// pushDesired sends Server name's desired state on as unless the same was
// sent already.
func (s *Server) pushDesired(name string, as *agentStream) error {
	d := s.DesiredState(name)
	as.mu.Lock()
	defer as.mu.Unlock()
	if as.last != nil && proto.Equal(as.last, d) {
		return nil
	}
	if err := as.send(&roostv1.HubMessage{Message: &roostv1.HubMessage_Desired{Desired: d}}); err != nil {
		return err
	}
	as.last = d
	return nil
}

// RunDesiredPush watches Revisions and Machines and pushes each change to
// the affected agent's stream on this member, until ctx ends. After a
// watch ends (snapshot restore, falling behind) it re-subscribes and
// re-checks every stream.
func (s *Server) RunDesiredPush(ctx context.Context) {
	for ctx.Err() == nil {
		s.watchDesired(ctx)
		for _, n := range s.desired.names() {
			if as := s.desired.get(n); as != nil {
				go s.pushDesired(n, as) //nolint:errcheck // the stream's own loop sees a broken stream
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (s *Server) watchDesired(ctx context.Context) {
	subs := make([]*state.Subscription, 0, 2)
	for _, kind := range []string{"Revision", "Machine"} {
		sub, err := s.fsm.Subscribe(kind, s.fsm.LastIndex())
		if err != nil {
			s.log.Warn("desired-state push: watch failed", "kind", kind, "err", err)
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
		}
		if as := s.desired.get(server); as != nil {
			go s.pushDesired(server, as) //nolint:errcheck // the stream's own loop sees a broken stream
		}
	}
}

// goAwayTimeout bounds how long GoAway spends telling agents.
const goAwayTimeout = time.Second

// GoAway tells every agent streaming to this member to end its stream and
// connect to another member at once (HubMessage.go_away), with reason for
// its log: the member is shutting down, and an agent that waited for its
// stream to be cut would keep the shutdown waiting. It returns how many
// agents were told within goAwayTimeout. Agents that do not know the
// message keep their streams until the server stops.
func (s *Server) GoAway(reason string) int {
	s.desired.mu.Lock()
	streams := make([]*agentStream, 0, len(s.desired.streams))
	for _, as := range s.desired.streams {
		streams = append(streams, as)
	}
	s.desired.mu.Unlock()
	m := &roostv1.HubMessage{Message: &roostv1.HubMessage_GoAway{GoAway: &roostv1.GoAway{Reason: reason}}}
	told := make(chan bool, len(streams))
	go func() {
		for _, as := range streams {
			told <- as.Send(m) == nil
		}
	}()
	n := 0
	deadline := time.After(goAwayTimeout)
	for range streams {
		select {
		case ok := <-told:
			if ok {
				n++
			}
		case <-deadline:
			return n
		}
	}
	return n
}
