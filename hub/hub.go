package hub

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/roostfleet/roost/internal/tlsconfig"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub/agentconn"
	"github.com/roostfleet/roost/hub/api"
	"github.com/roostfleet/roost/hub/blobs"
	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/hub/clusters"
	"github.com/roostfleet/roost/hub/controller"
	"github.com/roostfleet/roost/hub/liveness"
	"github.com/roostfleet/roost/hub/raftnode"
	"github.com/roostfleet/roost/hub/rollout"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/version"
)

// ExitRulesTooNew is roost-hub's exit status when its Raft log holds
// commands that need newer apply rules than this build implements
// (state.RulesTooNewError): 78, EX_CONFIG of sysexits.h, so a systemd unit
// can stop restarting it (RestartPreventExitStatus=78).
const ExitRulesTooNew = 78

// Options configure a hub member.
type Options struct {
	// DataDir holds all of the member's state (see the package doc).
	DataDir string
	// APIAddr is the host:port of the gRPC API (TLS); clients and other
	// members dial it, so the host must be reachable by them.
	APIAddr string
	// RaftAddr is the host:port of the Raft transport (mutual TLS).
	RaftAddr string
	// HTTPAddr is the host:port serving /metrics and /healthz; empty disables it.
	HTTPAddr string
	// Join is the API address of any existing member; used only when DataDir
	// holds no Raft state yet.
	Join string
	// JoinToken authenticates the join (from `roostctl hub join`).
	JoinToken string
	// NodeID is the member's Raft ID on first start; empty picks "hub-<random>".
	NodeID string
	// LogStore is raftnode.LogStoreWAL (default) or raftnode.LogStoreBolt.
	LogStore string
	// Raft timing overrides (zero keeps Raft's defaults).
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout time.Duration
	// SnapshotThreshold overrides the number of entries between snapshots.
	SnapshotThreshold uint64
	// Logger receives the hub's structured logs; nil uses slog.Default().
	Logger *slog.Logger
	// RaftLogOutput receives hashicorp/raft's own log lines (warnings and
	// errors); nil means os.Stderr.
	RaftLogOutput io.Writer
	// Registry receives the hub's metrics; nil makes a private registry.
	Registry *prometheus.Registry
	// AgentCertLifetime is the lifetime of agent client certificates
	// (default 24h; agents renew at two thirds).
	AgentCertLifetime time.Duration
	// HeartbeatMinTTL is the smallest time a silent Server stays Reachable
	// (default liveness.DefaultMinTTL); the TTL grows with the fleet.
	HeartbeatMinTTL time.Duration
	// MaxHeartbeatsPerSecond bounds the fleet's heartbeat rate the TTL is
	// scaled for (default liveness.DefaultMaxHeartbeatsPerSecond).
	MaxHeartbeatsPerSecond float64
	// ClusterSyncInterval is how often the leader reconciles each Cluster
	// (reachability, Nodes, bootstrap tokens); default clusters.DefaultTick.
	ClusterSyncInterval time.Duration
	// ControllerClock is the clock of the cluster and rollout controllers
	// (bootstrap token expiry and rotation, maintenance windows); nil
	// means time.Now.
	ControllerClock func() time.Time
	// BlobGCInterval is the time between two passes of the member's blob
	// garbage collection, which removes from DATA_DIR/blobs the artifacts
	// no ImageRelease names any more (see blobgc.go); the first pass runs
	// a minute after start, or after the interval if shorter. Zero means
	// DefaultBlobGCInterval (5 min); negative disables it.
	BlobGCInterval time.Duration
	// ForceNewCluster makes this member, restarted on its data dir, the
	// only voter of its hub before it starts (raftnode.Recover), as etcd's
	// --force-new-cluster: for a hub that lost a majority of its members
	// for good. The other members are dropped from the configuration and
	// their records from the state; new members join afterwards.
	ForceNewCluster bool
	// LogVerifyInterval is how often the leader appends a Raft log
	// verification checkpoint when the log grew (raftnode.Config.VerifyInterval):
	// zero means raftnode.DefaultVerifyInterval (1 min), negative none.
	LogVerifyInterval time.Duration
	// BlobGCGrace is how long an artifact that no release names stays
	// after it was stored or last checked; zero or negative means
	// DefaultBlobGCGrace (1 h). Partial uploads stay 24 h after their last
	// bytes (blobs.DefaultPartialGrace).
	BlobGCGrace time.Duration
	// Unauthenticated limits the API calls without a client certificate
	// (Enroll, Join, gRPC health) per source address and in all; zero
	// fields take api.DefaultUnauthenticatedLimits'.
	Unauthenticated api.UnauthenticatedLimits
	// HandshakeTimeout bounds the TLS handshake of a new connection to
	// the API and the Raft port, and the request headers on the HTTP
	// port: a connection that has not completed them by then is closed.
	// Zero means DefaultHandshakeTimeout (10 s).
	HandshakeTimeout time.Duration
	// MaxPendingHandshakes bounds the Raft port's connections still in
	// their TLS handshake (raftnode.Config.MaxPendingHandshakes); zero
	// means raftnode.DefaultMaxPendingHandshakes.
	MaxPendingHandshakes int
}

