package api

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Propose sends cmd through Raft on this member, which must lead. It sets
// the command time, and returns the FSM's result or its error. A command
// carrying a request ID the FSM applied before (withRequest) changes
// nothing and returns that first result (ApplyResult.Repeated). Raft
// errors say whether the command may have been applied
// (raftnode.OutcomeUnknownError) or not (raft.ErrNotLeader, …; see
// toStatus).
func (s *Server) Propose(ctx context.Context, cmd *roostv1.Command) (*state.ApplyResult, error) {
	if cmd.Time == nil {
		cmd.Time = timestamppb.New(s.now())
	}
	if cmd.RulesVersion == 0 {
		cmd.RulesVersion = state.EffectiveRules(s.fsm.Members())
	}
	data, err := proto.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	resp, _, err := s.node.Apply(ctx, data)
	if err != nil {
		return nil, err
	}
	res, ok := resp.(*state.ApplyResult)
	if !ok {
		return nil, fmt.Errorf("unexpected FSM response %T", resp)
	}
	if res.Err != nil {
		return nil, res.Err
	}
	if res.Repeated {
		s.log.Info("request applied before: answering with its result", "request", cmd.GetRequestId(), "index", res.Index)
	}
	return res, nil
}

// newUIDs returns n fresh RFC 4122 random UUIDs for an ApplyObjects command.
func newUIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = uuid.NewString()
	}
	return out
}
