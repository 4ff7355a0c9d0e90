package hub

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/raftnode"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// A member removed from the hub (roostctl hub remove) is not in its own
// latest Raft configuration any more, and knows no leader: Raft sends it
// nothing more (the leader replicates the entry that removes it, then
// stops), and it does not stand for election. Its state is frozen at the
// removal. Left running, or restarted on its data dir, it would answer
// reads with stale data; instead it refuses every API call with Unavailable
// (clients retry on another member) saying what to do, and logs that once
// at Error level.
//
// A joining member is not in the configuration either until the leader adds
// it, and while it catches up with the log the latest configuration it has
// may still be an older one without it (but it follows a leader). So only a
// member that was in the configuration counts as removed: one that
// bootstrapped the hub, was added as a voter (addSelfAsVoter, DIR/joined on
// a restart) or saw itself in the configuration since it started
// (Hub.wasMember).

// removedError is the error a removed member answers with, nil while it is
// a member. It reads what watchHealth found (every half second), so a
// request costs an atomic load, not a copy of the Raft configuration;
// before the first check it checks itself.
func (h *Hub) removedError() error {
	removed := h.removed.Load()
	if !h.removedChecked.Load() {
		removed = h.checkRemoved()
	}
	if !removed {
		return nil
	}
	return apierror.NotApplied("%s", h.removedMessage()) // checked before any handler runs
}

func (h *Hub) removedMessage() string {
	return fmt.Sprintf("this member (%s) was removed from the hub; its data dir is stale: wipe it and join again with a new token (roostctl hub join)", h.id)
}

// checkRemoved reports whether this member was removed from the hub, from
// its latest Raft configuration and the leader it does not know; the
// first time it finds so, it logs it.
func (h *Hub) checkRemoved() bool {
	defer h.removedChecked.Store(true)
	servers, err := h.node.Servers()
	if err != nil || len(servers) == 0 {
		// No configuration yet (a joining member) or Raft shut down.
		return h.removed.Load()
	}
	in := false
	for _, s := range servers {
		in = in || string(s.ID) == h.id
	}
	if in {
		h.wasMember.Store(true)
		h.setRemoved(false)
		return false
	}
	if _, leader := h.node.Leader(); leader != "" || !h.wasMember.Load() {
		h.setRemoved(false)
		return false
	}
	h.setRemoved(true)
	if !h.removedLogged.Swap(true) {
		h.log.Error(h.removedMessage()+"; it refuses every request", "dir", h.opts.DataDir)
	}
	return true
}