// DefaultHandshakeTimeout is Options.HandshakeTimeout's default.
const DefaultHandshakeTimeout = 10 * time.Second

// Hub is one running member.
type Hub struct {
	// settled is true while this member leads and leaderLoop's
	// housekeeping (which starts with a barrier) finished in this term.
	settled atomic.Bool
	opts    Options
	dir     dataDir
	log     *slog.Logger
	id      string
	fsm     *state.FSM
	// clusters is the leader-only Kubernetes integration (hub/clusters).
	clusters *clusters.Controller
	// rollouts is the leader-only rollout controller (hub/rollout).
	rollouts *rollout.Controller
	node     *raftnode.Node
	api      *api.Server
	// agents are the agent streams this member serves (api.Config.Agents).
	agents *agentconn.Registry
	grpc   *grpc.Server
	// healthSrv is the standard gRPC health service; watchHealth keeps
	// its status.
	healthSrv *health.Server
	http      *http.Server
	apiLn     net.Listener
	httpLn    net.Listener
	// raftAddr is the address the Raft transport is bound to, which the
	// member advertises (a join sends it with MemberService.Join).
	raftAddr string
	cancel   context.CancelFunc
	done     chan struct{}
	liveDone chan struct{}
	registry *prometheus.Registry
	unlock   func()

	// startIndex is the last index of the Raft log when the member
	// started; blob garbage collection waits until it is applied.
	startIndex uint64
	// blobs is the member's artifact store; blobGC* belong to runBlobGC.
	blobs       *blobs.Store
	blobGC      *blobGCMetrics
	blobGCReady bool
	blobGCSeen  bool

	// wasMember: this member is known to have been in the Raft
	// configuration; removed: it was removed from it (see removed.go);
	// removedLogged: the removal was logged; removedChecked: checkRemoved
	// ran at least once.
	wasMember, removed, removedLogged, removedChecked atomic.Bool
	removal                                           removalSignal // ends open streams once removed
	stopping                                          removalSignal // ends open Watch streams once Close drains

	// controllerMetrics are the leader controllers' queue metrics.
	controllerMetrics *controller.Metrics
	// gate is the reboot gate (hub/rollout), granting Leases.
	gate *rollout.Gate
}

