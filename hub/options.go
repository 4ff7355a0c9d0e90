package hub

import (
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/roostfleet/roost/hub/api"
)

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
	// MediaAddr is the host:port serving enrollment ISOs to BMCs as virtual
	// media over HTTPS (the member's certificate), under download tokens
	// (hub/media); empty disables it, and with it provisioning.
	MediaAddr string
	// MediaURL is the https://HOST[:PORT] BMCs reach MediaAddr by (a
	// BMC's management network may see the hub under another name);
	// empty means https://MediaAddr.
	MediaURL string
	// BootAddr is the host:port serving network boot over plain HTTP
	// (hub/netboot: iPXE scripts, the enrollment kernel and initrd, config
	// initrds) under the grants of network boot URLs; empty disables it,
	// and with it network boot tokens. Plain HTTP because iPXE ROMs trust
	// no private CA: the URLs are the credentials and expire.
	BootAddr string
	// BootURL is the http://HOST[:PORT] servers reach BootAddr by, which
	// the network boot URLs name; empty means http://BootAddr.
	BootURL string
	// BMCProbeInterval is how often the leader reads each BMC's power
	// state; default bmcs.DefaultProbeInterval.
	BMCProbeInterval time.Duration
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
	// RaftMultiplier scales Raft's default timeouts (roost-hub
	// --raft-multiplier; raftnode.Config.TimingMultiplier); 0 or 1 keep them.
	RaftMultiplier int
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
	// ControllerClock is the clock of the cluster, rollout, release feed
	// and promotion controllers (bootstrap token expiry and rotation,
	// maintenance windows, polls, soaks); nil means time.Now.
	ControllerClock func() time.Time
	// FeedPollInterval, when positive, replaces every ReleaseFeed's
	// spec.pollInterval (and caps its retry backoff): for tests and
	// demos that publish a release and want it seen in seconds.
	FeedPollInterval time.Duration
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

// handshakeTimeout is opts.HandshakeTimeout or its default.
func handshakeTimeout(opts Options) time.Duration {
	if opts.HandshakeTimeout > 0 {
		return opts.HandshakeTimeout
	}
	return DefaultHandshakeTimeout
}
