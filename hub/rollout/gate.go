package rollout

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
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
// call AcquireLease.
type Gate struct {
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
func (g *Gate) AcquireLease(ctx context.Context, server string, revision int64) (*roostv1.AcquireLeaseResponse, error) {
	d := g.Desired(server)
	switch {
	case d.GetRevision() != revision:
		return nil, apierror.FailedPrecondition("Revision %d is not Server %s's desired Revision (%d)", revision, server, d.GetRevision())
	case d.GetFailed():
		return nil, apierror.FailedPrecondition("Revision %d of Server %s failed; the hub does not retry it", revision, server)
	}
	m := g.FSM.MachineOf(server)
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
	var held *roostv1.Lease
	if o, err := g.FSM.Get("Lease", server); err == nil && o.GetLease().GetSpec().GetExpiresAt().AsTime().After(g.now()) {
		held = o.GetLease()
	}
	if held == nil && m != nil && g.Admit != nil {
		if ok, reason := g.Admit(ctx, m); !ok {
			return &roostv1.AcquireLeaseResponse{Reason: reason, RetryAfterSeconds: admitRetryAfter}, nil
		}
	}
	worker := m != nil && m.GetStatus().GetCluster() != "" && g.Drainer != nil
	if worker {
		if err := g.Drainer.CheckCluster(ctx, m); err != nil {
			return &roostv1.AcquireLeaseResponse{Reason: err.Error(), RetryAfterSeconds: leaseRetryAfter}, nil
		}
	}
	phase := state.LeaseGranted
	if worker {
		phase = state.LeaseDraining
		if held != nil {
			// A held Lease keeps its phase until the drain says otherwise.
			phase = held.GetSpec().GetPhase()
		}
	}
	l, err := g.proposeLease(ctx, server, revision, ttl, maxUnavailable, phase)
	if err != nil || l == nil {
		return leaseRefusal(err)
	}
	if l.GetSpec().GetPhase() == state.LeaseDraining {
		done, err := g.Drainer.Drain(ctx, m, l.GetSpec().GetFencingToken())
		switch {
		case err != nil:
			// Give the slot back; the Node was uncordoned. Retry later.
			if rerr := g.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_ReleaseLeases{ReleaseLeases: &roostv1.ReleaseLeases{
				Servers: []string{server}, FencingTokens: []uint64{l.GetSpec().GetFencingToken()}}}}); rerr != nil {
				return nil, rerr
			}
			return &roostv1.AcquireLeaseResponse{Reason: "drain failed, the Lease was released: " + err.Error(), RetryAfterSeconds: drainRetryAfter}, nil
		case !done:
			return &roostv1.AcquireLeaseResponse{Reason: fmt.Sprintf("draining Node %s before the reboot", m.GetStatus().GetNodeName()), RetryAfterSeconds: drainPollAfter}, nil
		}
		if l, err = g.proposeLease(ctx, server, revision, ttl, maxUnavailable, state.LeaseGranted); err != nil || l == nil {
			return leaseRefusal(err)
		}
	}
	g.log().Info("lease granted", "server", server, "revision", revision, "fencing", l.GetSpec().GetFencingToken())
	return &roostv1.AcquireLeaseResponse{Granted: true, FencingToken: l.GetSpec().GetFencingToken(), ExpiresAt: l.GetSpec().GetExpiresAt()}, nil
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
