package api

import (
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/snapshot"
	"github.com/roostfleet/roost/version"
)

// restoreTimeout bounds Raft's restore of a snapshot on the leader.
const restoreTimeout = 5 * time.Minute

// SaveSnapshot streams the replicated state as the leader has applied it
// after a read barrier (Node.ReadBarrier; see HubService in hub.proto). A
// follower relays the leader's stream.
func (s *Server) SaveSnapshot(req *roostv1.SaveSnapshotRequest, stream grpc.ServerStreamingServer[roostv1.SnapshotChunk]) error {
	ctx := stream.Context()
	if !s.isLeader() {
		conn, fctx, err := s.leaderConn(ctx)
		if err != nil {
			return err
		}
		from, err := roostv1.NewHubServiceClient(conn).SaveSnapshot(fctx, req)
		if err != nil {
			return err
		}
		for {
			m, err := from.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := stream.Send(m); err != nil {
				return err
			}
		}
	}
	// The saved state holds every write acknowledged before the call:
	// ReadBarrier verifies leadership and waits for the FSM to apply the
	// commit index, appending nothing.
	if _, err := s.node.ReadBarrier(ctx); err != nil {
		return err
	}
	data, index, err := s.fsm.SaveState()
	if err != nil {
		return fmt.Errorf("saving the state: %w", err)
	}
	info, err := SnapshotInfoOf(data, s.now())
	if err != nil {
		return err
	}
	s.log.Info("snapshot saved for a client", "index", index, "bytes", len(data))
	return snapshot.Send(stream, &roostv1.SnapshotChunk{Info: info}, data)
}

// SnapshotInfoOf describes a saved state (state.FSM.SaveState's bytes)
// taken at now: index, SHA-256, size, CA fingerprint and objects per kind.
// It fails when the state does not load.
func SnapshotInfoOf(data []byte, now time.Time) (*roostv1.SnapshotInfo, error) {
	sum, err := state.SummarizeState(data)
	if err != nil {
		return nil, err
	}
	info := &roostv1.SnapshotInfo{Index: sum.Index, TakenAt: timestamppb.New(now), HubVersion: version.Version,
		Sha256: snapshot.Digest(data), SizeBytes: uint64(len(data)), Objects: sum.Objects}
	if len(sum.CAPEM) > 0 {
		if fp, err := ca.FingerprintPEM(sum.CAPEM); err == nil {
			info.CaFingerprint = fp
		}
	}
	return info, nil
}

// RestoreSnapshot replaces the replicated state with a saved one (see
// HubService in hub.proto). A follower checks the upload, then hands it
// to the leader.
func (s *Server) RestoreSnapshot(stream grpc.ClientStreamingServer[roostv1.SnapshotChunk, roostv1.RestoreSnapshotResponse]) error {
	first, data, err := snapshot.Receive(stream, nil)
	if err != nil {
		if _, ok := status.FromError(err); ok && status.Code(err) != codes.Unknown {
			return err // the stream broke
		}
		return apierror.Invalid(err.Error(), apierror.Violation{Field: "info", Message: err.Error()})
	}
	info := first.GetInfo()
	if !s.isLeader() {
		return s.forwardRestore(stream, first, data)
	}
	payload, err := s.fsm.RestorePayload(data)
	if err != nil {
		return apierror.FailedPrecondition("%v", err)
	}
	warnings, err := s.fsm.RestoreWarnings(data)
	if err != nil {
		return apierror.FailedPrecondition("%v", err)
	}
	if first.GetDryRun() {
		return stream.SendAndClose(&roostv1.RestoreSnapshotResponse{Restored: info, Warnings: warnings})
	}
	if err := s.node.Restore(payload, restoreTimeout); err != nil {
		return fmt.Errorf("restoring the snapshot through Raft: %w", err)
	}
	s.log.Warn("state restored from a snapshot", "snapshotIndex", info.GetIndex(), "takenAt", info.GetTakenAt().AsTime(), "appliedIndex", s.node.AppliedIndex(), "warnings", warnings)
	return stream.SendAndClose(&roostv1.RestoreSnapshotResponse{Restored: info, Index: s.node.AppliedIndex(), Warnings: warnings})
}

// forwardRestore sends a checked restore to the leader and relays its
// answer.
func (s *Server) forwardRestore(stream grpc.ClientStreamingServer[roostv1.SnapshotChunk, roostv1.RestoreSnapshotResponse], first *roostv1.SnapshotChunk, data []byte) error {
	conn, fctx, err := s.leaderConn(stream.Context())
	if err != nil {
		return err
	}
	to, err := roostv1.NewHubServiceClient(conn).RestoreSnapshot(fctx)
	if err != nil {
		return err
	}
	// io.EOF: the leader answered before reading it all; CloseAndRecv
	// has its answer.
	if err := snapshot.Send(to, first, data); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	resp, err := to.CloseAndRecv()
	if err != nil {
		return err
	}
	return stream.SendAndClose(resp)
}
