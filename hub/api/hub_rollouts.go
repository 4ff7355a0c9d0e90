package api

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// RolloutControl applies an operator's action to a Pool's rollout (see
// HubService in hub.proto): pause, resume (acknowledging failed Machines),
// abort (halt), undo (pin status.rollout.previousVersion), pin VERSION,
// unpin. Errors: InvalidArgument (no pool, unknown action, PIN without a
// version or with one a Pool manifest could not hold, see
// resource.ValidateImageVersion), NotFound (no such Pool or release), FailedPrecondition (UNDO
// with no previous version).
func (s *Server) RolloutControl(ctx context.Context, req *roostv1.RolloutControlRequest) (*roostv1.RolloutControlResponse, error) {
	var vs []apierror.Violation
	if req.GetPool() == "" {
		vs = append(vs, apierror.Violation{Field: "pool", Message: "is required"})
	}
	switch req.GetAction() {
	case roostv1.RolloutAction_ROLLOUT_ACTION_PIN:
		if req.GetVersion() == "" {
			vs = append(vs, apierror.Violation{Field: "version", Message: "is required to pin a pool"})
		} else {
			// The same check as a manifest's spec.imageVersion.
			vs = append(vs, resource.ValidateImageVersion("version", req.GetVersion())...)
		}
	case roostv1.RolloutAction_ROLLOUT_ACTION_PAUSE, roostv1.RolloutAction_ROLLOUT_ACTION_RESUME, roostv1.RolloutAction_ROLLOUT_ACTION_ABORT,
		roostv1.RolloutAction_ROLLOUT_ACTION_UNDO, roostv1.RolloutAction_ROLLOUT_ACTION_UNPIN:
	default:
		vs = append(vs, apierror.Violation{Field: "action", Message: fmt.Sprintf("must be pause, resume, abort, undo, pin or unpin, got %v", req.GetAction())})
	}
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid rollout action", vs...)
	}
	return onLeader(ctx, s, func() (*roostv1.RolloutControlResponse, error) {
		c := &roostv1.ControlRollout{Pool: req.GetPool(), Action: req.GetAction(), Version: req.GetVersion()}
		if req.GetAction() == roostv1.RolloutAction_ROLLOUT_ACTION_UNDO {
			o, err := s.fsm.Get("Pool", req.GetPool())
			if err != nil {
				return nil, err
			}
			c.Version = o.GetPool().GetStatus().GetRollout().GetPreviousVersion()
			if c.Version == "" {
				return nil, apierror.FailedPrecondition("pool %s has no previous release to go back to", req.GetPool())
			}
		}
		res, err := s.proposeRequest(ctx, req, &roostv1.Command{Command: &roostv1.Command_ControlRollout{ControlRollout: c}})
		if err != nil {
			return nil, err
		}
		o, err := s.fsm.Get("Pool", req.GetPool())
		if err != nil {
			return nil, err
		}
		unchanged := len(res.Results) == 1 && res.Results[0].GetAction() == state.ActionUnchanged
		return &roostv1.RolloutControlResponse{Pool: o.GetPool(), Unchanged: unchanged}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.RolloutControlResponse, error) {
		return roostv1.NewHubServiceClient(c).RolloutControl(fctx, req)
	})
}
