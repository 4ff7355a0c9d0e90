package hub

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/roostfleet/roost/hub/bmcs"
	"github.com/roostfleet/roost/hub/cleaning"
	"github.com/roostfleet/roost/hub/clusters"
	"github.com/roostfleet/roost/hub/controller"
	"github.com/roostfleet/roost/hub/feeds"
	"github.com/roostfleet/roost/hub/liveness"
	"github.com/roostfleet/roost/hub/remediation"
	"github.com/roostfleet/roost/hub/revisions"
	"github.com/roostfleet/roost/hub/rollout"
	"github.com/roostfleet/roost/hub/scheduler"
	"github.com/roostfleet/roost/hub/state"
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
// Machine's next Revision (see hub/revisions).
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
		Recorder: &controller.EventRecorder{Source: "clusters", Propose: h.propose, IsLeader: h.node.IsLeader, Now: h.opts.ControllerClock, Log: h.log},
		Log:      h.log,
	}
}

// remediationController is the leader-only controller that replaces
// failed Machines of Pools with replicas (see hub/remediation).
func (h *Hub) remediationController() *remediation.Controller {
	return &remediation.Controller{
		IsLeader: h.node.IsLeader,
		FSM:      h.fsm,
		Propose:  h.propose,
		Barrier:  h.termBarrier,
		Now:      h.opts.ControllerClock,
		// Workers' Nodes are drained before a replaced Machine is
		// released.
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

// safetyController is the leader-only controller that freezes Pools (see
// hub/remediation).
func (h *Hub) safetyController() *remediation.SafetyController {
	return &remediation.SafetyController{
		IsLeader: h.node.IsLeader,
		FSM:      h.fsm,
		Propose:  h.propose,
		Barrier:  h.termBarrier,
		Now:      h.opts.ControllerClock,
		Resync:   h.opts.ClusterSyncInterval,
		Metrics:  h.controllerMetrics,
		Log:      h.log,
	}
}

// leaseCollector is the leader-only controller that releases orphan
// Leases (see hub/remediation).
func (h *Hub) leaseCollector() *remediation.LeaseCollector {
	return &remediation.LeaseCollector{IsLeader: h.node.IsLeader, FSM: h.fsm, Propose: h.propose, Barrier: h.termBarrier, Metrics: h.controllerMetrics, Log: h.log}
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
		Recorder: &controller.EventRecorder{Source: "rollout", Propose: h.propose, IsLeader: h.node.IsLeader, Now: h.opts.ControllerClock, Log: h.log},
	}
}

// cleaningController is the leader-only controller that retries failed
// cleanings with backoff (see hub/cleaning).
func (h *Hub) cleaningController() *cleaning.Controller {
	return &cleaning.Controller{
		IsLeader: h.node.IsLeader,
		FSM:      h.fsm,
		Propose:  h.propose,
		Barrier:  h.termBarrier,
		Now:      h.opts.ControllerClock,
		Metrics:  h.controllerMetrics,
		Log:      h.log,
	}
}

// bmcController is the leader-only BMC controller (see hub/bmcs).
func (h *Hub) bmcController() *bmcs.Controller {
	c := &bmcs.Controller{
		IsLeader:      h.node.IsLeader,
		FSM:           h.fsm,
		Propose:       h.propose,
		Barrier:       h.termBarrier,
		ProbeInterval: h.opts.BMCProbeInterval,
		Now:           h.opts.ControllerClock,
		Metrics:       h.controllerMetrics,
		Log:           h.log,
	}
	if h.mediaLn != nil {
		c.MediaURL = h.mediaURL
		c.FetchMedia = h.api.FillBlob
	}
	return c
}

// feedController is the leader-only poller of ReleaseFeeds (see
// hub/feeds): it fills this member's blob store from the feeds.
func (h *Hub) feedController() *feeds.Controller {
	return &feeds.Controller{
		IsLeader: h.node.IsLeader,
		FSM:      h.fsm,
		Propose:  h.propose,
		Barrier:  h.termBarrier,
		Blobs:    h.blobs,
		NewUID:   uuid.NewString,
		Interval: h.opts.FeedPollInterval,
		Now:      h.opts.ControllerClock,
		Metrics:  h.controllerMetrics,
		Log:      h.log,
	}
}

// promoter is the leader-only promotion controller of Channels (see
// hub/feeds).
func (h *Hub) promoter() *feeds.Promoter {
	return &feeds.Promoter{
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
		Events:   h.fleet,
		FSM:      h.fsm,
		Propose:  h.propose,
		Desired:  h.agents.DesiredState,
		Admit:    h.rollouts.Admit,
		Drainer:  h.clusters,
		NewUID:   uuid.NewString,
		Log:      h.log,
	}
}

// runLiveness starts the leader-only controllers (liveness, pools,
// revisions, cleaning retries, remediation, safety, BMCs, clusters, rollouts,
// release feeds, promotions; each acts only while this member leads),
// and on every member the reboot gate, the agent stream registry, the
// heartbeat reporter, the fleet-size refresher, the blob garbage
// collection and the health watch (which checks for this member's
// removal). liveDone closes once all of them returned.
func (h *Hub) runLiveness(ctx context.Context, m *liveness.Metrics) {
	ctrl := &liveness.Controller{
		Tracker:  h.api.Tracker(),
		IsLeader: h.node.IsLeader,
		Servers: func() []liveness.ServerView {
			var out []liveness.ServerView
			h.fsm.EachServer(func(s *roostv1.Server) {
				// Decommissioned Servers are refused and Registered ones
				// never ran an agent: neither has a heartbeat to miss.
				if st := s.GetStatus().GetState(); st != state.ServerDecommissioned && st != state.ServerRegistered {
					out = append(out, liveness.ServerView{Name: s.GetMetadata().GetName(), Reachable: s.GetStatus().GetReachability() != state.Unreachable,
						EnrolledAt: s.GetStatus().GetEnrolledAt().AsTime()})
				}
			})
			return out
		},
		Propose: func(ctx context.Context, c *roostv1.SetServerReachability) error {
			_, err := h.api.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_SetServerReachability{SetServerReachability: c}})
			return err
		},
		Metrics:     m,
		LoopMetrics: h.controllerMetrics,
		Log:         h.log,
	}
	rep := h.api.Reporter()
	rep.Metrics, rep.Log = m, h.log
	var n int
	done := make(chan struct{}, 8)
	for _, run := range []func(context.Context){ctrl.Run, rep.Run, h.poolController().Run, h.revisionController().Run, h.cleaningController().Run, h.remediationController().Run, h.safetyController().Run, h.leaseCollector().Run, h.bmcController().Run, h.clusters.Run, h.clusters.Recorder.Run, h.rollouts.Run, h.rollouts.Recorder.Run, h.feedController().Run, h.promoter().Run, h.gate.Run, h.agents.Run, h.runBlobGC, h.watchHealth, func(ctx context.Context) {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				h.api.RefreshFleetSize()
			}
		}
	}} {
		n++
		go func() { run(ctx); done <- struct{}{} }()
	}
	go func() {
		for range n {
			<-done
		}
		close(h.liveDone)
	}()
}
