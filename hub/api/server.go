package api

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/roostfleet/roost/hub/agentconn"
	"github.com/roostfleet/roost/hub/blobs"
	"github.com/roostfleet/roost/hub/fleetmetrics"
	"github.com/roostfleet/roost/hub/liveness"
	"github.com/roostfleet/roost/hub/netboot"
	"github.com/roostfleet/roost/hub/raftnode"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Server implements HubService and MemberService on one hub member.
type Server struct {
	roostv1.UnimplementedHubServiceServer
	roostv1.UnimplementedMemberServiceServer
	roostv1.UnimplementedAgentServiceServer

	// hubs is the last member list sent to agents (agentHubs): sessions
	// keep the pointer they sent and compare it, not the list.
	hubs atomic.Pointer[[]string]
	// hubsRead is when agentHubs last read the members (Unix ns).
	hubsRead atomic.Int64

	fsm  *state.FSM
	node *raftnode.Node
	// peerCreds are the member's client credentials for calls to the leader.
	peerCreds credentials.TransportCredentials
	log       *slog.Logger
	now       func() time.Time

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn // member API address → connection (peerConn)

	agentCertLifetime time.Duration
	liveness          liveness.Config
	tracker           *liveness.Tracker
	reporter          *liveness.Reporter
	// fleetSize is the number of Servers, refreshed by RefreshFleetSize.
	fleetSize atomic.Int64
	streams   prometheus.Gauge
	// netbootURL is Config.NetbootURL.
	netbootURL func(netboot.Grant) (string, error)
	// blobs is the member's artifact store; nil refuses artifact calls.
	blobs *blobs.Store
	// agents are the agent streams this member serves (Config.Agents).
	agents *agentconn.Registry
	// fleet counts enrollments (Config.Fleet).
	fleet *fleetmetrics.Events
	// drainer drains workers before their release; nil: no drain.
	drainer Drainer
	// leases grants reboot Leases; nil: none are.
	leases LeaseGate
	// health is Config.Health.
	health func() error
	// guard limits, counts and logs calls without a certificate.
	guard *guard
	// leaderReady is Config.LeaderReady.
	leaderReady func(context.Context) error
	// audit writes the audit log (Config.Audit).
	audit *auditor
	// auditPath is Config.AuditPath.
	auditPath string
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
	// AgentCertLifetime is the lifetime of agent certificates; default
	// DefaultAgentCertLifetime.
	AgentCertLifetime time.Duration
	// Liveness is the heartbeat configuration (TTL scaling); its Interval
	// is what agents are told.
	Liveness liveness.Config
	// Tracker is the leader's heartbeat memory (ReportSeen feeds it); nil
	// makes one.
	Tracker *liveness.Tracker
	// Reporter receives this member's agents' heartbeats; nil makes one
	// that reports to the leader through MemberService.ReportSeen (run it
	// with RunReporter).
	Reporter *liveness.Reporter
	// Agents keeps the agent streams this member serves and pushes their
	// desired state (run its Run on the member); nil makes one.
	Agents *agentconn.Registry
	// Registry receives the agent stream gauge; nil registers nothing.
	Registry prometheus.Registerer
	// Blobs is the member's content-addressed artifact store
	// (DATA_DIR/blobs); nil makes the artifact calls fail with
	// FailedPrecondition.
	Blobs *blobs.Store
	// Health says whether this member can serve every request (nil) or
	// why not, as its /healthz and gRPC health service do; nil reports
	// this member Healthy in ListMembers.
	Health func() error
	// Unauthenticated limits the calls without a client certificate
	// (Enroll, Join, health); zero fields take
	// DefaultUnauthenticatedLimits'. Serve them with LimitOptions.
	Unauthenticated UnauthenticatedLimits
	// LeaderReady returns once this member, leading, has applied every
	// entry committed before its term (the hub's term barrier), or fails;
	// token checks before a proposal wait for it, so a token created under
	// the previous leader is not refused as unknown. Nil: no wait.
	LeaderReady func(context.Context) error
	// Audit receives the audit log: one JSON line (AuditEntry) per audited
	// call, in one Write each. Nil: no audit log.
	Audit io.Writer
	// AuditPath is the file Audit writes, which ReadAudit reads with its
	// rotated files (NAME-TIME.EXT next to it). Empty: ReadAudit refuses.
	AuditPath string
	// Leases grants reboot Leases (hub/rollout's Gate); nil: AcquireLease
	// is Unavailable.
	Leases LeaseGate
	// Drainer, if set, drains workers before their release
	// (hub/clusters); nil releases them like any other Machine.
	Drainer Drainer
	// Fleet, if set, counts the enrollments this member handles as leader.
	Fleet *fleetmetrics.Events
	// NetbootURL signs a network boot grant and returns its boot URL on
	// this member's boot listener (roost-hub --boot-addr); nil when the
	// member serves no network boot, which refuses network boot tokens.
	NetbootURL func(netboot.Grant) (string, error)
}

