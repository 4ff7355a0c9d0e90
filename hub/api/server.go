package api

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/raftnode"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// forwardedKey marks a request a follower forwarded to the leader, so the
// leader never forwards it again.
const forwardedKey = "x-roost-forwarded"

// Server implements HubService and MemberService on one hub member.
type Server struct {
	roostv1.UnimplementedHubServiceServer
	roostv1.UnimplementedMemberServiceServer

	fsm  *state.FSM
	node *raftnode.Node
	// peerCreds are the member's client credentials for calls to the leader.
	peerCreds credentials.TransportCredentials
	log       *slog.Logger
	now       func() time.Time

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn // leader API address → connection
}

// Config wires a Server.
type Config struct {
	FSM  *state.FSM
	Node *raftnode.Node
	// PeerCredentials authenticate this member to other members (member certificate).
	PeerCredentials credentials.TransportCredentials
	Logger          *slog.Logger
	// Now is the clock for command times; nil means time.Now.
	Now func() time.Time
}

// New returns a Server; register it with Register.
func New(cfg Config) *Server {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Server{fsm: cfg.FSM, node: cfg.Node, peerCreds: cfg.PeerCredentials, log: log, now: now, conns: map[string]*grpc.ClientConn{}}
}

// ServerOptions returns the interceptors every hub gRPC server needs:
// metrics, authorization and the error mapping.
func ServerOptions(m *Metrics) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(m.unary, unaryErrors, unaryAuth),
		grpc.ChainStreamInterceptor(m.stream, streamErrors, streamAuth),
		// Clients (client.Dial) ping every 30 s; allow it, even without streams.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 15 * time.Second, PermitWithoutStream: true}),
	}
}

// Register registers both services on g.
func (s *Server) Register(g *grpc.Server) {
	roostv1.RegisterHubServiceServer(g, s)
	roostv1.RegisterMemberServiceServer(g, s)
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

// Propose sends cmd through Raft on this member, which must lead. It sets
// the command time, and returns the FSM's result or its error.
func (s *Server) Propose(ctx context.Context, cmd *roostv1.Command) (*state.ApplyResult, error) {
	if cmd.Time == nil {
		cmd.Time = timestamppb.New(s.now())
	}
	data, err := proto.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	resp, _, err := s.node.Apply(ctx, data)
	if err != nil {
		return nil, err
	}
	res, ok := resp.(*state.ApplyResult)
	if !ok {
		return nil, fmt.Errorf("unexpected FSM response %T", resp)
	}
	if res.Err != nil {
		return nil, res.Err
	}
	return res, nil
}

// newUIDs returns n fresh RFC 4122 random UUIDs for an ApplyObjects command.
func newUIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = uuid.NewString()
	}
	return out
}

// isForwarded reports whether ctx carries a request another member forwarded.
func isForwarded(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(forwardedKey)) > 0
}

// leaderClient returns a HubService client on the leader and a context
// marked as forwarded. It fails with Unavailable when no leader is known,
// when the leader's API address is not recorded yet, or when the request
// was already forwarded once.
func (s *Server) leaderConn(ctx context.Context) (*grpc.ClientConn, context.Context, error) {
	if isForwarded(ctx) {
		return nil, nil, apierror.Unavailable("member %s received a forwarded request but is not the leader (leadership changed); retry", s.node.ID())
	}
	_, leaderID := s.node.Leader()
	if leaderID == "" {
		return nil, nil, apierror.Unavailable("no hub leader elected yet; retry")
	}
	var apiAddr string
	for _, m := range s.fsm.Members() {
		if m.GetId() == leaderID {
			apiAddr = m.GetApiAddress()
		}
	}
	if apiAddr == "" {
		return nil, nil, apierror.Unavailable("the API address of leader %s is not known yet; retry", leaderID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.conns[apiAddr]
	if !ok {
		var err error
		c, err = grpc.NewClient(apiAddr, grpc.WithTransportCredentials(s.peerCreds))
		if err != nil {
			return nil, nil, err
		}
		s.conns[apiAddr] = c
	}
	return c, metadata.AppendToOutgoingContext(ctx, forwardedKey, s.node.ID()), nil
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