// runLiveness starts the liveness controller and the pool controller (both
// act only while this member leads), the heartbeat reporter, the
// fleet-size refresher, the blob garbage collection and the check for this
// member's removal (every member).
func (h *Hub) runLiveness(ctx context.Context, m *liveness.Metrics) {
	ctrl := &liveness.Controller{
		Tracker:  h.api.Tracker(),
		IsLeader: h.node.IsLeader,
		Servers: func() []liveness.ServerView {
			var out []liveness.ServerView
			h.fsm.EachServer(func(s *roostv1.Server) {
				if s.GetStatus().GetState() != state.ServerDecommissioned {
					out = append(out, liveness.ServerView{Name: s.GetMetadata().GetName(), Reachable: s.GetStatus().GetReachability() != state.Unreachable,
						EnrolledAt: s.GetStatus().GetEnrolledAt().AsTime()})
				}
			})
			return out
		},
		Propose: func(ctx context.Context, c *roostv1.SetServerReachability) error {
			_, err := h.api.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_SetServerReachability{SetServerReachability: c}})
			return err
		},
		Metrics:     m,
		LoopMetrics: h.controllerMetrics,
		Log:         h.log,
	}
	rep := h.api.Reporter()
	rep.Metrics, rep.Log = m, h.log
	var n int
	done := make(chan struct{}, 8)
	for _, run := range []func(context.Context){ctrl.Run, rep.Run, h.poolController().Run, h.revisionController().Run, h.clusters.Run, h.rollouts.Run, h.gate.Run, h.agents.Run, h.runBlobGC, h.watchHealth, func(ctx context.Context) {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				h.api.RefreshFleetSize()
			}
		}
	}} {
		n++
		go func() { run(ctx); done <- struct{}{} }()
	}
	go func() {
		for range n {
			<-done
		}
		close(h.liveDone)
	}()
}

// Start starts a member: it bootstraps, joins or restarts as DataDir says,
// then serves the API. It returns once the API listens; joining and the
// first leader election complete in the background (see WaitLeader).
func Start(ctx context.Context, opts Options) (*Hub, error) {
	if opts.DataDir == "" || opts.APIAddr == "" || opts.RaftAddr == "" {
		return nil, errors.New("data dir, API address and Raft address are required")
	}
	if err := CheckNodeID(opts.NodeID); err != nil {
		return nil, err
	}
	if err := CheckJoinFlags(opts.DataDir, opts.Join, opts.JoinToken); err != nil {
		return nil, err
	}
	if err := CheckForceNewCluster(opts.DataDir, opts.Join, opts.ForceNewCluster); err != nil {
		return nil, err
	}
	unlock, err := dataDir(opts.DataDir).lock()
	if err != nil {
		return nil, err
	}
	// Bind the API, HTTP and Raft ports before anything is written (the
	// node ID, TLS material, the Raft log) and before a join uses its
	// token, so that a port conflict on first start leaves no
	// half-bootstrapped data dir and costs no token use.
	apiLn, err := net.Listen("tcp", opts.APIAddr)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("API listener (--api-addr %s): %w", opts.APIAddr, err)
	}
	var httpLn net.Listener
	if opts.HTTPAddr != "" {
		if httpLn, err = net.Listen("tcp", opts.HTTPAddr); err != nil {
			apiLn.Close()
			unlock()
			return nil, fmt.Errorf("HTTP listener (--http-addr %s): %w", opts.HTTPAddr, err)
		}
	}
	raftLn, err := raftnode.Listen(opts.RaftAddr, "")
	if err != nil {
		apiLn.Close()
		if httpLn != nil {
			httpLn.Close()
		}
		unlock()
		return nil, fmt.Errorf("raft transport (--raft-addr %s): %w", opts.RaftAddr, err)
	}
	h, err := start(ctx, opts, apiLn, httpLn, raftLn)
	if err != nil {
		apiLn.Close()
		if httpLn != nil {
			httpLn.Close()
		}
		raftLn.Close() // a second Close after raftnode.Open closed it is harmless
		unlock()
		return nil, err
	}
	h.unlock = unlock
	return h, nil
}