// DefaultAgentCertLifetime is how long agent certificates last by default;
// agents renew at two thirds.
const DefaultAgentCertLifetime = 24 * time.Hour

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
	s := &Server{fsm: cfg.FSM, node: cfg.Node, peerCreds: cfg.PeerCredentials, log: log, now: now, conns: map[string]*grpc.ClientConn{},
		agentCertLifetime: cfg.AgentCertLifetime, liveness: cfg.Liveness, tracker: cfg.Tracker, reporter: cfg.Reporter}
	s.blobs, s.health, s.leaderReady, s.agents = cfg.Blobs, cfg.Health, cfg.LeaderReady, cfg.Agents
	if s.agents == nil {
		s.agents = agentconn.New(agentconn.Config{FSM: cfg.FSM, Now: now, Logger: log})
	}
	s.leases, s.drainer, s.fleet = cfg.Leases, cfg.Drainer, cfg.Fleet
	s.netbootURL = cfg.NetbootURL
	s.guard = newGuard(cfg.Unauthenticated, log, now)
	s.audit, s.auditPath = &auditor{w: cfg.Audit, now: now}, cfg.AuditPath
	if cfg.Node != nil {
		s.audit.member = cfg.Node.ID()
	}
	if s.agentCertLifetime <= 0 {
		s.agentCertLifetime = DefaultAgentCertLifetime
	}
	if s.tracker == nil {
		s.tracker = liveness.NewTracker(cfg.Liveness)
	}
	if s.reporter == nil {
		s.reporter = &liveness.Reporter{Tracker: s.tracker, IsLeader: s.isLeader, Send: s.reportSeen, Log: log}
	}
	s.streams = prometheus.NewGauge(prometheus.GaugeOpts{Name: "roost_agent_streams", Help: "Agent streams (AgentService.Connect) open on this member."})
	if cfg.Registry != nil {
		cfg.Registry.MustRegister(s.streams, s.guard.refusals)
	}
	s.RefreshFleetSize()
	return s
}

func (s *Server) isLeader() bool { return s.node != nil && s.node.IsLeader() }

// Tracker returns the heartbeat tracker (run its Controller on the hub).
func (s *Server) Tracker() *liveness.Tracker { return s.tracker }

// Reporter returns the member's heartbeat reporter.
func (s *Server) Reporter() *liveness.Reporter { return s.reporter }

// RefreshFleetSize recounts the Servers, which scales the heartbeat
// interval agents are told.
func (s *Server) RefreshFleetSize() { s.fleetSize.Store(int64(s.fsm.Count("Server"))) }

// HeartbeatInterval is the interval agents are told now.
func (s *Server) HeartbeatInterval() time.Duration {
	return s.liveness.Interval(int(s.fleetSize.Load()))
}

// Connection buffers. Every agent holds a connection to the hub, so what a
// connection pins while idle is paid ten thousand times over.
//
//   - No read buffer of gRPC's own (0): the connection is TLS, and
//     crypto/tls already buffers a whole record and hands out its plaintext
//     from memory, so a bufio.Reader on top (gRPC's default 32 KiB, pinned
//     for the life of the connection) only copies twice. Large uploads
//     (PushArtifact) read DATA frames straight into pooled buffers either
//     way.
//   - A write buffer as large as gRPC's default, returned to a shared pool
//     after every flush (SharedWriteBuffer), so an idle connection holds
//     none and large downloads (FetchArtifact) still write full TLS records.
const (
	readBufferSize  = 0
	writeBufferSize = 32 << 10
)

// ServerOptions returns the interceptors every hub gRPC server needs:
// metrics and the error mapping, and TransportOptions. Server.AuthOptions
// adds authorization.
func ServerOptions(m *Metrics) []grpc.ServerOption {
	return append([]grpc.ServerOption{
		grpc.ChainUnaryInterceptor(m.unary, unaryErrors),
		grpc.ChainStreamInterceptor(m.stream, streamErrors),
	}, TransportOptions()...)
}

// TransportOptions returns the hub's connection settings: the keepalive
// policy clients must follow and the lean buffers of an idle connection
// (see readBufferSize). BenchmarkAgents measures a bare gRPC server with
// them, to tell what a connection costs in gRPC and TLS from what Roost
// adds.
func TransportOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		// Agents ping every 10 s (agent.KeepaliveTime) to find a hung
		// member quickly, clients (client.Dial) every 30 s; allow pings
		// every 5 s, even without streams.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		// Every agent holds a connection: pin no buffers while it is idle
		// (see readBufferSize).
		grpc.ReadBufferSize(readBufferSize),
		grpc.WriteBufferSize(writeBufferSize),
		grpc.SharedWriteBuffer(true),
	}
}

// LimitOptions returns the interceptors that hold calls without a client
// certificate to Config.Unauthenticated (ResourceExhausted with a
// RetryInfo detail beyond it); add them to the gRPC server after
// ServerOptions.
func (s *Server) LimitOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(s.guard.unary), grpc.ChainStreamInterceptor(s.guard.stream)}
}

// Register registers HubService, MemberService and AgentService on g.
func (s *Server) Register(g *grpc.Server) {
	roostv1.RegisterHubServiceServer(g, s)
	roostv1.RegisterMemberServiceServer(g, s)
	roostv1.RegisterAgentServiceServer(g, s)
}
