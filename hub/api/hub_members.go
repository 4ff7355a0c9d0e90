package api

import (
	"context"
	"sort"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

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