func start(ctx context.Context, opts Options, apiLn, httpLn, raftLn net.Listener) (*Hub, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	h := &Hub{opts: opts, dir: dataDir(opts.DataDir), log: log, registry: reg, done: make(chan struct{}), liveDone: make(chan struct{}),
		raftAddr: raftLn.Addr().String()}
	// The ID is recorded in DIR/node-id below, once the member has its
	// certificate: a join refused (an ID in use, a spent token) writes nothing.
	id, err := h.dir.readNodeID(opts.NodeID)
	if err != nil {
		return nil, err
	}
	h.id = id
	h.log = log.With("member", id)

	raftOut := opts.RaftLogOutput
	if raftOut == nil {
		raftOut = os.Stderr
	}
	rcfg := raftnode.Config{
		ID: id, Dir: h.dir.raft(), BindAddr: opts.RaftAddr, Listener: raftLn, LogStore: opts.LogStore,
		HeartbeatTimeout: opts.HeartbeatTimeout, ElectionTimeout: opts.ElectionTimeout,
		LeaderLeaseTimeout: opts.LeaderLeaseTimeout, SnapshotThreshold: opts.SnapshotThreshold,
		VerifyInterval: opts.LogVerifyInterval, VerifyReport: h.logVerifyReport,
		HandshakeTimeout: handshakeTimeout(opts), MaxPendingHandshakes: opts.MaxPendingHandshakes,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: raftOut}).With("member", id),
	}
	hasState, err := raftnode.HasState(rcfg)
	if err != nil {
		return nil, err
	}
	var bootstrap bool
	switch {
	case hasState:
		h.log.Info("restarting member from its data dir", "dir", opts.DataDir)
	case opts.Join != "":
		if err := h.fetchMemberCertificate(ctx); err != nil {
			return nil, fmt.Errorf("join %s: %w", opts.Join, err)
		}
	default:
		if err := h.createCA(); err != nil {
			return nil, err
		}
		bootstrap = true
	}
	if _, err := h.dir.nodeID(id); err != nil {
		return nil, err
	}
	// A member that completed its join, or bootstrapped the hub, was in the
	// Raft configuration: if it is not in its latest one now, it was removed
	// (see removed.go). A joining member is not there until it is added.
	h.wasMember.Store(opts.Join == "" || exists(h.dir.joined()))
	memberCert, memberKey, caPool, err := h.loadTLS()
	if err != nil {
		return nil, err
	}
	raftTLS, err := ca.MutualTLS(memberCert, memberKey, caPool)
	if err != nil {
		return nil, err
	}
	serverTLS, err := ca.ServerTLS(memberCert, memberKey, caPool)
	if err != nil {
		return nil, err
	}
	clientTLS, err := tlsconfig.ClientTLS(memberCert, memberKey, caPool)
	if err != nil {
		return nil, err
	}

	blobStore, err := blobs.Open(h.dir.path("blobs"))
	if err != nil {
		return nil, err
	}
	halt := func(err error) {
		h.log.Error("cannot apply the Raft log; stopping", "err", err)
		os.Exit(ExitRulesTooNew)
	}
	h.fsm = state.New(state.Options{Halt: halt})
	rcfg.FSM = h.fsm
	rcfg.TLS = raftTLS
	if opts.ForceNewCluster {
		if err := h.forceNewCluster(rcfg, raftLn.Addr().String(), hasState, halt); err != nil {
			return nil, h.withRecovery(err)
		}
	}
	node, err := raftnode.Open(rcfg)
	if err != nil {
		return nil, h.withRecovery(err)
	}
	if err := checkOwnRaftAddress(node); err != nil {
		node.Shutdown()
		return nil, err
	}
	if opts.ForceNewCluster {
		// Once members join the recovered hub, another recovery would
		// drop them: a later --force-new-cluster is refused.
		if err := h.dir.writeForceNewClusterDone(time.Now(), node.LastIndex()); err != nil {
			node.Shutdown()
			return nil, fmt.Errorf("--force-new-cluster: recovered, but cannot record it: %w; start this member without --force-new-cluster", err)
		}
	}
	h.node = node
	h.startIndex = node.LastIndex()
	h.blobs = blobStore
	if bootstrap {
		if err := node.Bootstrap(); err != nil {
			node.Shutdown()
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
		h.log.Info("bootstrapped a new single-member cluster")
	}
	reg.MustRegister(newRaftCollector(node, h.fsm), newLogVerifyCollector(node))
	h.blobGC = newBlobGCMetrics(reg)

	livecfg := liveness.Config{MinTTL: opts.HeartbeatMinTTL, MaxHeartbeatsPerSecond: opts.MaxHeartbeatsPerSecond}
	h.agents = agentconn.New(agentconn.Config{FSM: h.fsm, Logger: h.log})
	// The leader controllers propose through h.api, which they are handed
	// to: they only propose once running, after h.api is set.
	h.controllerMetrics = controller.NewMetrics(reg)
	h.clusters = h.clusterController()
	h.rollouts = h.rolloutController()
	h.gate = h.leaseGate()
	h.api = api.New(api.Config{FSM: h.fsm, Node: node, PeerCredentials: credentials.NewTLS(clientTLS), Logger: h.log, Agents: h.agents,
		AgentCertLifetime: opts.AgentCertLifetime, Liveness: livecfg, Registry: reg, Blobs: blobStore, Health: h.healthy,
		Unauthenticated: opts.Unauthenticated, LeaderReady: h.termBarrier, Leases: h.gate, Drainer: h.clusters})
	liveMetrics := liveness.NewMetrics(reg)
	grpcOpts := append(api.ServerOptions(api.NewMetrics(reg)), grpc.Creds(credentials.NewTLS(serverTLS)),
		// A connection that does not finish its TLS handshake in time is
		// closed (gRPC's default waits 120 s).
		grpc.ConnectionTimeout(handshakeTimeout(opts)),
		grpc.ChainUnaryInterceptor(h.refuseUnaryIfRemoved), grpc.ChainStreamInterceptor(h.refuseStreamIfRemoved))
	h.grpc = grpc.NewServer(append(grpcOpts, h.api.LimitOptions()...)...)
	h.api.Register(h.grpc)
	h.healthSrv = health.NewServer() // NOT_SERVING until watchHealth's first check
	h.healthSrv.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(h.grpc, h.healthSrv)
	h.apiLn = apiLn
	go h.grpc.Serve(h.apiLn)
	if httpLn != nil {
		h.httpLn = httpLn
		h.serveHTTP(httpLn)
	}

	runCtx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		defer close(h.done)
		// A member that joined but crashed before it was added as a voter
		// has Raft state but no join marker: finish the join.
		if opts.Join != "" && !exists(h.dir.joined()) {
			h.addSelfAsVoter(runCtx, clientTLS)
		}
		h.leaderLoop(runCtx)
	}()
	h.runLiveness(runCtx, liveMetrics)
	h.log.Info("hub member serving", "api", h.apiLn.Addr().String(), "raft", node.Addr(), "http", opts.HTTPAddr)
	return h, nil
}

