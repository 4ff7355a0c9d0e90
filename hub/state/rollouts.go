package state

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Rollout phases (RolloutStatus.phase).
const (
	RolloutIdle        = "Idle"
	RolloutWaiting     = "Waiting"
	RolloutProgressing = "Progressing"
	RolloutSettling    = "Settling"
	RolloutPaused      = "Paused"
	RolloutHalted      = "Halted"
)

// controlRollout applies an operator's action on a Pool's rollout (see
// roostv1.RolloutAction). PIN and UNDO need an ImageRelease of the
// version (NotFound otherwise); UNDO's version is resolved by the
// proposer from status.rollout.previous_version.
func (a *applier) controlRollout(c *roostv1.ControlRollout) ([]*roostv1.ApplyResult, *apierror.Error) {
	old, aerr := a.getPool(c.GetPool())
	if aerr != nil {
		return nil, aerr
	}
	if old == nil {
		return nil, apierror.NotFound(kindPool, c.GetPool())
	}
	p := proto.Clone(old).(*roostv1.Pool)
	if p.Spec == nil {
		p.Spec = &roostv1.PoolSpec{}
	}
	if p.Status == nil {
		p.Status = &roostv1.PoolStatus{}
	}
	if p.Status.Rollout == nil {
		p.Status.Rollout = &roostv1.RolloutStatus{}
	}
	ro := p.Status.Rollout
	rollout := func() *roostv1.RolloutPolicy {
		if p.Spec.Rollout == nil {
			p.Spec.Rollout = &roostv1.RolloutPolicy{}
		}
		return p.Spec.Rollout
	}
	specChanged := false
	switch c.GetAction() {
	case roostv1.RolloutAction_ROLLOUT_ACTION_PAUSE:
		specChanged = !rollout().GetPaused()
		if !specChanged && a.rules >= RulesPauseKeepsReason {
			// already paused: the rollout controller's reason stays
			return []*roostv1.ApplyResult{{Kind: kindPool, Name: c.GetPool(), Action: ActionUnchanged}}, nil
		}
		rollout().Paused = true
		if ro.GetPhase() != RolloutHalted { // shown at once; the controller refines the reason
			ro.Phase, ro.Reason = RolloutPaused, "paused by an operator (roostctl rollout resume "+c.GetPool()+")"
		}
	case roostv1.RolloutAction_ROLLOUT_ACTION_RESUME:
		specChanged = rollout().GetPaused()
		rollout().Paused = false
		for _, m := range ro.GetFailedMachines() {
			if !slices.Contains(ro.AcknowledgedMachines, m) {
				ro.AcknowledgedMachines = append(ro.AcknowledgedMachines, m)
			}
		}
		slices.Sort(ro.AcknowledgedMachines)
		ro.FailedMachines = nil
		if ro.GetPhase() == RolloutHalted || ro.GetPhase() == RolloutPaused {
			ro.Phase, ro.Reason = RolloutProgressing, "resumed by an operator"
		}
	case roostv1.RolloutAction_ROLLOUT_ACTION_ABORT:
		ro.Phase, ro.Reason = RolloutHalted, "aborted by an operator (roostctl rollout resume "+c.GetPool()+" continues it; rollout undo goes back)"
	case roostv1.RolloutAction_ROLLOUT_ACTION_PIN, roostv1.RolloutAction_ROLLOUT_ACTION_UNDO:
		if c.GetVersion() == "" {
			return nil, apierror.Invalid("invalid rollout action", apierror.Violation{Field: "version", Message: "is required"})
		}
		found, aerr := a.releaseExists(c.GetVersion())
		if aerr != nil {
			return nil, aerr
		}
		if !found {
			return nil, apierror.NotFound("ImageRelease", c.GetVersion())
		}
		specChanged = p.Spec.ImageVersion != c.GetVersion()
		p.Spec.ImageVersion = c.GetVersion()
	case roostv1.RolloutAction_ROLLOUT_ACTION_UNPIN:
		specChanged = p.Spec.ImageVersion != ""
		p.Spec.ImageVersion = ""
	default:
		return nil, apierror.Invalid("invalid rollout action", apierror.Violation{Field: "action", Message: fmt.Sprintf("unknown action %v", c.GetAction())})
	}
	if proto.Equal(p, old) {
		return []*roostv1.ApplyResult{{Kind: kindPool, Name: c.GetPool(), Action: ActionUnchanged}}, nil
	}
	a.touch(p.Metadata, specChanged)
	if aerr := a.put(p, false); aerr != nil {
		return nil, aerr
	}
	if aerr := a.recordControlEvent(c); aerr != nil {
		return nil, aerr
	}
	return []*roostv1.ApplyResult{{Kind: kindPool, Name: c.GetPool(), Action: ActionConfigured}}, nil
}

