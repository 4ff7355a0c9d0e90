package api

import (
	"context"
	"errors"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/apierror"
)

// toStatus is the hub's one mapping from errors to gRPC statuses. Raft
// errors that guarantee the command never entered the log are Unavailable,
// which clients retry on another member. Leadership lost after the command
// was appended is Unknown: it may or may not commit, so only the caller can
// decide whether to retry. Everything else goes through apierror.ToStatus,
// which keeps the code of an *apierror.Error (e.g. Aborted for an apply
// whose metadata.modifyIndex or uid precondition failed) and its field
// violations.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrRaftShutdown),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrEnqueueTimeout):
		return status.Error(codes.Unavailable, err.Error()+"; retry on another member")
	case errors.Is(err, raft.ErrLeadershipLost):
		return status.Error(codes.Unknown, "leadership changed while the write was committing; it may or may not have been applied: read it back, or apply again (applies are idempotent)")
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
