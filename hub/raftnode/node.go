package raftnode

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/verifier"
)

// Config configures one Raft member.
type Config struct {
	// ID is the member's Raft server ID (stable across restarts).
	ID string
	// Dir is the member's Raft directory; the log store and snapshots live below it.
	Dir string
	// BindAddr is the host:port the Raft transport listens on.
	BindAddr string
	// Listener, when set, is the transport's TCP listener, already bound
	// (see Listen); BindAddr is then not bound again. Open owns it from
	// then on: Shutdown closes it, and so does Open when it fails.
	Listener net.Listener
	// AdvertiseAddr is the host:port peers dial; empty means BindAddr.
	AdvertiseAddr string
	// LogStore is LogStoreWAL (default) or LogStoreBolt.
	LogStore string
	// TLS is the mutual TLS configuration of the transport (hub/ca.MutualTLS).
	TLS *tls.Config
	// FSM is the replicated state machine.
	FSM raft.FSM
	// Logger receives Raft's logs; nil logs warnings and errors to stderr.
	Logger hclog.Logger
	// HeartbeatTimeout, ElectionTimeout and LeaderLeaseTimeout override
	// Raft's defaults (1 s, 1 s, 500 ms) when non-zero.
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout time.Duration
	// TimingMultiplier scales Raft's default heartbeat, election and
	// leader lease timeouts (Consul's raft_multiplier): members that share
	// busy CPUs miss heartbeats at 1 and hold elections they need not.
	// 0 or 1 keep the defaults; the overrides above win over it.
	TimingMultiplier int
	// SnapshotThreshold is how many log entries trigger a snapshot; 0 means 8192.
	SnapshotThreshold uint64
	// SnapshotsRetained is how many snapshot files to keep; 0 means 3.
	SnapshotsRetained int
	// VerifyInterval is how often the leader appends a log verification
	// checkpoint (logverify.go) when the log grew; 0 means
	// DefaultVerifyInterval, negative appends none (Node.Checkpoint still
	// does).
	VerifyInterval time.Duration
	// VerifyReport, when set, receives every log verification report of
	// this member (one at a time; it must not block).
	VerifyReport func(verifier.VerificationReport)
	// HandshakeTimeout bounds the TLS handshake of an incoming connection:
	// one not completed by then is closed. 0 means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// MaxPendingHandshakes bounds the incoming connections in their TLS
	// handshake (beyond it the oldest is closed; one address may hold 16);
	// 0 means DefaultMaxPendingHandshakes.
	MaxPendingHandshakes int
}

// MaxAppendEntries is how many log entries the leader writes and sends
// to a follower in one batch (raft.Config.MaxAppendEntries; Raft allows
// at most 1024).
const MaxAppendEntries = 512

// Node is one running Raft member.
type Node struct {
	raft      *raft.Raft
	store     *verifiedStore
	verify    *logVerify
	stop      chan struct{} // closed by Shutdown: ends runCheckpoints
	stopOnce  sync.Once
	transport *raft.NetworkTransport
	id        raft.ServerID
	addr      raft.ServerAddress

	// fsm wraps Config.FSM to track what it applied (ReadBarrier); nil
	// when Config.FSM has optional interfaces the wrapper would hide.
	fsm *trackedFSM
	// readyTerm is the last term in which this member, leading, saw an
	// entry of that term committed (ReadBarrier).
	readyTerm atomic.Uint64
}

// ErrNotLeader is returned by leader-only operations on a follower.
var ErrNotLeader = raft.ErrNotLeader

// Open starts a Raft member. It does not bootstrap: call Bootstrap on the
// first member of a new cluster. Before Raft starts, the raft-wal log is
// verified record by record (checkWAL) and the newest snapshot against
// its checksums (checkSnapshots): damage is a *DamagedError naming the
// file, the byte offset and the Raft indexes. Other errors come from
// opening the log store, the snapshot store or the listener.
func Open(cfg Config) (*Node, error) {
	if cfg.ID == "" || cfg.Dir == "" || (cfg.BindAddr == "" && cfg.Listener == nil) || cfg.FSM == nil || cfg.TLS == nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, errors.New("raftnode: ID, Dir, BindAddr (or Listener), TLS and FSM are required")
	}
	ln := cfg.Listener
	if ln == nil {
		// Bind first: a port conflict must not leave a log store behind.
		var err error
		if ln, err = Listen(cfg.BindAddr, cfg.AdvertiseAddr); err != nil {
			return nil, fmt.Errorf("raft transport: %w", err)
		}
	}
	var tlog hclog.Logger
	if cfg.Logger != nil {
		tlog = cfg.Logger.Named("transport")
	} else {
		tlog = hclog.New(&hclog.LoggerOptions{Name: "raft.transport", Level: hclog.Warn, Output: os.Stderr})
	}
	stream, err := newTLSStreamLayer(ln, cfg.AdvertiseAddr, cfg.TLS, cfg.HandshakeTimeout, cfg.MaxPendingHandshakes, tlog)
	if err != nil {
		return nil, fmt.Errorf("raft transport: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		stream.Close()
		return nil, err
	}
	rc, store, snaps, err := openStores(cfg)
	if err != nil {
		stream.Close()
		return nil, err
	}
	transport := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  stream,
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  rc.Logger.Named("transport"),
	})
	verify := &logVerify{report: cfg.VerifyReport}
	vstore := newVerifiedStore(store, verify)
	fsm := raft.FSM(cfg.FSM)
	tracked := newTrackedFSM(cfg.FSM)
	if tracked != nil {
		fsm = tracked
	}
	r, err := raft.NewRaft(rc, fsm, vstore, vstore, snaps, transport)
	if err != nil {
		transport.Close()
		vstore.Close()
		return nil, err
	}
	n := &Node{raft: r, store: vstore, verify: verify, stop: make(chan struct{}), transport: transport, id: rc.LocalID, addr: transport.LocalAddr(), fsm: tracked}
	interval := cfg.VerifyInterval
	if interval == 0 {
		interval = DefaultVerifyInterval
	}
	if interval > 0 {
		go n.runCheckpoints(interval)
	}
	return n, nil
}

