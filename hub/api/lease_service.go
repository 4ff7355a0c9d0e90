package api

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/ca"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// DefaultLeaseTTL is how long a reboot Lease lasts when the Pool sets no
// rollout.readyTimeout: the reboot, the boot and the boot assessment must
// fit in it. A Server that booted its Revision healthy releases it early.
const DefaultLeaseTTL = 30 * time.Minute

// leaseRetryAfter is what a refused agent is told to wait, in seconds.
const leaseRetryAfter = 15

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
	d := s.DesiredState(server)
	switch {
	case d.GetRevision() != revision:
		return nil, apierror.FailedPrecondition("Revision %d is not Server %s's desired Revision (%d)", revision, server, d.GetRevision())
	case d.GetFailed():
		return nil, apierror.FailedPrecondition("Revision %d of Server %s failed; the hub does not retry it", revision, server)
	}
	maxUnavailable, ttl := int32(1), DefaultLeaseTTL
	if m := s.fsm.MachineOf(server); m != nil && m.GetSpec().GetPool() != "" {
		if o, err := s.fsm.Get("Pool", m.GetSpec().GetPool()); err == nil {
			p := o.GetPool()
			maxUnavailable = MaxUnavailable(p)
			if rt := p.GetSpec().GetRollout().GetReadyTimeout(); rt != nil && rt.AsDuration() > 0 {
				ttl = rt.AsDuration()
			}
		}
	}
	now := s.now()
	res, err := s.Propose(ctx, &roostv1.Command{Time: timestamppb.New(now), Command: &roostv1.Command_GrantLease{GrantLease: &roostv1.GrantLease{
		Server: server, Revision: revision, ExpiresAt: timestamppb.New(now.Add(ttl)), MaxUnavailable: maxUnavailable, Uid: uuid.NewString(),
	}}})
	if err != nil {
		if apierror.Code(err) == codes.ResourceExhausted {
			return &roostv1.AcquireLeaseResponse{Reason: apierror.FromError(err).Message, RetryAfterSeconds: leaseRetryAfter}, nil
		}
		return nil, err
	}
	o, err := s.fsm.Get("Lease", server)
	if err != nil {
		return nil, err
	}
	l := o.GetLease()
	s.log.Info("lease granted", "server", server, "revision", revision, "fencing", l.GetSpec().GetFencingToken(), "index", res.Index)
	return &roostv1.AcquireLeaseResponse{Granted: true, FencingToken: l.GetSpec().GetFencingToken(), ExpiresAt: l.GetSpec().GetExpiresAt()}, nil
}

// MaxUnavailable resolves a Pool's rollout.maxUnavailable: a count, or a
// percentage of the Pool's Machines rounded down; at least 1 (default 1).
func MaxUnavailable(p *roostv1.Pool) int32 {
	mu := p.GetSpec().GetRollout().GetMaxUnavailable()
	n := int32(1)
	switch v := mu.GetValue().(type) {
	case *roostv1.IntOrString_IntVal:
		n = v.IntVal
	case *roostv1.IntOrString_StrVal:
		if pct, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v.StrVal), "%")); err == nil {
			n = int32(int64(p.GetStatus().GetMachines()) * int64(pct) / 100)
		}
	}
	return max(n, 1)
}