// handshakeTimeout is opts.HandshakeTimeout or its default.
func handshakeTimeout(opts Options) time.Duration {
	if opts.HandshakeTimeout > 0 {
		return opts.HandshakeTimeout
	}
	return DefaultHandshakeTimeout
}

// ID returns the member's Raft ID.
func (h *Hub) ID() string { return h.id }

// APIAddr returns the address the API listens on.
func (h *Hub) APIAddr() string { return h.apiLn.Addr().String() }

// HTTPAddr returns the address /metrics and /healthz are served on, ""
// when Options.HTTPAddr is empty.
func (h *Hub) HTTPAddr() string {
	if h.httpLn == nil {
		return ""
	}
	return h.httpLn.Addr().String()
}

// Node returns the member's Raft node (for tests and tools).
func (h *Hub) Node() *raftnode.Node { return h.node }

// FSM returns the member's replicated state (read-only use).
func (h *Hub) FSM() *state.FSM { return h.fsm }

// DesiredState is what this member would push to Server server's agent
// now (see agentconn.Registry.DesiredState).
func (h *Hub) DesiredState(server string) *roostv1.DesiredState { return h.agents.DesiredState(server) }

// AdminConfigPath returns DIR/admin.conf.
func (h *Hub) AdminConfigPath() string { return h.dir.adminConfig() }

// WaitLeader waits until the cluster has a leader and this member has
// applied the CA and its own member record, or ctx ends.
func (h *Hub) WaitLeader(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if _, id := h.node.Leader(); id != "" && h.fsm.CA() != nil && h.hasMemberRecord() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("member %s: no leader: %w", h.id, ctx.Err())
		case <-t.C:
		}
	}
}

