package rollout

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/controller"
	"github.com/roostfleet/roost/hub/fleetmetrics"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// DefaultLeaseTTL is how long a reboot Lease lasts when the Pool sets no
// rollout.readyTimeout: the reboot, the boot and the boot assessment must
// fit in it. A Server that booted its Revision healthy releases it early.
const DefaultLeaseTTL = 30 * time.Minute

// What a refused agent is told to wait, in seconds: a full Pool or an
// unreachable cluster; a drain in progress; a failed drain.
const (
	leaseRetryAfter = 15
	drainPollAfter  = 5
	drainRetryAfter = 60
	// drainCheck is how often the gate's loop looks at a running drain.
	drainCheck = time.Second
	// admitRetryAfter: the rollout does not admit the reboot now
	// (outside windows, paused, halted, settling, pool full).
	admitRetryAfter = 30
)

// Drainer prepares worker Machines (status.cluster set) for a reboot
// (implemented by hub/clusters).
type Drainer interface {
	// CheckCluster returns nil when m's Cluster API answers with the
	// hub's credentials, else why not (no worker of an unreachable
	// cluster gets a Lease).
	CheckCluster(ctx context.Context, m *roostv1.Machine) error
	// Drain cordons and drains m's Node for the Lease with the fencing
	// token, without waiting: done once drained; an error when the drain
	// failed (the Node is schedulable again; the Lease must be released).
	Drain(ctx context.Context, m *roostv1.Machine, fencing uint64) (done bool, err error)
}

// Gate is the reboot gate: it grants a Server a Lease to reboot into its
// desired Revision (AgentService.AcquireLease, on the leader) after
// admitting the reboot by its Pool's rollout rules (Admit), checking a
// worker's Cluster and draining its Node (Drainer). Set the fields, then
// call Run, and AcquireLease for each request.
//
// A worker's Lease is recorded first in phase Draining: from then on the
// drain is driven by the state, not by the agent's polls. Run is a
// hub/controller loop keyed by Server over the Leases: it starts the drain
// of each Draining Lease (again after a change of leader), moves the Lease
// to Granted once the Node is drained, or releases it when the drain
// failed, which the Server's next AcquireLease reports.
type Gate struct {
	// IsLeader and Barrier run the loop only on the leader (see
	// hub/controller).
	IsLeader func() bool
	Barrier  func(context.Context) error
	// Metrics, if set, receives the loop's queue metrics.
	Metrics *controller.Metrics
	// Events, if set, receives lease waits and drain durations.
	Events *fleetmetrics.Events
	// FSM is the replicated state.
	FSM *state.FSM
	// Propose writes a command through Raft (on the leader).
	Propose func(context.Context, *roostv1.Command) error
	// Desired returns what Server server should run now (its desired
	// Revision's number and whether it failed).
	Desired func(server string) *roostv1.DesiredState
	// Admit, if set, says whether Machine m may start a reboot now
	// (Controller.Admit); nil admits all (the Lease's own maxUnavailable
	// check still holds). It is not asked for a Lease already held.
	Admit func(ctx context.Context, m *roostv1.Machine) (ok bool, reason string)
	// Drainer, if set, drains workers before their Lease is granted; nil
	// grants them like any other Lease.
	Drainer Drainer
	// NewUID returns a fresh UID for each GrantLease command.
	NewUID func() string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	Log *slog.Logger

	mu sync.Mutex
	// failed holds, per Server, why the drain of its last Lease failed,
	// until its next AcquireLease reports it.
	failed map[string]string
	// waitSince holds, per Server asking for a Lease in vain, when it
	// first asked; drainSince, per Server whose Lease drains, when this
	// member started the drain (see gatetiming.go).
	waitSince  map[string]waitStart
	drainSince map[string]drainStart
}

// Run drives the drains of Draining Leases while this member leads, until
// ctx ends.
func (g *Gate) Run(ctx context.Context) {
	(&controller.Controller{
		Name: "reboot-gate", Reconcile: g.Reconcile, Watch: g.FSM.Subscribe, IsLeader: g.IsLeader, Barrier: g.Barrier,
		Sources: []controller.Source{{Kind: "Lease", Keys: controller.ByName}}, Metrics: g.Metrics, Log: g.Log,
	}).Run(ctx)
}