// openStores returns the Raft configuration for cfg and opens its log and
// snapshot stores, verified (see Open); the caller closes the log store.
func openStores(cfg Config) (*raft.Config, logStore, raft.SnapshotStore, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: os.Stderr})
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = logger
	// Group commits: the leader writes (one fsync) and replicates up to
	// MaxAppendEntries queued entries at once, and followers store them
	// with one fsync; Raft's default of 64 caps a busy hub's throughput
	// at 64 entries per disk round trip. BatchApplyCh buffers Raft's
	// apply queue as deep, so proposers do not wait on the leader's loop
	// one by one while it writes.
	rc.MaxAppendEntries = MaxAppendEntries
	rc.BatchApplyCh = true
	setTiming(rc, cfg)
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	retain := cfg.SnapshotsRetained
	if retain == 0 {
		retain = 3
	}
	store, err := openLogStore(cfg.LogStore, cfg.Dir)
	if err != nil {
		if _, ok := errors.AsType[*DamagedError](err); ok {
			return nil, nil, nil, err
		}
		return nil, nil, nil, fmt.Errorf("open raft log store: %w", err)
	}
	first, err := store.FirstIndex()
	var last uint64
	if err == nil {
		last, err = store.LastIndex()
	}
	if err == nil {
		err = checkSnapshots(filepath.Join(cfg.Dir, "snapshots"), first, last)
	}
	if err != nil {
		store.Close()
		return nil, nil, nil, err
	}
	snaps, err := newSnapshotStore(cfg.Dir, retain, logger.Named("snapshots"))
	if err != nil {
		store.Close()
		return nil, nil, nil, fmt.Errorf("open snapshot store: %w", err)
	}
	return rc, store, snaps, nil
}

// Recover makes the member in cfg.Dir the only voter of its Raft
// configuration, at addr (its Raft address), with raft.RecoverCluster: for
// a hub that lost a majority of its members for good, which can elect no
// leader and change no configuration. It replays the member's log into
// cfg.FSM (a fresh one), writes a snapshot of it and a configuration entry,
// and keeps everything the member had. Run it with the member stopped (Open
// not called); start the member normally afterwards. cfg.Listener and TLS
// are not used. Errors: the stores cannot be opened, or there is no state
// to recover (raft.RecoverCluster's error), or a *DamagedError as Open's.
func Recover(cfg Config, addr string) error {
	if cfg.ID == "" || cfg.Dir == "" || addr == "" || cfg.FSM == nil {
		return errors.New("raftnode: ID, Dir, the Raft address and FSM are required to recover")
	}
	rc, store, snaps, err := openStores(cfg)
	if err != nil {
		return err
	}
	defer store.Close()
	_, trans := raft.NewInmemTransport(raft.ServerAddress(addr))
	defer trans.Close()
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(cfg.ID), Address: raft.ServerAddress(addr)}}}
	return raft.RecoverCluster(rc, cfg.FSM, store, store, snaps, trans, conf)
}

// HasState reports whether the member's directory already holds Raft state
// (a log, a term or a snapshot), i.e. whether it was bootstrapped or joined before.
func HasState(cfg Config) (bool, error) {
	if _, err := os.Stat(cfg.Dir); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	entries, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return false, err
	}
	return len(entries) > 0, nil
}

// Bootstrap makes this member the single voter of a new cluster. It is a
// no-op error (raft.ErrCantBootstrap) when state already exists.
func (n *Node) Bootstrap() error {
	f := n.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: n.id, Address: n.addr, Suffrage: raft.Voter}}})
	return f.Error()
}