func (h *Hub) hasMemberRecord() bool {
	for _, m := range h.fsm.Members() {
		if m.GetId() == h.id {
			return true
		}
	}
	return false
}

// Close stops serving and shuts Raft down (a graceful stop: in-flight
// requests finish, at most 5 s). A leader with other voters first hands
// leadership to one of them (see handOverLeadership), so writes go on
// while it drains. Streams that would hold the drain are ended first:
// agents are told to go away (agentconn.Registry.GoAway) and open Watch streams
// end with Unavailable (stopping, serveUntilRemoved), so that their
// clients move to another member.
func (h *Hub) Close() error {
	if h.healthSrv != nil {
		h.healthSrv.Shutdown() // NOT_SERVING from now on: probes and load balancers move on
	}
	h.handOverLeadership()
	if h.cancel != nil {
		h.cancel()
		<-h.done
		<-h.liveDone
	}
	if h.http != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		h.http.Shutdown(sctx)
		cancel()
	}
	if h.agents != nil {
		if n := h.agents.GoAway("hub member " + h.id + " is shutting down"); n > 0 {
			h.log.Info("stopping: told agents to move to other members", "agents", n)
		}
	}
	h.stopping.set(true) // ends open Watch streams (serveUntilRemoved)
	if h.grpc != nil {
		stopped := make(chan struct{})
		go func() { h.grpc.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			h.grpc.Stop()
		}
	}
	if h.api != nil {
		h.api.Close()
	}
	var err error
	if h.node != nil {
		err = h.node.Shutdown()
	}
	if h.unlock != nil {
		h.unlock()
	}
	return err
}