// watchHealth checks the member's health (healthy, which also finds a
// removal) every half second: the gRPC health service follows it, and a
// removed member says so in its log even when no client calls it.
func (h *Hub) watchHealth(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		st := healthpb.HealthCheckResponse_SERVING
		if h.healthy() != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		h.healthSrv.SetServingStatus("", st)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *Hub) refuseUnaryIfRemoved(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := h.removedError(); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (h *Hub) refuseStreamIfRemoved(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := h.removedError(); err != nil {
		return err
	}
	if info.FullMethod == roostv1.AgentService_Connect_FullMethodName {
		// Thousands of these: ended at the agent's next heartbeat
		// (removedCheckStream), at the cost of an atomic load per message.
		// This frame stays on every agent stream's goroutine stack while
		// it waits, so it is kept small: the other streams' handling is in
		// serveUntilRemoved.
		return handler(srv, removedCheckStream{ServerStream: ss, h: h})
	}
	return h.serveUntilRemoved(srv, ss, handler)
}

// serveUntilRemoved runs a stream that may carry nothing for a long time
// (Watch) and ends it when this member finds it was removed (a removed
// member applies nothing more), with the removed member's error. A Watch
// also ends when the member starts stopping (Close: stopping), with
// stoppingError, so that it does not hold the graceful stop for its whole
// timeout; transfers (artifacts, snapshots) end by themselves and get that
// time to finish.
//
//go:noinline
func (h *Hub) serveUntilRemoved(srv any, ss grpc.ServerStream, handler grpc.StreamHandler) error {
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	stop := context.AfterFunc(h.removal.context(), cancel)
	defer stop()
	endOnStop := endsOnStop(ss)
	if endOnStop {
		stop := context.AfterFunc(h.stopping.context(), cancel)
		defer stop()
	}
	err := handler(srv, removalCtxStream{removedCheckStream: removedCheckStream{ServerStream: ss, h: h}, ctx: ctx})
	if h.removed.Load() {
		return apierror.Unavailable("%s", h.removedMessage())
	}
	if endOnStop && ctx.Err() != nil && ss.Context().Err() == nil && h.stopping.context().Err() != nil {
		return h.stoppingError()
	}
	return err
}

// endsOnStop says whether ss is a stream Close ends when the member starts
// stopping: one that may wait for events indefinitely (HubService.Watch).
// Agent streams (AgentService.Connect) are told with go_away instead
// (agentconn.Registry.GoAway).
func endsOnStop(ss grpc.ServerStream) bool {
	m, _ := grpc.MethodFromServerStream(ss)
	return m == roostv1.HubService_Watch_FullMethodName
}

// stoppingError is what a stream Close ends gets, and a Watch opened
// while the member stops: Unavailable, so clients go to another member.
// roostctl recognises the message's end (cli: memberStopping).
func (h *Hub) stoppingError() error {
	return apierror.Unavailable("hub member %s is stopping; reconnect to another member", h.id)
}

// removedCheckStream ends a stream that was open when its member was
// removed at its next message (an agent's next heartbeat), so the agent
// moves to another member; an atomic load per message, no goroutine.
type removedCheckStream struct {
	grpc.ServerStream
	h *Hub
}

func (s removedCheckStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if s.h.removed.Load() {
		return apierror.Unavailable("%s", s.h.removedMessage())
	}
	return nil
}

func (s removedCheckStream) SendMsg(m any) error {
	if s.h.removed.Load() {
		return apierror.Unavailable("%s", s.h.removedMessage())
	}
	return s.ServerStream.SendMsg(m)
}

// removalCtxStream is a removedCheckStream whose context also ends when
// the member finds it was removed (serveUntilRemoved).
type removalCtxStream struct {
	removedCheckStream
	ctx context.Context
}

func (s removalCtxStream) Context() context.Context { return s.ctx }

// setRemoved records whether this member is removed; becoming removed
// ends its open streams (removal).
func (h *Hub) setRemoved(v bool) {
	if h.removed.Swap(v) != v {
		h.removal.set(v)
	}
}

// removalSignal is a context that is cancelled while the member is
// removed, for streams to end on. Hub.stopping is another, cancelled for
// good when Close starts draining.
type removalSignal struct {
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
}

// context returns the current context: cancelled once the member is
// found removed.
func (r *removalSignal) context() context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		r.ctx, r.cancel = context.WithCancel(context.Background())
	}
	return r.ctx
}

// set cancels the context (removed) or starts a new one (a member again).
func (r *removalSignal) set(removed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case removed && r.cancel != nil:
		r.cancel()
	case removed:
		r.ctx, r.cancel = context.WithCancel(context.Background())
		r.cancel()
	case r.ctx != nil && r.ctx.Err() != nil:
		r.ctx, r.cancel = nil, nil
	}
}

// checkOwnRaftAddress refuses to restart a member on another Raft address
// than the one the hub's configuration (as this member last saw it) has for
// it, when the hub has other members: they would go on dialing the old
// address, and the member would never hear from them. A single member
// elects itself whatever its address.
func checkOwnRaftAddress(node *raftnode.Node) error {
	servers, err := node.Servers()
	if err != nil || len(servers) < 2 {
		return nil
	}
	for _, s := range servers {
		if string(s.ID) == node.ID() && string(s.Address) != node.Addr() {
			return fmt.Errorf("--raft-addr: this member (%s) is in the hub's Raft configuration at %s, not at %s, and the other members dial that address: "+
				"restart it with --raft-addr %s; to move it to another address, remove it ('roostctl hub remove %s'), wipe its data dir and join again with a new token ('roostctl hub join')",
				node.ID(), s.Address, node.Addr(), s.Address, node.ID())
		}
	}
	return nil
}
