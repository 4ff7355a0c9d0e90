package remediation

import (
	"time"

	"github.com/roostfleet/roost/hub/rollout"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Defaults of a Pool's spec.remediation and spec.safety.
const (
	DefaultUnhealthyTimeout    = 10 * time.Minute
	DefaultMaxInFlight         = 1
	DefaultMaxUnhealthyPercent = 40
	// OnFailedRevisionHold keeps a Machine whose Revision failed (the
	// default); OnFailedRevisionReplace replaces it.
	OnFailedRevisionHold    = "hold"
	OnFailedRevisionReplace = "replace"
)

// Policy is a Pool's resolved remediation and safety settings.
type Policy struct {
	// UnhealthyTimeout is how long a Machine may be not Ready with its
	// Server Unreachable before it is replaced.
	UnhealthyTimeout time.Duration
	// ReplaceFailedRevision says a Machine whose desired Revision failed
	// is replaced (onFailedRevision: replace).
	ReplaceFailedRevision bool
	// MaxInFlight is how many replacements may be under way at once:
	// spec.remediation.maxInFlight, at most the rollout's maxUnavailable;
	// 0 turns remediation off.
	MaxInFlight int
	// MaxUnhealthyPercent is spec.safety.maxUnhealthyPercent.
	MaxUnhealthyPercent int
}

// PolicyOf resolves p's spec.remediation and spec.safety with their
// defaults.
func PolicyOf(p *roostv1.Pool) Policy {
	rem, saf := p.GetSpec().GetRemediation(), p.GetSpec().GetSafety()
	pol := Policy{UnhealthyTimeout: DefaultUnhealthyTimeout, MaxInFlight: DefaultMaxInFlight, MaxUnhealthyPercent: DefaultMaxUnhealthyPercent,
		ReplaceFailedRevision: rem.GetOnFailedRevision() == OnFailedRevisionReplace}
	if d := rem.GetUnhealthyTimeout(); d != nil && d.AsDuration() > 0 {
		pol.UnhealthyTimeout = d.AsDuration()
	}
	if rem != nil && rem.MaxInFlight != nil {
		pol.MaxInFlight = max(int(rem.GetMaxInFlight()), 0)
	}
	pol.MaxInFlight = min(pol.MaxInFlight, int(rollout.MaxUnavailable(p)))
	if saf != nil && saf.MaxUnhealthyPercent != nil {
		pol.MaxUnhealthyPercent = int(saf.GetMaxUnhealthyPercent())
	}
	return pol
}
