package api

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/ca"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// LeaseGate grants reboot Leases on the leader (implemented by
// hub/rollout's Gate: admission by the Pool's rollout rules, the worker's
// Cluster check and drain, the GrantLease command).
type LeaseGate interface {
	// AcquireLease grants Server server a Lease to reboot into Revision
	// revision, or says why not and when to ask again.
	AcquireLease(ctx context.Context, server string, revision int64) (*roostv1.AcquireLeaseResponse, error)
}

// Drainer prepares worker Machines (status.cluster set) for their release
// (implemented by hub/clusters; in the calls that release Machines, on
// the leader).
type Drainer interface {
	// PrepareRelease cordons and drains the Nodes of worker Machines ms
	// before they are released, without waiting: done once every Node is
	// drained; an error names the drain that failed.
	PrepareRelease(ctx context.Context, ms []*roostv1.Machine) (done bool, err error)
	// CancelRelease gives the release of ms up: their Nodes become
	// schedulable again.
	CancelRelease(ms []*roostv1.Machine)
}

// AcquireLease grants the calling Server a Lease to reboot into its
// desired Revision (see AgentService in agent.proto) through the LeaseGate
// (Config.Leases). A member that does not lead forwards the call, naming
// the Server in the request.
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
		if s.leases == nil {
			return nil, apierror.Unavailable("this hub member grants no reboot Leases")
		}
		return s.leases.AcquireLease(ctx, server, req.GetRevision())
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.AcquireLeaseResponse, error) {
		return roostv1.NewAgentServiceClient(c).AcquireLease(fctx, &roostv1.AcquireLeaseRequest{Revision: req.GetRevision(), Server: server})
	})
}
