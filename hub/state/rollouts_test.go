package state

import (
	"testing"

	"google.golang.org/grpc/codes"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

func controlCmd(pool string, action roostv1.RolloutAction, version string) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_ControlRollout{ControlRollout: &roostv1.ControlRollout{Pool: pool, Action: action, Version: version}}}
}

func rolloutCmd(pool string, st *roostv1.RolloutStatus) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_UpdatePoolRollout{UpdatePoolRollout: &roostv1.UpdatePoolRollout{Pool: pool, Status: st}}}
}

// A halt survives the controller's updates and is cleared only by an
// operator's resume, which acknowledges the failed Machines; pause and pin
// are spec changes; pinning needs an existing release.
func TestRolloutControlAndHalts(t *testing.T) {
	h := newHarness(t, Options{})
	standalonePool(h)
	h.mustApply(h.objects(resource.Wrap(&roostv1.ImageRelease{Metadata: meta("v2026-11-0", nil), Spec: &roostv1.ImageReleaseSpec{Version: "2026.11.0"}})))

	h.mustApply(rolloutCmd("edge", &roostv1.RolloutStatus{Phase: RolloutHalted, Reason: "1 failed", FailedMachines: []string{"edge-1"}, AcknowledgedMachines: []string{"ignored"}}))
	p := getPool(t, h.f, "edge")
	if p.GetStatus().GetRollout().GetPhase() != RolloutHalted || len(p.GetStatus().GetRollout().GetAcknowledgedMachines()) != 0 {
		t.Fatalf("rollout %v", p.GetStatus().GetRollout())
	}
	// The controller cannot lift a halt.
	h.mustApply(rolloutCmd("edge", &roostv1.RolloutStatus{Phase: RolloutProgressing, FailedMachines: []string{"edge-1"}, Updated: 3}))
	if ro := getPool(t, h.f, "edge").GetStatus().GetRollout(); ro.GetPhase() != RolloutHalted || ro.GetReason() != "1 failed" || ro.GetUpdated() != 3 {
		t.Fatalf("after controller update: %v", ro)
	}
	// Pause is a spec change; a halted pool stays halted (roostctl rollout
	// pause says so).
	gen := getPool(t, h.f, "edge").GetMetadata().GetGeneration()
	h.mustApply(controlCmd("edge", roostv1.RolloutAction_ROLLOUT_ACTION_PAUSE, ""))
	if p := getPool(t, h.f, "edge"); !p.GetSpec().GetRollout().GetPaused() || p.GetMetadata().GetGeneration() != gen+1 ||
		p.GetStatus().GetRollout().GetPhase() != RolloutHalted || p.GetStatus().GetRollout().GetReason() != "1 failed" {
		t.Fatalf("after pause: %v", p)
	}
	res := h.mustApply(controlCmd("edge", roostv1.RolloutAction_ROLLOUT_ACTION_PAUSE, ""))
	if got := actions(res); len(got) != 1 || got[0] != "Pool/edge=unchanged" {
		t.Errorf("second pause: %v", got)
	}
	// Resume: not paused, not halted, edge-1 acknowledged.
	h.mustApply(controlCmd("edge", roostv1.RolloutAction_ROLLOUT_ACTION_RESUME, ""))
	p = getPool(t, h.f, "edge")
	ro := p.GetStatus().GetRollout()
	if p.GetSpec().GetRollout().GetPaused() || ro.GetPhase() == RolloutHalted || len(ro.GetFailedMachines()) != 0 ||
		len(ro.GetAcknowledgedMachines()) != 1 || ro.GetAcknowledgedMachines()[0] != "edge-1" {
		t.Fatalf("after resume: %v %v", p.GetSpec().GetRollout(), ro)
	}
	// The controller keeps the acknowledgement.
	h.mustApply(rolloutCmd("edge", &roostv1.RolloutStatus{Phase: RolloutProgressing}))
	if ro := getPool(t, h.f, "edge").GetStatus().GetRollout(); len(ro.GetAcknowledgedMachines()) != 1 {
		t.Fatalf("acknowledgement lost: %v", ro)
	}
	// Abort halts.
	h.mustApply(controlCmd("edge", roostv1.RolloutAction_ROLLOUT_ACTION_ABORT, ""))
	if ro := getPool(t, h.f, "edge").GetStatus().GetRollout(); ro.GetPhase() != RolloutHalted {
		t.Fatalf("after abort: %v", ro)
	}
	// Pin needs a release; unpin clears.
	wantCode(t, h.apply(controlCmd("edge", roostv1.RolloutAction_ROLLOUT_ACTION_PIN, "2027.01.0")).Err, codes.NotFound)
	wantCode(t, h.apply(controlCmd("edge", roostv1.RolloutAction_ROLLOUT_ACTION_PIN, "")).Err, codes.InvalidArgument)
	h.mustApply(controlCmd("edge", roostv1.RolloutAction_ROLLOUT_ACTION_PIN, "2026.11.0"))
	if v := getPool(t, h.f, "edge").GetSpec().GetImageVersion(); v != "2026.11.0" {
		t.Fatalf("pinned to %q", v)
	}
	h.mustApply(controlCmd("edge", roostv1.RolloutAction_ROLLOUT_ACTION_UNPIN, ""))
	if v := getPool(t, h.f, "edge").GetSpec().GetImageVersion(); v != "" {
		t.Fatalf("unpinned to %q", v)
	}
	wantCode(t, h.apply(controlCmd("nope", roostv1.RolloutAction_ROLLOUT_ACTION_PAUSE, "")).Err, codes.NotFound)
	wantCode(t, h.apply(controlCmd("edge", roostv1.RolloutAction_ROLLOUT_ACTION_UNSPECIFIED, "")).Err, codes.InvalidArgument)
	wantCode(t, h.apply(rolloutCmd("nope", &roostv1.RolloutStatus{})).Err, codes.NotFound)
}