// ID returns the member's Raft server ID.
func (n *Node) ID() string { return string(n.id) }

// Addr returns the member's advertised Raft address.
func (n *Node) Addr() string { return string(n.addr) }

// Apply proposes data as one log entry and waits until it is applied to
// the local FSM, returning the FSM's response and the entry's index.
// Errors that guarantee nothing was appended come as Raft's own
// (ErrNotLeader on followers, ErrLeadershipTransferInProgress,
// ErrEnqueueTimeout, ErrRaftShutdown before the entry was queued); every
// other failure after the entry was queued (raft.ErrLeadershipLost before
// commit, a shutdown, ctx's end) is an *OutcomeUnknownError: the entry may
// or may not commit.
func (n *Node) Apply(ctx context.Context, data []byte) (any, uint64, error) {
	timeout := 30 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	f := n.raft.Apply(data, timeout)
	queued := !neverQueued(f)
	if err := waitFuture(ctx, f); err != nil {
		return nil, 0, classifyApply(err, queued)
	}
	return f.Response(), f.Index(), nil
}

// Barrier waits until every entry committed before the call is applied to
// the local FSM. On the leader it commits an entry of the current term (a
// log append, fsynced on a quorum), so a successful Barrier also proves
// leadership at that point. For linearizable reads use ReadBarrier, which
// writes nothing.
func (n *Node) Barrier(ctx context.Context) error {
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	return waitFuture(ctx, n.raft.Barrier(timeout))
}

func waitFuture(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// IsLeader reports whether this member currently believes it leads.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the current leader's Raft address and ID, empty when unknown.
func (n *Node) Leader() (addr, id string) {
	a, i := n.raft.LeaderWithID()
	return string(a), string(i)
}

// LeaderCh reports leadership changes of this member (true: became leader).
func (n *Node) LeaderCh() <-chan bool { return n.raft.LeaderCh() }

// State returns "Leader", "Follower", "Candidate" or "Shutdown".
func (n *Node) State() string { return n.raft.State().String() }

// Servers returns the latest Raft configuration.
func (n *Node) Servers() ([]raft.Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	return f.Configuration().Servers, nil
}

// AddVoter adds (or updates) a voting member; leader only.
func (n *Node) AddVoter(ctx context.Context, id, addr string) error {
	return waitFuture(ctx, n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, 30*time.Second))
}

// RemoveServer removes a member; leader only.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	return waitFuture(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, 30*time.Second))
}

// Snapshot forces a snapshot now (tests and operators).
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// Restore replaces the FSM's state with state (bytes as the FSM's
// snapshots hold them) through Raft's user restore (raft.Raft.Restore):
// the leader installs them as a snapshot at an index past its last one,
// keeping the current Raft configuration, and followers receive that
// snapshot. On the leader only; it blocks until the restore is done or
// timeout passes, and returns raft's error (ErrNotLeader and the like) or
// the FSM's.
func (n *Node) Restore(state []byte, timeout time.Duration) error {
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: int64(len(state))}
	return n.raft.Restore(meta, bytes.NewReader(state), timeout)
}

// Stats returns Raft's diagnostic counters (see raft.Raft.Stats).
func (n *Node) Stats() map[string]string { return n.raft.Stats() }

// AppliedIndex returns the last index applied to the FSM.
func (n *Node) AppliedIndex() uint64 { return n.raft.AppliedIndex() }

// LastIndex returns the index of the last entry in the local log (or of
// the last snapshot), committed or not.
func (n *Node) LastIndex() uint64 { return n.raft.LastIndex() }

// CommitIndex returns the highest index this member knows to be committed
// (on a follower, as far as the leader has told it).
func (n *Node) CommitIndex() uint64 { return n.raft.CommitIndex() }

// Shutdown stops Raft, then closes the transport and the log store.
func (n *Node) Shutdown() error {
	n.stopOnce.Do(func() { close(n.stop) })
	err := n.raft.Shutdown().Error()
	n.transport.Close()
	if cerr := n.store.Close(); err == nil {
		err = cerr
	}
	return err
}

// LeadershipTransfer asks this member, which must lead, to hand leadership
// to another voter (operators' maintenance, and tests that force elections).
func (n *Node) LeadershipTransfer(ctx context.Context) error {
	return waitFuture(ctx, n.raft.LeadershipTransfer())
}

// setTiming sets rc's heartbeat, election and leader lease timeouts from
// cfg: Raft's defaults times cfg.TimingMultiplier (when above 1), then
// cfg's explicit overrides.
func setTiming(rc *raft.Config, cfg Config) {
	if m := time.Duration(cfg.TimingMultiplier); m > 1 {
		rc.HeartbeatTimeout *= m
		rc.ElectionTimeout *= m
		rc.LeaderLeaseTimeout *= m
	}
	if cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	}
	if cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = cfg.ElectionTimeout
	}
	if cfg.LeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	}
}
