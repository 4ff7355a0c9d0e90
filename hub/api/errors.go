package api

import (
	"context"
	"errors"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/raftnode"
)

// toStatus is the hub's one mapping from errors to gRPC statuses, and
// says what became of a write:
//
//   - Raft errors that guarantee the command never entered the log
//     (ErrNotLeader, ErrLeadershipTransferInProgress, ErrEnqueueTimeout,
//     ErrRaftShutdown before queueing) are Unavailable with
//     apierror.ReasonNotApplied: clients retry them, on another member.
//   - A command proposed whose fate Raft could not tell
//     (raftnode.OutcomeUnknownError: leadership lost before commit, the
//     member stopping, the caller's deadline) is Unknown with
//     apierror.ReasonOutcomeUnknown: it may or may not commit, so only a
//     retry with the same request ID (applied at most once) or a read can
//     settle it.
//   - Everything else goes through apierror.ToStatus, which keeps the code
//     of an *apierror.Error (e.g. Aborted for an apply whose
//     metadata.modifyIndex or uid precondition failed), its field
//     violations and its reason.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case raftnode.IsOutcomeUnknown(err):
		return apierror.OutcomeUnknown("%v (read the state, or send the request again with the same request ID)", err).GRPCStatus().Err()
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrRaftShutdown),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrEnqueueTimeout):
		return apierror.NotApplied("%s; retry on another member", err.Error()).GRPCStatus().Err()
	case errors.Is(err, raft.ErrLeadershipLost):
		// Not from Apply (which wraps it): a membership change or a
		// barrier; a membership change may or may not have happened.
		return apierror.OutcomeUnknown("leadership changed while the change was committing; it may or may not have been applied").GRPCStatus().Err()
	}
	return apierror.ToStatus(err).Err()
}

func unaryErrors(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	return resp, toStatus(err)
}

func streamErrors(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return toStatus(handler(srv, ss))
}
