package hub

import (
	"context"
	"fmt"
	"gopkg.in/natefinch/lumberjack.v2"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"

	"github.com/roostfleet/roost/hub/agentconn"
	"github.com/roostfleet/roost/hub/api"
	"github.com/roostfleet/roost/hub/blobs"
	"github.com/roostfleet/roost/hub/clusters"
	"github.com/roostfleet/roost/hub/controller"
	"github.com/roostfleet/roost/hub/fleetmetrics"
	"github.com/roostfleet/roost/hub/raftnode"
	"github.com/roostfleet/roost/hub/rollout"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

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
	// media serves virtual media to BMCs (nil without Options.MediaAddr).
	media   *http.Server
	mediaLn net.Listener
	// boot serves network boot (nil without Options.BootAddr).
	boot   *http.Server
	bootLn net.Listener
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
	// fleet records the fleet's events (lease waits, drains, enrollments).
	fleet *fleetmetrics.Events
	// audit is the audit log, DATA_DIR/audit/audit.log, rotated at
	// auditMaxMB with auditBackups old files kept.
	audit *lumberjack.Logger
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
