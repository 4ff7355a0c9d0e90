package hub

import (
	"context"

	"github.com/google/uuid"

	"github.com/roostfleet/roost/hub/clusters"
	"github.com/roostfleet/roost/hub/revisions"
	"github.com/roostfleet/roost/hub/rollout"
	"github.com/roostfleet/roost/hub/scheduler"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// poolController is the leader-only controller that keeps Pools with
// replicas at their size (see hub/scheduler).
func (h *Hub) poolController() *scheduler.Controller {
	return &scheduler.Controller{
		IsLeader: h.node.IsLeader,
		FSM:      h.fsm,
		Propose:  h.propose,
		Barrier:  h.termBarrier,
		NewName:  scheduler.MachineName,
		NewUID:   uuid.NewString,
		// Workers' Nodes are drained before a scale-down releases them.
		PrepareRelease: func(ctx context.Context, ms []*roostv1.Machine) (bool, error) {
			if h.clusters == nil {
				return true, nil
			}
			return h.clusters.PrepareRelease(ctx, ms)
		},
		Metrics: h.controllerMetrics,
		Log:     h.log,
	}
}

// revisionController is the leader-only controller that renders each
// claimed Server's next Revision (see hub/revisions).
func (h *Hub) revisionController() *revisions.Controller {
	return &revisions.Controller{
		IsLeader: h.node.IsLeader,
		FSM:      h.fsm,
		Propose:  h.propose,
		Barrier:  h.termBarrier,
		NewUID:   uuid.NewString,
		Metrics:  h.controllerMetrics,
		Log:      h.log,
	}
}

// clusterController is the leader-only Kubernetes integration (see
// hub/clusters); it also drains workers before their reboot Lease.
func (h *Hub) clusterController() *clusters.Controller {
	return &clusters.Controller{
		IsLeader: h.node.IsLeader,
		FSM:      h.fsm,
		Propose:  h.propose,
		Barrier:  h.termBarrier,
		Now:      h.opts.ControllerClock,
		Tick:     h.opts.ClusterSyncInterval,
		Metrics:  h.controllerMetrics,
		Log:      h.log,
	}
}

// rolloutController is the leader-only rollout controller (see
// hub/rollout); it also admits reboots before their Lease.
func (h *Hub) rolloutController() *rollout.Controller {
	return &rollout.Controller{
		IsLeader: h.node.IsLeader,
		FSM:      h.fsm,
		Propose:  h.propose,
		Barrier:  h.termBarrier,
		Now:      h.opts.ControllerClock,
		Metrics:  h.controllerMetrics,
		Log:      h.log,
	}
}

// propose writes c through Raft on this member (the leader), for the
// leader-only controllers.
func (h *Hub) propose(ctx context.Context, c *roostv1.Command) error {
	_, err := h.api.Propose(ctx, c)
	return err
}

// leaseGate is the reboot gate (see hub/rollout): it admits by the rollout
// controller's plan and drains workers through the cluster controller;
// its loop drives the drains while this member leads.
func (h *Hub) leaseGate() *rollout.Gate {
	return &rollout.Gate{
		IsLeader: h.node.IsLeader,
		Barrier:  h.termBarrier,
		Metrics:  h.controllerMetrics,
		FSM:      h.fsm,
		Propose:  h.propose,
		Desired:  h.agents.DesiredState,
		Admit:    h.rollouts.Admit,
		Drainer:  h.clusters,
		NewUID:   uuid.NewString,
		Log:      h.log,
	}
}
