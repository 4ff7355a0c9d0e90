package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/blobs"
	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// memberCertLifetime is how long member certificates issued at join last.
const memberCertLifetime = 5 * 365 * 24 * time.Hour

// Join checks a join token (counting one use through Raft) and signs the
// new member's certificate request. A node ID, or a Raft address (when the
// request has one), that a member of the Raft configuration has is refused
// first (FailedPrecondition), before the token's use is counted. The
// leader checks the token against its state before it proposes the use,
// so a refusal writes nothing to Raft; an unknown token and a wrong secret
// get the same refusal (state.JoinTokenRefused). Refusals are counted and
// logged, sampled, by the member the caller called.
func (s *Server) Join(ctx context.Context, req *roostv1.JoinRequest) (resp *roostv1.JoinResponse, err error) {
	defer func() {
		s.guard.refusedCall(ctx, "/roost.v1.MemberService/Join", err, state.JoinTokenRefused,
			func(st *status.Status) bool { return st.Code() == codes.PermissionDenied },
			func(st *status.Status) bool {
				return st.Code() == codes.FailedPrecondition && strings.HasPrefix(st.Message(), "join token ")
			})
	}()
	tok, err := ParseJoinToken(req.GetToken())
	if err != nil {
		return nil, apierror.Invalid(err.Error(), apierror.Violation{Field: "token", Message: err.Error()})
	}
	if req.GetNodeId() == "" {
		return nil, apierror.Invalid("node id required", apierror.Violation{Field: "nodeId", Message: "required"})
	}
	authority, err := s.authority()
	if err != nil {
		return nil, err
	}
	if tok.CAFingerprint != authority.Fingerprint() {
		return nil, apierror.PermissionDenied("join token was made for another hub CA")
	}
	// Check the request before the token's use is counted, so a bad request costs no use.
	if err := checkCSR(req.GetCsrPem()); err != nil {
		return nil, apierror.Invalid(err.Error(), apierror.Violation{Field: "csrPem", Message: err.Error()})
	}
	if a := req.GetRaftAddress(); a != "" {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, apierror.Invalid("invalid Raft address", apierror.Violation{Field: "raftAddress", Message: err.Error()})
		}
	}
	return onLeader(ctx, s, func() (*roostv1.JoinResponse, error) {
		// The token first, read-only: a caller without one learns nothing
		// about the members.
		if err := s.checkJoinToken(ctx, tok); err != nil {
			return nil, err
		}
		// Refuse an ID in use before the token's use is counted or a
		// certificate issued: the new member would take the other's place.
		servers, err := s.node.Servers()
		if err != nil {
			return nil, err
		}
		if err := joinIDInUse(servers, req.GetNodeId()); err != nil {
			return nil, err
		}
		// So is another member's Raft address (one that is stopped but
		// still in the configuration): AddVoter would refuse it only later.
		if err := joinRaftAddressInUse(servers, req.GetNodeId(), req.GetRaftAddress()); err != nil {
			return nil, err
		}
		if err := s.checkMemberRules(req.GetRulesVersion(), "rulesVersion"); err != nil {
			return nil, err
		}
		if _, err := s.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_UseJoinToken{UseJoinToken: &roostv1.UseJoinToken{Id: tok.ID, SecretSha256: tok.SecretSHA256()}}}); err != nil {
			return nil, err
		}
		cert, err := authority.SignCSR(req.GetCsrPem(), ca.Profile{CommonName: req.GetNodeId(), Role: ca.RoleMember, Lifetime: memberCertLifetime}, s.now())
		if err != nil {
			return nil, apierror.Invalid(err.Error(), apierror.Violation{Field: "csrPem", Message: err.Error()})
		}
		return &roostv1.JoinResponse{CertificatePem: cert, CaBundlePem: authority.CertificatePEM()}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.JoinResponse, error) {
		return roostv1.NewMemberServiceClient(c).Join(fctx, req)
	})
}

// checkJoinToken checks a join token on the leader against its state
// before its use is proposed (state.CheckJoinToken at this member's
// clock), once the leader has applied its predecessors' entries
// (Config.LeaderReady).
func (s *Server) checkJoinToken(ctx context.Context, tok JoinToken) error {
	if s.leaderReady != nil {
		if err := s.leaderReady(ctx); err != nil {
			return apierror.Unavailable("the hub leader is not ready to check tokens yet (%v); retry", err)
		}
	}
	if aerr := state.CheckJoinToken(s.fsm.JoinToken(tok.ID), tok.ID, tok.SecretSHA256(), s.now()); aerr != nil {
		return aerr
	}
	return nil
}

