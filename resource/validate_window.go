package resource

import (
	"errors"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/window"
)

// validateMaintenanceWindow checks a MaintenanceWindow spec with
// window.Parse, the code that computes the window's openings, so that what
// validates also opens: rrule is an RFC 5545 RRULE value expanded by
// rrule-go that opens at least once; duration is > 0 and at most 24h;
// timeZone, when set, is an IANA zone name (empty means UTC). Each problem
// becomes a violation of spec.<field> with window.Parse's fix as the hint.
func validateMaintenanceWindow(e *violations, s *roostv1.MaintenanceWindowSpec) {
	_, err := window.Parse(s)
	var fes window.SpecError
	if !errors.As(err, &fes) {
		if err != nil {
			e.add("spec", err.Error(), "")
		}
		return
	}
	for _, fe := range fes {
		e.add("spec."+fe.Field, fe.Problem, fe.Fix)
	}
}
