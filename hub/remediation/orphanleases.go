package remediation

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/roostfleet/roost/hub/controller"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// LeaseCollector removes orphan Leases: a Lease whose Server is gone or
// Decommissioned lets nothing reboot and would hold a place under its
// Pool's maxUnavailable until it expires. A hub/controller loop keyed by
// Lease (Server) name; each removal is counted in
// roost_orphans_removed_total{kind="lease"}.
type LeaseCollector struct {
	IsLeader func() bool
	FSM      *state.FSM
	// Propose writes a command through Raft (on the leader).
	Propose func(context.Context, *roostv1.Command) error
	Barrier func(context.Context) error
	Metrics *controller.Metrics
	Log     *slog.Logger
}

// Run reconciles each Lease when it or its Server changes while this
// member leads.
func (c *LeaseCollector) Run(ctx context.Context) {
	(&controller.Controller{
		Name: "orphan-leases", Reconcile: c.Reconcile, Watch: c.FSM.Subscribe, IsLeader: c.IsLeader, Barrier: c.Barrier,
		Sources: []controller.Source{{Kind: "Lease", Keys: controller.ByName}, {Kind: "Server", Keys: func(ev *roostv1.WatchEvent) []string {
			if c.FSM.Reader().Get("Lease", resource.NameOf(ev.GetObject())) != nil {
				return []string{resource.NameOf(ev.GetObject())}
			}
			return nil
		}}},
		Metrics: c.Metrics, Log: c.Log,
	}).Run(ctx)
}

// Reconcile releases Lease server when its Server is gone or
// Decommissioned (with its fencing token, so a newer Lease is kept).
func (c *LeaseCollector) Reconcile(ctx context.Context, server string) (controller.Result, error) {
	r := c.FSM.Reader()
	l := r.Get("Lease", server).GetLease()
	if l == nil {
		return controller.Result{}, nil
	}
	srv := r.Get("Server", server).GetServer()
	why := ""
	switch {
	case srv == nil:
		why = "its Server is gone"
	case srv.GetStatus().GetState() == state.ServerDecommissioned:
		why = "its Server is Decommissioned"
	default:
		return controller.Result{}, nil
	}
	if err := c.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_ReleaseLeases{ReleaseLeases: &roostv1.ReleaseLeases{
		Servers: []string{server}, FencingTokens: []uint64{l.GetSpec().GetFencingToken()}}}}); err != nil {
		return controller.Result{}, fmt.Errorf("releasing the orphan Lease of %s: %w", server, err)
	}
	c.Metrics.OrphansRemoved(controller.OrphanLease, 1)
	logOf(c.Log).Info("released an orphan Lease", "server", server, "why", why)
	return controller.Result{}, nil
}
