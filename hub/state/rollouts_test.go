package state

import (
	"slices"
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

// An apply keeps a stored pause that its manifest does not set, and says
// so in ApplyResult.Warnings (also for a dry run and when nothing else
// changed); only resume lifts it. A manifest that drops a pin unpins the
// pool, with a warning. Every member computes the same warnings.
func TestApplyKeepsPauseAndWarnsOnUnpin(t *testing.T) {
	h := newHarness(t, Options{})
	standalonePool(h)
	h.mustApply(h.objects(resource.Wrap(&roostv1.ImageRelease{Metadata: meta("v2026-11-0", nil), Spec: &roostv1.ImageReleaseSpec{Version: "2026.11.0", Channels: []string{"stable"}}})))
	manifest := func(mods ...func(*roostv1.PoolSpec)) *roostv1.Command {
		return h.objects(poolObj("edge", "", append([]func(*roostv1.PoolSpec){func(s *roostv1.PoolSpec) { s.Replicas = nil }}, mods...)...))
	}
	dryRun := func(c *roostv1.Command) *roostv1.Command { c.GetApplyObjects().DryRun = true; return c }
	const kept = "pool/edge: spec.rollout.paused kept (paused by 'roostctl rollout pause' or an earlier manifest); 'roostctl rollout resume edge' lifts it"
	check := func(what string, res *ApplyResult, action string, warnings ...string) {
		t.Helper()
		if got := actions(res); len(got) != 1 || got[0] != "Pool/edge="+action {
			t.Errorf("%s: results %v, want Pool/edge=%s", what, got, action)
		}
		if !slices.Equal(res.Warnings, warnings) {
			t.Errorf("%s: warnings %q, want %q", what, res.Warnings, warnings)
		}
	}

	check("apply", h.mustApply(manifest()), ActionUnchanged)
	h.mustApply(controlCmd("edge", roostv1.RolloutAction_ROLLOUT_ACTION_PAUSE, ""))
	if ro := getPool(t, h.f, "edge").GetStatus().GetRollout(); ro.GetPhase() != RolloutPaused { // at once, not at the controller's next pass
		t.Errorf("phase after pause: %v", ro)
	}
	gen := getPool(t, h.f, "edge").GetMetadata().GetGeneration()
	check("dry run over a pause", h.mustApply(dryRun(manifest())), ActionUnchanged, kept)
	check("apply over a pause", h.mustApply(manifest()), ActionUnchanged, kept)
	if p := getPool(t, h.f, "edge"); !p.GetSpec().GetRollout().GetPaused() || p.GetMetadata().GetGeneration() != gen {
		t.Fatalf("after apply: %v", p)
	}
	// Another change applies; the pause stays.
	check("change over a pause", h.mustApply(manifest(func(s *roostv1.PoolSpec) {
		s.Rollout = &roostv1.RolloutPolicy{FailureBudget: 2}
	})), ActionConfigured, kept)
	if ro := getPool(t, h.f, "edge").GetSpec().GetRollout(); !ro.GetPaused() || ro.GetFailureBudget() != 2 {
		t.Fatalf("after change: %v", ro)
	}
	// A manifest that pauses: no warning.
	check("paused manifest", h.mustApply(manifest(func(s *roostv1.PoolSpec) {
		s.Rollout = &roostv1.RolloutPolicy{FailureBudget: 2, Paused: true}
	})), ActionUnchanged)
	// A refused command carries no warnings.
	bad := h.apply(h.objects(poolObj("edge", "nowhere", func(s *roostv1.PoolSpec) { s.Replicas = nil })))
	wantCode(t, bad.Err, codes.FailedPrecondition)
	if len(bad.Warnings) != 0 {
		t.Errorf("refused apply: warnings %q", bad.Warnings)
	}
	// Resume lifts it; the manifest applies as it is.
	h.mustApply(controlCmd("edge", roostv1.RolloutAction_ROLLOUT_ACTION_RESUME, ""))
	check("apply after resume", h.mustApply(manifest()), ActionConfigured)
	if getPool(t, h.f, "edge").GetSpec().GetRollout().GetPaused() {
		t.Fatal("paused after resume and apply")
	}

	// A pin over the channel applies as it is stored (both fields).
	h.mustApply(controlCmd("edge", roostv1.RolloutAction_ROLLOUT_ACTION_PIN, "2026.11.0"))
	check("apply of the pinned spec", h.mustApply(manifest(func(s *roostv1.PoolSpec) { s.ImageVersion = "2026.11.0" })), ActionUnchanged)
	// Dropping the pin unpins, with a warning naming what the pool follows.
	unpinned := "pool/edge: unpinned from 2026.11.0 (the manifest sets no spec.imageVersion); it follows channel stable again"
	check("dry run without the pin", h.mustApply(dryRun(manifest())), ActionConfigured, unpinned)
	check("apply without the pin", h.mustApply(manifest()), ActionConfigured, unpinned)
	if s := getPool(t, h.f, "edge").GetSpec(); s.GetImageVersion() != "" || s.GetImageChannel() != "stable" {
		t.Fatalf("after unpin: %v", s)
	}
	h.mustApply(controlCmd("edge", roostv1.RolloutAction_ROLLOUT_ACTION_PIN, "2026.11.0"))
	h.mustApply(controlCmd("edge", roostv1.RolloutAction_ROLLOUT_ACTION_PAUSE, ""))
	check("apply without pin, pause and channel", h.mustApply(manifest(func(s *roostv1.PoolSpec) { s.ImageChannel = "" })), ActionConfigured, kept,
		"pool/edge: unpinned from 2026.11.0 (the manifest sets no spec.imageVersion); it takes the newest release again (the manifest sets no spec.imageChannel either)")
}

// TestPauseOfAPausedPool: under RulesPauseKeepsReason pausing a paused Pool
// changes nothing, so the rollout controller's refined reason stays and
// roostctl says the pool was already paused; under older rules the pause
// writes the operator's reason again, as replayed logs stored it.
func TestPauseOfAPausedPool(t *testing.T) {
	for _, rules := range []uint32{RulesPauseKeepsReason - 1, RulesPauseKeepsReason} {
		h := newHarness(t, Options{})
		standalonePool(h)
		at := func(cmd *roostv1.Command) *roostv1.Command { cmd.RulesVersion = rules; return cmd }
		h.mustApply(at(controlCmd("edge", roostv1.RolloutAction_ROLLOUT_ACTION_PAUSE, "")))
		const refined = "paused by an operator; 2 Machines wait for the new release"
		h.mustApply(at(rolloutCmd("edge", &roostv1.RolloutStatus{Phase: RolloutPaused, Reason: refined})))
		res := h.mustApply(at(controlCmd("edge", roostv1.RolloutAction_ROLLOUT_ACTION_PAUSE, "")))
		reason := getPool(t, h.f, "edge").GetStatus().GetRollout().GetReason()
		wantAction, wantReason := "Pool/edge=configured", "paused by an operator (roostctl rollout resume edge)"
		if rules >= RulesPauseKeepsReason {
			wantAction, wantReason = "Pool/edge=unchanged", refined
		}
		if got := actions(res); len(got) != 1 || got[0] != wantAction {
			t.Errorf("rules %d: second pause %v, want %s", rules, got, wantAction)
		}
		if reason != wantReason {
			t.Errorf("rules %d: reason after the second pause %q, want %q", rules, reason, wantReason)
		}
	}
}
