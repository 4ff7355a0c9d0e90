package api

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// ListJoinTokens lists the join tokens, without secrets, sorted by id, with
// their status at the leader's clock (state.JoinTokenStatus), as a
// linearizable read (Node.ReadBarrier): a revocation acknowledged before
// the call shows.
func (s *Server) ListJoinTokens(ctx context.Context, req *roostv1.ListJoinTokensRequest) (*roostv1.ListJoinTokensResponse, error) {
	return onLeader(ctx, s, func() (*roostv1.ListJoinTokensResponse, error) {
		if _, err := s.node.ReadBarrier(ctx); err != nil {
			return nil, err
		}
		now := s.now()
		out := &roostv1.ListJoinTokensResponse{}
		for _, t := range s.fsm.JoinTokens() {
			out.Tokens = append(out.Tokens, &roostv1.JoinTokenInfo{Id: t.GetId(), ExpiresAt: t.GetExpiresAt(), MaxUses: t.GetMaxUses(),
				Uses: t.GetUses(), RevokedAt: t.GetRevokedAt(), Status: state.JoinTokenStatus(t, now)})
		}
		return out, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.ListJoinTokensResponse, error) {
		return roostv1.NewHubServiceClient(c).ListJoinTokens(fctx, req)
	})
}

// RevokeJoinTokens revokes the join tokens named by id in one Raft command
// (RevokeJoinTokens): it records revoked_at as the leader's time and
// changes nothing else on the token. While a member implements older apply
// rules it falls back to revokeJoinTokensByPut. Members that joined with a
// token stay. It fails with InvalidArgument on no or duplicate ids and
// NotFound on an unknown id, before revoking any.
func (s *Server) RevokeJoinTokens(ctx context.Context, req *roostv1.RevokeJoinTokensRequest) (*roostv1.RevokeJoinTokensResponse, error) {
	ids := req.GetIds()
	if len(ids) == 0 {
		return nil, apierror.Invalid("no join token to revoke", apierror.Violation{Field: "ids", Message: "name at least one token id (roostctl hub join-tokens lists them)"})
	}
	for i, id := range ids {
		if id == "" {
			return nil, apierror.Invalid("invalid revoke request", apierror.Violation{Field: fmt.Sprintf("ids[%d]", i),
				Message: "is empty: give a join token's ID (roostctl hub join-tokens list) or the whole token"})
		}
		if slices.Contains(ids[:i], id) {
			return nil, apierror.Invalid("invalid revoke request", apierror.Violation{Field: fmt.Sprintf("ids[%d]", i), Message: fmt.Sprintf("%q is given twice", id)})
		}
	}
	return onLeader(ctx, s, func() (*roostv1.RevokeJoinTokensResponse, error) {
		byID := map[string]*roostv1.JoinToken{}
		for _, t := range s.fsm.JoinTokens() {
			byID[t.GetId()] = t
		}
		for _, id := range ids {
			if byID[id] == nil {
				msg := fmt.Sprintf("join token %q not found", id)
				if len(ids) > 1 {
					msg += "; nothing was revoked"
				}
				return nil, &apierror.Error{Code: codes.NotFound, Message: msg + " ('roostctl hub join-tokens list' lists join tokens; enrollment tokens are revoked with 'roostctl token revoke')"}
			}
		}
		rules := state.EffectiveRules(s.fsm.Members())
		if rules < state.RulesJoinTokenRevokeCommand {
			return revokeJoinTokensByPut(ctx, s, ids, byID, rules)
		}
		res, err := s.proposeRequest(ctx, req, &roostv1.Command{Command: &roostv1.Command_RevokeJoinTokens{RevokeJoinTokens: &roostv1.RevokeJoinTokens{Ids: ids}}})
		if err != nil {
			return nil, err
		}
		out := &roostv1.RevokeJoinTokensResponse{}
		for _, r := range res.Results {
			if r.GetAction() == "revoked" {
				out.Revoked = append(out.Revoked, r.GetName())
			} else {
				out.Already = append(out.Already, r.GetName())
			}
		}
		return out, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.RevokeJoinTokensResponse, error) {
		return roostv1.NewHubServiceClient(c).RevokeJoinTokens(fctx, req)
	})
}

// revokeJoinTokensByPut revokes ids while a member implements apply rules
// older than state.RulesJoinTokenRevokeCommand and so does not know the
// RevokeJoinTokens command: it puts each token back with revoked_at set,
// one command per token, and ends expires_at too while a member does not
// check revoked_at (state.RulesJoinTokenRevocation). A use of a token
// applied between the read and the put loses its count.
func revokeJoinTokensByPut(ctx context.Context, s *Server, ids []string, byID map[string]*roostv1.JoinToken, rules uint32) (*roostv1.RevokeJoinTokensResponse, error) {
	out := &roostv1.RevokeJoinTokensResponse{}
	now := timestamppb.New(s.now())
	for _, id := range ids {
		t := proto.Clone(byID[id]).(*roostv1.JoinToken)
		if t.GetRevokedAt() != nil {
			out.Already = append(out.Already, id)
			continue
		}
		t.RevokedAt = now
		if rules < state.RulesJoinTokenRevocation && (t.GetExpiresAt() == nil || t.GetExpiresAt().AsTime().After(now.AsTime())) {
			t.ExpiresAt = now
		}
		if _, err := s.Propose(ctx, &roostv1.Command{Time: now, Command: &roostv1.Command_PutJoinToken{PutJoinToken: &roostv1.PutJoinToken{Token: t}}}); err != nil {
			return nil, err
		}
		out.Revoked = append(out.Revoked, id)
	}
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