// AddVoter adds the calling member (its certificate's common name must be
// node_id) to the Raft configuration and records its addresses. Adding it
// again at the same Raft address (a joining member retrying) succeeds;
// an ID that another member holds at another Raft address, or a Raft
// address that another member uses, is refused (FailedPrecondition).
func (s *Server) AddVoter(ctx context.Context, req *roostv1.AddVoterRequest) (*roostv1.AddVoterResponse, error) {
	if _, cn, _ := ca.PeerRole(ctx); cn != req.GetNodeId() && !isForwarded(ctx) {
		return nil, apierror.PermissionDenied("member %q may only add itself, not %q", cn, req.GetNodeId())
	}
	if req.GetRaftAddress() == "" || req.GetApiAddress() == "" {
		return nil, apierror.Invalid("addresses required",
			apierror.Violation{Field: "raftAddress", Message: "required"}, apierror.Violation{Field: "apiAddress", Message: "required"})
	}
	return onLeader(ctx, s, func() (*roostv1.AddVoterResponse, error) {
		servers, err := s.node.Servers()
		if err != nil {
			return nil, err
		}
		if err := voterConflict(servers, req.GetNodeId(), req.GetRaftAddress()); err != nil {
			return nil, err
		}
		if err := s.checkMemberRules(req.GetRulesVersion(), "rulesVersion"); err != nil {
			return nil, err
		}
		if _, err := s.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_PutMember{PutMember: &roostv1.PutMember{Member: &roostv1.HubMember{
			Id: req.GetNodeId(), RaftAddress: req.GetRaftAddress(), ApiAddress: req.GetApiAddress(),
			HubVersion: req.GetHubVersion(), RulesVersion: req.GetRulesVersion(),
		}}}}); err != nil {
			return nil, err
		}
		if err := s.node.AddVoter(ctx, req.GetNodeId(), req.GetRaftAddress()); err != nil {
			return nil, err
		}
		return &roostv1.AddVoterResponse{}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.AddVoterResponse, error) {
		return roostv1.NewMemberServiceClient(c).AddVoter(fctx, req)
	})
}

// FetchBlob streams a blob this member stores completely to another
// member (MemberService; member certificates only), from offset, like
// FetchArtifact but never asking further peers. An offset past the end
// yields one chunk with the size and no data, so the caller can drop a
// bad partial copy. Errors: NotFound (not stored completely here),
// PermissionDenied (not a member), InvalidArgument (bad digest or
// negative offset).
func (s *Server) FetchBlob(req *roostv1.FetchArtifactRequest, stream grpc.ServerStreamingServer[roostv1.ArtifactChunk]) error {
	if err := s.checkBlobs(); err != nil {
		return err
	}
	digest := req.GetSha256()
	f, size, err := s.blobs.Open(digest)
	if err != nil {
		if errors.Is(err, blobs.ErrNotFound) {
			return &apierror.Error{Code: codes.NotFound, Message: fmt.Sprintf("artifact sha256 %s is not stored on hub member %s", digest, s.memberID())}
		}
		return blobError(err, "sha256", digest)
	}
	defer f.Close()
	off := req.GetOffset()
	if off < 0 {
		return apierror.Invalid("offset out of range", apierror.Violation{Field: "offset", Message: fmt.Sprintf("%d is negative", off)})
	}
	if off > size {
		return stream.Send(&roostv1.ArtifactChunk{Size: size})
	}
	return sendBlob(f, digest, off, size, stream)
}

// UpdateMember records the calling member's addresses and software
// (members call it when they start, through ReportSelf).
func (s *Server) UpdateMember(ctx context.Context, req *roostv1.UpdateMemberRequest) (*roostv1.UpdateMemberResponse, error) {
	if _, cn, _ := ca.PeerRole(ctx); cn != req.GetMember().GetId() && !isForwarded(ctx) {
		return nil, apierror.PermissionDenied("member %q may only update itself, not %q", cn, req.GetMember().GetId())
	}
	if err := s.ReportSelf(ctx, req.GetMember()); err != nil {
		return nil, err
	}
	return &roostv1.UpdateMemberResponse{}, nil
}

// ForwardServerStatus proposes an agent's status change for the member
// that holds the agent's stream. Only the leader accepts it.
func (s *Server) ForwardServerStatus(ctx context.Context, req *roostv1.ForwardServerStatusRequest) (*roostv1.ForwardServerStatusResponse, error) {
	if !s.isLeader() {
		return nil, apierror.Unavailable("member %s is not the leader; retry", s.node.ID())
	}
	if req.GetUpdate().GetName() == "" {
		return nil, apierror.Invalid("no server named", apierror.Violation{Field: "update.name", Message: "is required"})
	}
	res, err := s.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: req.GetUpdate()}})
	if err != nil {
		return nil, err
	}
	return &roostv1.ForwardServerStatusResponse{Index: res.Index}, nil
}

// ReportSeen records, on the leader, heartbeats another member received.
func (s *Server) ReportSeen(ctx context.Context, req *roostv1.ReportSeenRequest) (*roostv1.ReportSeenResponse, error) {
	if !s.isLeader() {
		return nil, apierror.Unavailable("member %s is not the leader; report to the leader", s.node.ID())
	}
	s.tracker.Seen(req.GetServers()...)
	return &roostv1.ReportSeenResponse{}, nil
}

// reportSeen is the Reporter's Send: MemberService.ReportSeen on the leader.
func (s *Server) reportSeen(ctx context.Context, names []string) error {
	conn, fctx, err := s.leaderConn(ctx)
	if err != nil {
		return err
	}
	_, err = roostv1.NewMemberServiceClient(conn).ReportSeen(fctx, &roostv1.ReportSeenRequest{Servers: names})
	return err
}