// Reconcile moves Server server's Draining Lease on: it drains the
// worker's Node (Drainer.Drain, which does not wait; the key comes back
// every drainCheck while it runs), then grants the Lease, or releases it
// when the drain failed. Other Leases are left alone.
func (g *Gate) Reconcile(ctx context.Context, server string) (controller.Result, error) {
	o, err := g.FSM.Get("Lease", server)
	if err != nil {
		return controller.Result{}, nil
	}
	l := o.GetLease().GetSpec()
	if l.GetPhase() != state.LeaseDraining || !l.GetExpiresAt().AsTime().After(g.now()) || g.Drainer == nil {
		return controller.Result{}, nil
	}
	m := g.FSM.MachineOf(server)
	if m == nil {
		return controller.Result{}, nil
	}
	g.draining(server, l.GetFencingToken())
	done, err := g.Drainer.Drain(ctx, m, l.GetFencingToken())
	switch {
	case err != nil:
		g.drained(server, m.GetSpec().GetPool(), fleetmetrics.DrainFailed)
		// Give the slot back; the Node was uncordoned. The agent hears
		// why at its next request.
		if rerr := g.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_ReleaseLeases{ReleaseLeases: &roostv1.ReleaseLeases{
			Servers: []string{server}, FencingTokens: []uint64{l.GetFencingToken()}}}}); rerr != nil {
			return controller.Result{}, rerr
		}
		g.mu.Lock()
		if g.failed == nil {
			g.failed = map[string]string{}
		}
		g.failed[server] = err.Error()
		g.mu.Unlock()
		return controller.Result{}, nil
	case !done:
		return controller.Result{RequeueAfter: drainCheck}, nil
	}
	maxUnavailable, ttl := g.terms(m)
	if _, err := g.proposeLease(ctx, server, l.GetRevision(), ttl, maxUnavailable, state.LeaseGranted); err != nil {
		return controller.Result{}, err
	}
	g.drained(server, m.GetSpec().GetPool(), fleetmetrics.DrainDrained)
	g.granted(server, m.GetSpec().GetPool(), l.GetRevision())
	g.log().Info("lease granted after the drain", "server", server, "revision", l.GetRevision(), "fencing", l.GetFencingToken())
	return controller.Result{}, nil
}

// terms are the maxUnavailable and the time to live of a Lease of m: its
// Pool's rollout.maxUnavailable and readyTimeout, or 1 and
// DefaultLeaseTTL.
func (g *Gate) terms(m *roostv1.Machine) (int32, time.Duration) {
	maxUnavailable, ttl := int32(1), DefaultLeaseTTL
	if m != nil && m.GetSpec().GetPool() != "" {
		if o, err := g.FSM.Get("Pool", m.GetSpec().GetPool()); err == nil {
			p := o.GetPool()
			maxUnavailable = MaxUnavailable(p)
			if rt := p.GetSpec().GetRollout().GetReadyTimeout(); rt != nil && rt.AsDuration() > 0 {
				ttl = rt.AsDuration()
			}
		}
	}
	return maxUnavailable, ttl
}

// takeFailure returns and forgets why the drain of server's last Lease
// failed, "" when it did not.
func (g *Gate) takeFailure(server string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	why := g.failed[server]
	delete(g.failed, server)
	return why
}

func (g *Gate) now() time.Time {
	if g.Now == nil {
		return time.Now()
	}
	return g.Now()
}

func (g *Gate) log() *slog.Logger {
	if g.Log == nil {
		return slog.Default()
	}
	return g.Log
}

