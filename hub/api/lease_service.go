package api

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/hub/rollout"
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

// Admitter decides whether a Machine of a Pool may start a reboot now
// (implemented by hub/rollout: maintenance windows, maxUnavailable
// counting Machines down for any reason, settle, halts). It runs on the
// leader before a Lease is granted (not for a Lease already held).
type Admitter interface {
	Admit(ctx context.Context, m *roostv1.Machine) (ok bool, reason string)
}

// Drainer prepares worker Machines (status.cluster set) for a reboot
// (implemented by hub/clusters; CheckCluster and Drain run on the leader
// in the agent's AcquireLease call) and for their release (PrepareRelease
// and CancelRelease, in the calls that release Machines).
type Drainer interface {
	// CheckCluster returns nil when m's Cluster API answers with the
	// hub's credentials, else why not (no worker of an unreachable
	// cluster gets a Lease).
	CheckCluster(ctx context.Context, m *roostv1.Machine) error
	// Drain cordons and drains m's Node for the Lease with the fencing
	// token, without waiting: done once drained; an error when the drain
	// failed (the Node is schedulable again; the Lease must be released).
	Drain(ctx context.Context, m *roostv1.Machine, fencing uint64) (done bool, err error)
	// PrepareRelease cordons and drains the Nodes of worker Machines ms
	// before they are released, without waiting: done once every Node is
	// drained; an error names the drain that failed.
	PrepareRelease(ctx context.Context, ms []*roostv1.Machine) (done bool, err error)
	// CancelRelease gives the release of ms up: their Nodes become
	// schedulable again.
	CancelRelease(ms []*roostv1.Machine)
}

// AcquireLease grants the calling Server a Lease to reboot into its
// desired Revision (see AgentService in agent.proto). A member that does
// not lead forwards the call, naming the Server in the request.
func (s *Server) AcquireLease(ctx context.Context, req *roostv1.AcquireLeaseRequest) (*roostv1.AcquireLeaseResponse, error) {
	role, cn, _ := ca.PeerRole(ctx)
	server := cn
	if role == ca.RoleMember {
		server = req.GetServer()
	}
	if server == "" {
		return nil, apierror.Invalid("invalid lease request", apierror.Violation{Field: "server", Message: "is required when a member forwards the call"})
	}
	if req.GetRevision() < 1 {
		return nil, apierror.Invalid("invalid lease request", apierror.Violation{Field: "revision", Message: fmt.Sprintf("must be ≥ 1, got %d", req.GetRevision())})
	}
	return onLeader(ctx, s, func() (*roostv1.AcquireLeaseResponse, error) {
		return s.grantLease(ctx, server, req.GetRevision())
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.AcquireLeaseResponse, error) {
		return roostv1.NewAgentServiceClient(c).AcquireLease(fctx, &roostv1.AcquireLeaseRequest{Revision: req.GetRevision(), Server: server})
	})
}

func (s *Server) grantLease(ctx context.Context, server string, revision int64) (*roostv1.AcquireLeaseResponse, error) {
	d := s.agents.DesiredState(server)
	switch {
	case d.GetRevision() != revision:
		return nil, apierror.FailedPrecondition("Revision %d is not Server %s's desired Revision (%d)", revision, server, d.GetRevision())
	case d.GetFailed():
		return nil, apierror.FailedPrecondition("Revision %d of Server %s failed; the hub does not retry it", revision, server)
	}
	m := s.fsm.MachineOf(server)
	maxUnavailable, ttl := int32(1), DefaultLeaseTTL
	if m != nil && m.GetSpec().GetPool() != "" {
		if o, err := s.fsm.Get("Pool", m.GetSpec().GetPool()); err == nil {
			p := o.GetPool()
			maxUnavailable = rollout.MaxUnavailable(p)
			if rt := p.GetSpec().GetRollout().GetReadyTimeout(); rt != nil && rt.AsDuration() > 0 {
				ttl = rt.AsDuration()
			}
		}
	}
	var held *roostv1.Lease
	if o, err := s.fsm.Get("Lease", server); err == nil && o.GetLease().GetSpec().GetExpiresAt().AsTime().After(s.now()) {
		held = o.GetLease()
	}
	if held == nil && m != nil && s.admitter != nil {
		if ok, reason := s.admitter.Admit(ctx, m); !ok {
			return &roostv1.AcquireLeaseResponse{Reason: reason, RetryAfterSeconds: admitRetryAfter}, nil
		}
	}
	worker := m != nil && m.GetStatus().GetCluster() != "" && s.drainer != nil
	if worker {
		if err := s.drainer.CheckCluster(ctx, m); err != nil {
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
	l, err := s.proposeLease(ctx, server, revision, ttl, maxUnavailable, phase)
	if err != nil || l == nil {
		return leaseRefusal(err)
	}
	if l.GetSpec().GetPhase() == state.LeaseDraining {
		done, err := s.drainer.Drain(ctx, m, l.GetSpec().GetFencingToken())
		switch {
		case err != nil:
			// Give the slot back; the Node was uncordoned. Retry later.
			if _, rerr := s.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_ReleaseLeases{ReleaseLeases: &roostv1.ReleaseLeases{
				Servers: []string{server}, FencingTokens: []uint64{l.GetSpec().GetFencingToken()}}}}); rerr != nil {
				return nil, rerr
			}
			return &roostv1.AcquireLeaseResponse{Reason: "drain failed, the Lease was released: " + err.Error(), RetryAfterSeconds: drainRetryAfter}, nil
		case !done:
			return &roostv1.AcquireLeaseResponse{Reason: fmt.Sprintf("draining Node %s before the reboot", m.GetStatus().GetNodeName()), RetryAfterSeconds: drainPollAfter}, nil
		}
		if l, err = s.proposeLease(ctx, server, revision, ttl, maxUnavailable, state.LeaseGranted); err != nil || l == nil {
			return leaseRefusal(err)
		}
	}
	s.log.Info("lease granted", "server", server, "revision", revision, "fencing", l.GetSpec().GetFencingToken())
	return &roostv1.AcquireLeaseResponse{Granted: true, FencingToken: l.GetSpec().GetFencingToken(), ExpiresAt: l.GetSpec().GetExpiresAt()}, nil
}

// proposeLease writes a GrantLease command and returns the stored Lease;
// a full Pool is (nil, ResourceExhausted error).
func (s *Server) proposeLease(ctx context.Context, server string, revision int64, ttl time.Duration, maxUnavailable int32, phase string) (*roostv1.Lease, error) {
	now := s.now()
	if _, err := s.Propose(ctx, &roostv1.Command{Time: timestamppb.New(now), Command: &roostv1.Command_GrantLease{GrantLease: &roostv1.GrantLease{
		Server: server, Revision: revision, ExpiresAt: timestamppb.New(now.Add(ttl)), MaxUnavailable: maxUnavailable, Uid: uuid.NewString(), Phase: phase,
	}}}); err != nil {
		return nil, err
	}
	o, err := s.fsm.Get("Lease", server)
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
