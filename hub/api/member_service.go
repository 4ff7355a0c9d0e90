package api

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// memberCertLifetime is how long member certificates issued at join last.
const memberCertLifetime = 5 * 365 * 24 * time.Hour

// ListMembers lists the Raft configuration as this member sees it.
func (s *Server) ListMembers(ctx context.Context, _ *roostv1.ListMembersRequest) (*roostv1.ListMembersResponse, error) {
	servers, err := s.node.Servers()
	if err != nil {
		return nil, err
	}
	_, leader := s.node.Leader()
	members := s.fsm.Members()
	out := &roostv1.ListMembersResponse{Index: s.fsm.LastIndex(), RulesVersion: state.EffectiveRules(members)}
	for _, sv := range servers {
		m := &roostv1.Member{
			Id: string(sv.ID), RaftAddress: string(sv.Address),
			Suffrage: sv.Suffrage.String(), Leader: string(sv.ID) == leader,
		}
		for _, r := range members {
			if r.GetId() == m.Id {
				m.ApiAddress, m.HubVersion, m.RulesVersion = r.GetApiAddress(), r.GetHubVersion(), r.GetRulesVersion()
			}
		}
		out.Members = append(out.Members, m)
	}
	s.probeMembers(ctx, out.Members)
	sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].Id < out.Members[j].Id })
	return out, nil
}

// CreateJoinToken records a new join token (hashed) and returns it once.
func (s *Server) CreateJoinToken(ctx context.Context, req *roostv1.CreateJoinTokenRequest) (*roostv1.CreateJoinTokenResponse, error) {
	var vs []apierror.Violation
	if ttl, most := req.GetTtlSeconds(), int64(resource.MaxJoinTokenTTL/time.Second); ttl < 0 || ttl > most {
		vs = append(vs, apierror.Violation{Field: "ttlSeconds", Message: fmt.Sprintf("must be 0 (1 hour) to %d (30 days), got %d", most, ttl)})
	}
	if req.GetMaxUses() < 0 {
		vs = append(vs, apierror.Violation{Field: "maxUses", Message: fmt.Sprintf("must be ≥ 0 (0: one use), got %d", req.GetMaxUses())})
	}
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid join token request", vs...)
	}
	return onLeader(ctx, s, func() (*roostv1.CreateJoinTokenResponse, error) {
		authority, err := s.authority()
		if err != nil {
			return nil, err
		}
		tok, err := newJoinToken(authority.Fingerprint())
		if src, derr := s.derivedSource(ctx, "join-token", 0, 20); derr != nil {
			return nil, derr
		} else if src != nil {
			tok, err = joinTokenFrom(authority.Fingerprint(), src) // a retry makes the same token
		}
		if err != nil {
			return nil, err
		}
		ttl := time.Duration(req.GetTtlSeconds()) * time.Second
		if ttl == 0 {
			ttl = time.Hour
		}
		uses := req.GetMaxUses()
		if uses == 0 {
			uses = 1
		}
		now := s.now()
		expires := timestamppb.New(now.Add(ttl))
		res, err := s.proposeRequest(ctx, req, &roostv1.Command{Time: timestamppb.New(now), Command: &roostv1.Command_PutJoinToken{PutJoinToken: &roostv1.PutJoinToken{
			Token: &roostv1.JoinToken{Id: tok.ID, SecretSha256: tok.SecretSHA256(), ExpiresAt: expires, MaxUses: uses},
		}}})
		if err != nil {
			return nil, err
		}
		if res.Repeated {
			// A retry of a request applied before: the token it made,
			// with its expiry as stored.
			for _, t := range s.fsm.JoinTokens() {
				if t.GetId() == tok.ID {
					expires = t.GetExpiresAt()
				}
			}
		}
		resp := &roostv1.CreateJoinTokenResponse{Token: tok.String(), ExpiresAt: expires, Id: tok.ID}
		for _, m := range s.fsm.Members() {
			resp.ApiAddresses = append(resp.ApiAddresses, m.GetApiAddress())
		}
		sort.Strings(resp.ApiAddresses)
		return resp, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.CreateJoinTokenResponse, error) {
		return roostv1.NewHubServiceClient(c).CreateJoinToken(fctx, req)
	})
}

// RemoveMember removes a member from the Raft configuration and the state.
func (s *Server) RemoveMember(ctx context.Context, req *roostv1.RemoveMemberRequest) (*roostv1.RemoveMemberResponse, error) {
	if req.GetId() == "" {
		return nil, apierror.Invalid("member id required", apierror.Violation{Field: "id", Message: "required"})
	}
	return onLeader(ctx, s, func() (*roostv1.RemoveMemberResponse, error) {
		servers, err := s.node.Servers()
		if err != nil {
			return nil, err
		}
		found := false
		for _, sv := range servers {
			found = found || string(sv.ID) == req.GetId()
		}
		if !found {
			return nil, apierror.NotFound("hub member", req.GetId())
		}
		if len(servers) == 1 {
			return nil, apierror.FailedPrecondition("member %s is the only member; removing it would destroy the cluster", req.GetId())
		}
		// Forget the member's addresses first: removing the leader itself
		// makes it step down, after which it could propose nothing more.
		if _, err := s.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_DeleteMember{DeleteMember: &roostv1.DeleteMember{Id: req.GetId()}}}); err != nil && apierror.Code(err) != codes.NotFound {
			return nil, err
		}
		if err := s.node.RemoveServer(ctx, req.GetId()); err != nil {
			return nil, err
		}
		return &roostv1.RemoveMemberResponse{}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.RemoveMemberResponse, error) {
		return roostv1.NewHubServiceClient(c).RemoveMember(fctx, req)
	})
}

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

// authority loads the replicated CA.
func (s *Server) authority() (*ca.Authority, error) {
	c := s.fsm.CA()
	if c == nil {
		return nil, apierror.NotApplied("the hub CA is not initialised yet; retry")
	}
	return ca.Load(c)
}

// checkCSR parses a PEM PKCS#10 request and checks its signature.
func checkCSR(csrPEM []byte) error {
	b, _ := pem.Decode(csrPEM)
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return fmt.Errorf("not a PEM CERTIFICATE REQUEST")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return fmt.Errorf("parse certificate request: %w", err)
	}
	return csr.CheckSignature()
}