// AcquireLease grants Server server a Lease to reboot into Revision
// revision, or says why not and when to ask again. A Revision that is not
// the Server's desired one, or that failed, is FailedPrecondition; a full
// Pool is a refusal, not an error.
func (g *Gate) AcquireLease(ctx context.Context, server string, revision int64) (resp *roostv1.AcquireLeaseResponse, err error) {
	defer func() {
		// Every answer but a grant or an error makes the Server wait.
		if err == nil && !resp.GetGranted() {
			g.refused(server, revision)
		}
	}()
	d := g.Desired(server)
	switch {
	case d.GetRevision() != revision:
		return nil, apierror.FailedPrecondition("Revision %d is not Server %s's desired Revision (%d)", revision, server, d.GetRevision())
	case d.GetFailed():
		return nil, apierror.FailedPrecondition("Revision %d of Server %s failed; the hub does not retry it", revision, server)
	}
	m := g.FSM.MachineOf(server)
	maxUnavailable, ttl := g.terms(m)
	var held *roostv1.Lease
	if o, err := g.FSM.Get("Lease", server); err == nil && o.GetLease().GetSpec().GetExpiresAt().AsTime().After(g.now()) {
		held = o.GetLease()
	}
	if held.GetSpec().GetPhase() == state.LeaseDraining {
		return draining(m), nil
	}
	if held == nil {
		if why := g.takeFailure(server); why != "" {
			return &roostv1.AcquireLeaseResponse{Reason: "drain failed, the Lease was released: " + why, RetryAfterSeconds: drainRetryAfter}, nil
		}
		if m != nil && g.Admit != nil {
			if ok, reason := g.Admit(ctx, m); !ok {
				return &roostv1.AcquireLeaseResponse{Reason: reason, RetryAfterSeconds: admitRetryAfter}, nil
			}
		}
	}
	worker := m != nil && m.GetStatus().GetCluster() != "" && g.Drainer != nil
	if worker {
		if err := g.Drainer.CheckCluster(ctx, m); err != nil {
			return &roostv1.AcquireLeaseResponse{Reason: err.Error(), RetryAfterSeconds: leaseRetryAfter}, nil
		}
	}
	phase := state.LeaseGranted
	if worker && held == nil {
		// Run drains the Node, then grants the Lease.
		phase = state.LeaseDraining
	}
	l, err := g.proposeLease(ctx, server, revision, ttl, maxUnavailable, phase)
	if err != nil || l == nil {
		return leaseRefusal(err)
	}
	if l.GetSpec().GetPhase() == state.LeaseDraining {
		return draining(m), nil
	}
	if held == nil {
		g.granted(server, m.GetSpec().GetPool(), revision)
	}
	g.log().Info("lease granted", "server", server, "revision", revision, "fencing", l.GetSpec().GetFencingToken())
	return &roostv1.AcquireLeaseResponse{Granted: true, FencingToken: l.GetSpec().GetFencingToken(), ExpiresAt: l.GetSpec().GetExpiresAt()}, nil
}

// draining is the answer while worker m's Node drains for its Lease.
func draining(m *roostv1.Machine) *roostv1.AcquireLeaseResponse {
	return &roostv1.AcquireLeaseResponse{Reason: fmt.Sprintf("draining Node %s before the reboot", m.GetStatus().GetNodeName()), RetryAfterSeconds: drainPollAfter}
}

// proposeLease writes a GrantLease command and returns the stored Lease;
// a full Pool is (nil, ResourceExhausted error).
func (g *Gate) proposeLease(ctx context.Context, server string, revision int64, ttl time.Duration, maxUnavailable int32, phase string) (*roostv1.Lease, error) {
	now := g.now()
	if err := g.Propose(ctx, &roostv1.Command{Time: timestamppb.New(now), Command: &roostv1.Command_GrantLease{GrantLease: &roostv1.GrantLease{
		Server: server, Revision: revision, ExpiresAt: timestamppb.New(now.Add(ttl)), MaxUnavailable: maxUnavailable, Uid: g.NewUID(), Phase: phase,
	}}}); err != nil {
		return nil, err
	}
	o, err := g.FSM.Get("Lease", server)
	if err != nil {
		return nil, err
	}
	return o.GetLease(), nil
}

// leaseRefusal turns a full Pool into a "not granted, retry" answer and
// passes other errors on.
func leaseRefusal(err error) (*roostv1.AcquireLeaseResponse, error) {
	if apierror.Code(err) == codes.ResourceExhausted {
		return &roostv1.AcquireLeaseResponse{Reason: apierror.FromError(err).Message, RetryAfterSeconds: leaseRetryAfter}, nil
	}
	return nil, err
}
