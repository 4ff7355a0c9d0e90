package hub

import (
	"context"

	"github.com/google/uuid"

	"github.com/roostfleet/roost/hub/api"
	"github.com/roostfleet/roost/hub/revisions"
	"github.com/roostfleet/roost/hub/scheduler"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// poolController is the leader-only controller that keeps Pools with
// replicas at their size (see hub/scheduler).
func (h *Hub) poolController() *scheduler.Controller {
	return &scheduler.Controller{
		IsLeader: h.node.IsLeader,
		Read:     func() (scheduler.Snapshot, error) { return scheduler.ReadFSM(h.fsm) },
		Propose: func(ctx context.Context, c *roostv1.Command) error {
			_, err := h.api.Propose(ctx, c)
			return err
		},
		Barrier: h.termBarrier,
		NewName: api.MachineName,
		NewUID:  uuid.NewString,
		Log:     h.log,
	}
}

// revisionController is the leader-only controller that renders each
// claimed Server's next Revision (see hub/revisions).
func (h *Hub) revisionController() *revisions.Controller {
	return &revisions.Controller{
		IsLeader: h.node.IsLeader,
		FSM:      h.fsm,
		Propose: func(ctx context.Context, c *roostv1.Command) error {
			_, err := h.api.Propose(ctx, c)
			return err
		},
		Barrier: h.termBarrier,
		NewUID:  uuid.NewString,
		Log:     h.log,
	}
}