// applyPoolOver returns the Pool to store when in (a manifest) is
// applied over old (nil for a create), and warnings for the person who
// applied it:
//
//   - a stored pause (spec.rollout.paused, set by 'roostctl rollout pause'
//     or an earlier manifest) is kept when in does not pause the pool, with
//     a warning: re-applying a manifest from Git during an incident must
//     not resume the rollout; only 'roostctl rollout resume' lifts a
//     pause. The warning comes also when nothing else changed. in is
//     copied, never changed.
//   - a pin (spec.imageVersion) that in drops is dropped (apply is
//     declarative), with a warning naming what the pool follows now.
func applyPoolOver(in, old *roostv1.Pool) (*roostv1.Pool, []string) {
	if old == nil {
		return in, nil
	}
	name := in.GetMetadata().GetName()
	var warnings []string
	if old.GetSpec().GetRollout().GetPaused() && !in.GetSpec().GetRollout().GetPaused() {
		in = proto.Clone(in).(*roostv1.Pool)
		if in.Spec == nil {
			in.Spec = &roostv1.PoolSpec{}
		}
		if in.Spec.Rollout == nil {
			in.Spec.Rollout = &roostv1.RolloutPolicy{}
		}
		in.Spec.Rollout.Paused = true
		warnings = append(warnings, fmt.Sprintf("pool/%s: spec.rollout.paused kept (paused by 'roostctl rollout pause' or an earlier manifest); "+
			"'roostctl rollout resume %s' lifts it", name, name))
	}
	if v := old.GetSpec().GetImageVersion(); v != "" && in.GetSpec().GetImageVersion() == "" {
		follows := "it takes the newest release again (the manifest sets no spec.imageChannel either)"
		if ch := in.GetSpec().GetImageChannel(); ch != "" {
			follows = "it follows channel " + ch + " again"
		}
		warnings = append(warnings, fmt.Sprintf("pool/%s: unpinned from %s (the manifest sets no spec.imageVersion); %s", name, v, follows))
	}
	return in, warnings
}

// releaseExists says whether an ImageRelease has version.
func (a *applier) releaseExists(version string) (bool, *apierror.Error) {
	return a.anyRelease(func(r *roostv1.ImageReleaseSpec) bool { return r.GetVersion() == version })
}

// anyRelease says whether some stored ImageRelease's spec matches.
func (a *applier) anyRelease(match func(*roostv1.ImageReleaseSpec) bool) (bool, *apierror.Error) {
	it, err := a.txn.Get("ImageRelease", indexID)
	if err != nil {
		return false, internal(err)
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if match(raw.(*roostv1.Object).GetImageRelease().GetSpec()) {
			return true, nil
		}
	}
	return false, nil
}

// updatePoolRollout stores the rollout controller's view of a Pool. A
// stored halt and the acknowledged Machines are kept: only an operator
// (ControlRollout) clears them. NotFound when the Pool is gone.
func (a *applier) updatePoolRollout(c *roostv1.UpdatePoolRollout) *apierror.Error {
	old, aerr := a.getPool(c.GetPool())
	if aerr != nil {
		return aerr
	}
	if old == nil {
		return apierror.NotFound(kindPool, c.GetPool())
	}
	p := proto.Clone(old).(*roostv1.Pool)
	if p.Status == nil {
		p.Status = &roostv1.PoolStatus{}
	}
	next := proto.Clone(c.GetStatus()).(*roostv1.RolloutStatus)
	if next == nil {
		next = &roostv1.RolloutStatus{}
	}
	prev := old.GetStatus().GetRollout()
	next.AcknowledgedMachines = prev.GetAcknowledgedMachines()
	if prev.GetPhase() == RolloutHalted && next.GetPhase() != RolloutHalted {
		next.Phase, next.Reason = RolloutHalted, prev.GetReason()
	}
	p.Status.Rollout = next
	if proto.Equal(p, old) {
		return nil
	}
	a.touch(p.Metadata, false)
	if aerr := a.put(p, false); aerr != nil {
		return aerr
	}
	return a.recordRolloutEvent(c.GetPool(), prev, next)
}

// RevisionSummary is what rollouts read of a Revision: no Ignition.
type RevisionSummary struct {
	Number       int64
	Machine      string
	ImageVersion string
	// Phase and Reason are status.phase and status.reason.
	Phase, Reason string
	// BootedAt is status.booted_at (zero when not booted).
	BootedAt time.Time
}
