package hub

import (
	"context"
	"errors"
	"fmt"
	"gopkg.in/natefinch/lumberjack.v2"
	"log/slog"
	"net"
	"os"
	"runtime"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/roostfleet/roost/hub/agentconn"
	"github.com/roostfleet/roost/hub/api"
	"github.com/roostfleet/roost/hub/blobs"
	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/hub/controller"
	"github.com/roostfleet/roost/hub/fleetmetrics"
	"github.com/roostfleet/roost/hub/liveness"
	"github.com/roostfleet/roost/hub/netboot"
	"github.com/roostfleet/roost/hub/raftnode"
	"github.com/roostfleet/roost/hub/state"
	"github.com/roostfleet/roost/internal/tlsconfig"
)

// ExitRulesTooNew is roost-hub's exit status when its Raft log holds
// commands that need newer apply rules than this build implements
// (state.RulesTooNewError): 78, EX_CONFIG of sysexits.h, so a systemd unit
// can stop restarting it (RestartPreventExitStatus=78).
const ExitRulesTooNew = 78

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
		LeaderLeaseTimeout: opts.LeaderLeaseTimeout, TimingMultiplier: opts.RaftMultiplier, SnapshotThreshold: opts.SnapshotThreshold,
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
	reg.MustRegister(newRaftCollector(node, h.fsm), newLogVerifyCollector(node), fleetmetrics.NewCollector(h.fsm, nil))
	h.fleet = fleetmetrics.NewEvents(reg)
	h.blobGC = newBlobGCMetrics(reg)

	livecfg := liveness.Config{MinTTL: opts.HeartbeatMinTTL, MaxHeartbeatsPerSecond: opts.MaxHeartbeatsPerSecond}
	h.agents = agentconn.New(agentconn.Config{FSM: h.fsm, Logger: h.log})
	// The leader controllers propose through h.api, which they are handed
	// to: they only propose once running, after h.api is set.
	h.controllerMetrics = controller.NewMetrics(reg)
	h.clusters = h.clusterController()
	h.rollouts = h.rolloutController()
	h.gate = h.leaseGate()
	var netbootURL func(netboot.Grant) (string, error)
	if opts.BootAddr != "" {
		netbootURL = h.netbootURL
	}
	h.audit = &lumberjack.Logger{Filename: h.dir.audit(), MaxSize: auditMaxMB, MaxBackups: auditBackups}
	h.api = api.New(api.Config{FSM: h.fsm, Audit: h.audit, AuditPath: h.dir.audit(), Node: node, PeerCredentials: credentials.NewTLS(clientTLS), Logger: h.log, Agents: h.agents,
		AgentCertLifetime: opts.AgentCertLifetime, Liveness: livecfg, Registry: reg, Blobs: blobStore, Health: h.healthy,
		Unauthenticated: opts.Unauthenticated, LeaderReady: h.termBarrier, Leases: h.gate, Drainer: h.clusters, Fleet: h.fleet, NetbootURL: netbootURL})
	liveMetrics := liveness.NewMetrics(reg)
	apiMetrics := api.NewMetrics(reg)
	grpcOpts := append(api.ServerOptions(apiMetrics),
		grpc.Creds(api.LimitHandshakes(credentials.NewTLS(serverTLS), api.HandshakesPerCPU*runtime.GOMAXPROCS(0), handshakeTimeout(opts), apiMetrics)),
		// A connection that does not finish its TLS handshake in time is
		// closed (gRPC's default waits 120 s).
		grpc.ConnectionTimeout(handshakeTimeout(opts)),
		grpc.ChainUnaryInterceptor(h.refuseUnaryIfRemoved), grpc.ChainStreamInterceptor(h.refuseStreamIfRemoved))
	h.grpc = grpc.NewServer(append(append(grpcOpts, h.api.AuthOptions()...), h.api.LimitOptions()...)...)
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
	if opts.MediaAddr != "" {
		mln, err := net.Listen("tcp", opts.MediaAddr)
		if err != nil {
			h.grpc.Stop()
			node.Shutdown()
			return nil, fmt.Errorf("media listener (--media-addr %s): %w", opts.MediaAddr, err)
		}
		h.mediaLn = mln
		h.serveMedia(mln, serverTLS)
	}
	if opts.BootAddr != "" {
		bln, err := net.Listen("tcp", opts.BootAddr)
		if err != nil {
			h.grpc.Stop()
			node.Shutdown()
			if h.media != nil {
				h.media.Close()
			}
			return nil, fmt.Errorf("network boot listener (--boot-addr %s): %w", opts.BootAddr, err)
		}
		h.bootLn = bln
		h.serveBoot(bln)
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
