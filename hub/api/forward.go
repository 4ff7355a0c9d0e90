package api

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/client"
)

// Leader forwarding: a member that does not lead sends writes (and
// linearizable reads) to the leader over a shared connection per member
// (peerConn), marked as forwarded so the leader never forwards them again,
// with the client's request ID and attempt passed on (forwardRequest), and
// passes the leader's response headers (warnings) back to its caller. The
// leader authorizes the original caller, whose identity the forwarded call
// carries (withCaller).

// forwardedKey marks a request a follower forwarded to the leader, so the
// leader never forwards it again.
const forwardedKey = "x-roost-forwarded"

// isForwarded reports whether ctx carries a request another member forwarded.
func isForwarded(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(forwardedKey)) > 0
}

// leaderConn returns a connection to the leader and a context marked as
// forwarded, carrying the call's request ID (forwardRequest). It fails
// with Unavailable (apierror.NotApplied) when no leader is known, when
// the leader's API address is not recorded yet, or when the request was
// already forwarded once.
func (s *Server) leaderConn(ctx context.Context) (*grpc.ClientConn, context.Context, error) {
	if isForwarded(ctx) {
		return nil, nil, apierror.NotApplied("member %s received a forwarded request but is not the leader (leadership changed); retry", s.node.ID())
	}
	_, leaderID := s.node.Leader()
	if leaderID == "" {
		return nil, nil, apierror.NotApplied("no hub leader elected yet; retry")
	}
	var apiAddr string
	for _, m := range s.fsm.Members() {
		if m.GetId() == leaderID {
			apiAddr = m.GetApiAddress()
		}
	}
	if apiAddr == "" {
		return nil, nil, apierror.NotApplied("the API address of leader %s is not known yet; retry", leaderID)
	}
	c, err := s.peerConn(apiAddr)
	if err != nil {
		return nil, nil, err
	}
	return c, withCaller(ctx, forwardRequest(ctx, metadata.AppendToOutgoingContext(ctx, forwardedKey, s.node.ID()))), nil
}

// onLeader runs local when this member leads and otherwise calls remote on
// the leader with a forwarded context.
func onLeader[T any](ctx context.Context, s *Server, local func() (T, error), remote func(*grpc.ClientConn, context.Context) (T, error)) (T, error) {
	if s.node.IsLeader() {
		return local()
	}
	conn, fctx, err := s.leaderConn(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	return remote(conn, fctx)
}

// Close closes connections to other members.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for a, c := range s.conns {
		c.Close()
		delete(s.conns, a)
	}
}

// peerConn returns a connection to another member's API, authenticated
// with this member's certificate; connections are shared with forwarding.
func (s *Server) peerConn(addr string) (*grpc.ClientConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(s.peerCreds), grpc.WithUnaryInterceptor(markUnsent))
	if err != nil {
		return nil, err
	}
	s.conns[addr] = c
	return c, nil
}

// WarningHeader is the response header (gRPC metadata) in which the hub
// sends warnings about a request that succeeded, e.g. a release recorded
// without a signature check because no release key is trusted. roostctl
// prints each value as "Warning: …".
const WarningHeader = "roost-warning"

// setWarning adds a warning header to the response of the call in ctx.
func setWarning(ctx context.Context, warning string) {
	if warning != "" {
		_ = grpc.SetHeader(ctx, metadata.Pairs(WarningHeader, warning))
	}
}

// forwardRequest adds the request ID and attempt of the call in ctx to
// fctx, the outgoing context of the same call forwarded to the leader.
func forwardRequest(ctx, fctx context.Context) context.Context {
	if id := requestID(ctx); id != "" {
		fctx = metadata.AppendToOutgoingContext(fctx, client.RequestIDKey, id)
	}
	if n := incoming(ctx, client.AttemptKey); n != "" {
		fctx = metadata.AppendToOutgoingContext(fctx, client.AttemptKey, n)
	}
	return fctx
}

// markUnsent is the interceptor of calls to other members: a call that
// failed with Unavailable before it got onto a connection to the leader
// (no peer) never reached it, which the client is told
// (apierror.ReasonNotApplied) so that it retries. Any other failure of a
// forwarded write after it was sent stays without a reason, which clients
// read as an unknown outcome.
func markUnsent(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var p peer.Peer
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&p))...)
	if err != nil && p.Addr == nil && status.Code(err) == codes.Unavailable && apierror.ReasonOf(err) == "" {
		return apierror.NotApplied("the leader could not be reached (%s); retry", status.Convert(err).Message())
	}
	return err
}