// createCA makes the hub CA and this member's certificate for a new
// cluster. The CA key stays in DIR/tls/ca.key until the CA is replicated.
func (h *Hub) createCA() error {
	now := time.Now()
	authorityPB, err := ca.New("Roost hub CA", now)
	if err != nil {
		return err
	}
	authority, err := ca.Load(authorityPB)
	if err != nil {
		return err
	}
	cert, key, err := authority.Issue(h.memberProfile(), now)
	if err != nil {
		return err
	}
	for path, data := range map[string][]byte{
		h.dir.caKey(): authorityPB.GetPrivateKeyPem(), h.dir.caCert(): authorityPB.GetCertificatePem(),
		h.dir.memberCert(): append(cert, authorityPB.GetCertificatePem()...), h.dir.memberKey(): key,
	} {
		if err := writeFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (h *Hub) memberProfile() ca.Profile {
	p := ca.Profile{CommonName: h.id, Role: ca.RoleMember, Lifetime: 5 * 365 * 24 * time.Hour, DNSNames: []string{"localhost"}}
	for _, addr := range []string{h.opts.APIAddr, h.opts.RaftAddr} {
		host, _, err := net.SplitHostPort(addr)
		if err != nil || host == "" {
			continue
		}
		if ip := net.ParseIP(host); ip != nil {
			p.IPAddresses = append(p.IPAddresses, ip)
		} else {
			p.DNSNames = append(p.DNSNames, host)
		}
	}
	return p
}

func (h *Hub) loadTLS() (cert, key []byte, pool *x509.CertPool, err error) {
	return ca.ReadFiles(h.dir.memberCert(), h.dir.memberKey(), h.dir.caCert())
}

// fetchMemberCertificate runs MemberService.Join against opts.Join: it
// trusts the hub only if its CA matches the fingerprint in the token.
func (h *Hub) fetchMemberCertificate(ctx context.Context) error {
	tok, err := api.ParseJoinToken(h.opts.JoinToken)
	if err != nil {
		return err
	}
	csr, key, err := ca.NewCSR(h.id)
	if err != nil {
		return err
	}
	pinned := &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // verified below against the pinned CA fingerprint
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			return verifyPinnedChain(raw, tok.CAFingerprint)
		},
	}
	conn, err := grpc.NewClient(h.opts.Join, grpc.WithTransportCredentials(credentials.NewTLS(pinned)))
	if err != nil {
		return err
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The Raft address is the one AddVoter will add (the transport is
	// bound already): the hub refuses it now if another member has it,
	// before the token is used.
	resp, err := roostv1.NewMemberServiceClient(conn).Join(cctx, &roostv1.JoinRequest{Token: tok.String(), NodeId: h.id, CsrPem: csr, RulesVersion: state.RulesVersion,
		RaftAddress: h.raftAddr})
	if err != nil {
		return apierror.FromError(err) // keeps the field violations, which name the fix
	}
	for path, data := range map[string][]byte{h.dir.caCert(): resp.GetCaBundlePem(), h.dir.memberCert(): append(resp.GetCertificatePem(), resp.GetCaBundlePem()...), h.dir.memberKey(): key} {
		if err := writeFile(path, data, 0o600); err != nil {
			return err
		}
	}
	h.log.Info("received member certificate", "from", h.opts.Join)
	return nil
}

// verifyPinnedChain accepts a TLS chain whose last certificate is the CA
// with the given sha256 fingerprint and whose leaf that CA signed.
func verifyPinnedChain(raw [][]byte, fingerprint string) error {
	if len(raw) == 0 {
		return errors.New("hub presented no certificate")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, r := range raw {
		c, err := x509.ParseCertificate(r)
		if err != nil {
			return err
		}
		certs[i] = c
	}
	// Members send their leaf followed by the CA certificate (DIR/tls/member.crt
	// holds both), so the pinned CA is found in the chain by its fingerprint.
	for _, c := range certs {
		sum := sha256.Sum256(c.Raw)
		if hex.EncodeToString(sum[:]) == fingerprint {
			if c == certs[0] || certs[0].CheckSignatureFrom(c) == nil {
				return nil
			}
		}
	}
	return fmt.Errorf("hub certificate is not signed by the CA pinned in the join token (sha256 %s…)", fingerprint[:12])
}

// addSelfAsVoter asks the cluster to add this member, retrying until it
// succeeds or ctx ends.
func (h *Hub) addSelfAsVoter(ctx context.Context, clientTLS *tls.Config) {
	conn, err := grpc.NewClient(h.opts.Join, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)))
	if err != nil {
		h.log.Error("join: dial", "err", err)
		return
	}
	defer conn.Close()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := roostv1.NewMemberServiceClient(conn).AddVoter(cctx, &roostv1.AddVoterRequest{NodeId: h.id, RaftAddress: h.node.Addr(), ApiAddress: h.APIAddr(),
			HubVersion: version.Version, RulesVersion: state.RulesVersion})
		cancel()
		if err == nil {
			h.wasMember.Store(true)
			h.log.Info("joined the cluster as a voter", "via", h.opts.Join)
			if err := writeFile(h.dir.joined(), []byte(h.opts.Join+"\n"), 0o600); err != nil {
				h.log.Error("join: cannot record the join", "err", err)
			}
			return
		}
		wait := backoff
		if apierror.Code(err) == codes.FailedPrecondition {
			// Refused (another member holds this ID or Raft address, or this
			// roost-hub is too old): only the operator can fix it.
			wait = 30 * time.Second
			h.log.Error("join: the hub refused to add this member; retrying", "err", err, "in", wait)
		} else {
			h.log.Warn("join: add voter failed; retrying", "err", err, "in", wait)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// selfRecord is this member's HubMember: its addresses, roost-hub version
// and apply rules version.
func (h *Hub) selfRecord() *roostv1.HubMember {
	return &roostv1.HubMember{Id: h.id, RaftAddress: h.node.Addr(), ApiAddress: h.APIAddr(),
		HubVersion: version.Version, RulesVersion: state.RulesVersion}
}

// leaderLoop makes sure, once per leadership term, that the CA is
// replicated (after a bootstrap crash) and that this member's record is
// current; on the bootstrap member it also writes admin.conf once. On a
// follower it reports this member's record to the leader once (its
// roost-hub may have been upgraded), retrying every 5 s until it succeeds.
func (h *Hub) leaderLoop(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	done := false     // housekeeping succeeded in this leadership term
	reported := false // this member's record is current in the state
	var nextReport time.Time
	for {
		switch {
		case !h.node.IsLeader():
			done = false
			h.settled.Store(false)
			if _, leader := h.node.Leader(); !reported && leader != "" && time.Now().After(nextReport) {
				if err := h.api.ReportSelf(ctx, h.selfRecord()); err != nil {
					switch {
					case ctx.Err() != nil:
					case apierror.Code(err) == codes.NotFound, apierror.Code(err) == codes.Unavailable: // joining or removed; leader not ready
						h.log.Debug("cannot record this member's version on the leader yet; retrying", "err", err)
					default:
						h.log.Warn("cannot record this member's version on the leader; retrying", "err", err)
					}
					nextReport = time.Now().Add(5 * time.Second)
				} else {
					reported = true
				}
			}
		case !done:
			if err := h.reconcileSelf(ctx); err != nil {
				if ctx.Err() == nil {
					h.log.Warn("leader housekeeping failed; retrying", "err", err)
				}
			} else {
				done = true
				h.settled.Store(true)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.node.LeaderCh():
		}
	}
}

// termBarrier returns once this member's state has caught up with the log
// in the current leadership term: leaderLoop's barrier is shared by the
// leader-only controllers, so a new term costs one barrier entry, not one
// per controller. It fails after 10 s or when ctx ends.
func (h *Hub) termBarrier(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for !h.settled.Load() {
		if !h.node.IsLeader() {
			return errors.New("not the leader")
		}
		if time.Now().After(deadline) {
			return errors.New("leader housekeeping has not finished in this term")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

func (h *Hub) reconcileSelf(ctx context.Context) error {
	// A new leader may not have re-applied the log yet: read the state only
	// after a barrier, so an old CA or member record is not taken as missing.
	if err := h.node.Barrier(ctx); err != nil {
		return err
	}
	if h.fsm.CA() == nil {
		keyPEM, err := os.ReadFile(h.dir.caKey())
		if err != nil {
			return fmt.Errorf("the state has no CA and %s is missing: %w", h.dir.caKey(), err)
		}
		certPEM, err := os.ReadFile(h.dir.caCert())
		if err != nil {
			return err
		}
		if _, err := h.api.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_InitCa{InitCa: &roostv1.InitCA{
			Ca: &roostv1.CertificateAuthority{CertificatePem: certPEM, PrivateKeyPem: keyPEM},
		}}}); err != nil {
			return err
		}
	}
	if err := h.api.ReportSelf(ctx, h.selfRecord()); err != nil {
		return err
	}
	if h.opts.ForceNewCluster {
		if err := h.forgetLostMembers(ctx); err != nil {
			return err
		}
	}
	if exists(h.dir.caKey()) {
		if err := h.writeAdminConfig(); err != nil {
			return err
		}
		return os.Remove(h.dir.caKey())
	}
	return nil
}

// writeAdminConfig writes DIR/admin.conf with an admin client certificate
// (valid one year) unless it exists.
func (h *Hub) writeAdminConfig() error {
	if exists(h.dir.adminConfig()) {
		return nil
	}
	authority, err := ca.Load(h.fsm.CA())
	if err != nil {
		return err
	}
	cert, key, err := authority.Issue(ca.Profile{CommonName: "admin", Role: ca.RoleAdmin, Lifetime: 365 * 24 * time.Hour}, time.Now())
	if err != nil {
		return err
	}
	cfg := &client.Config{
		Hubs:                 []string{h.APIAddr()},
		CertificateAuthority: string(authority.CertificatePEM()),
		ClientCertificate:    string(cert),
		ClientKey:            string(key),
	}
	if err := cfg.Write(h.dir.adminConfig()); err != nil {
		return err
	}
	h.log.Info("wrote admin client configuration", "path", h.dir.adminConfig())
	return nil
}
