package printers

import (
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
	"github.com/roostfleet/roost/window"
)

// windowNext says when a MaintenanceWindow opens next, as of now (computed
// by window.Parse and Window.OpenAt/Next on the window's wall clock): open
// is true with the current opening while it is open; ok is false when the
// rule never opens again (UNTIL or COUNT passed) or the spec is invalid
// (then valid is false).
func windowNext(mw *roostv1.MaintenanceWindow, now time.Time) (o window.Opening, open, ok, valid bool) {
	w, err := window.Parse(mw.GetSpec())
	if err != nil {
		return window.Opening{}, false, false, false
	}
	if cur, isOpen := w.OpenAt(now); isOpen {
		return cur, true, true, true
	}
	next := w.Next(now, 1)
	if len(next) == 0 {
		return window.Opening{}, false, false, true
	}
	return next[0], false, true, true
}

// windowNextCell is the NEXT OPENING column of `get windows`: "open (closes
// in 42m)", "in 9h", "never" (the rule ended) or "<invalid>".
func windowNextCell(r resource.Resource, now time.Time) string {
	o, open, ok, valid := windowNext(r.(*roostv1.MaintenanceWindow), now)
	switch {
	case !valid:
		return "<invalid>"
	case !ok:
		return "never"
	case open:
		return "open (closes in " + duration.HumanDuration(o.End.Sub(now)) + ")"
	}
	return "in " + duration.HumanDuration(o.Start.Sub(now))
}

// windowNextLine is describe's "Next Opening" of a MaintenanceWindow: the
// opening's start and end in RFC 3339 UTC with the time to them.
func windowNextLine(mw *roostv1.MaintenanceWindow, now time.Time) string {
	o, open, ok, valid := windowNext(mw, now)
	utc := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	switch {
	case !valid:
		return "<invalid spec>"
	case !ok:
		return "never: spec.rrule ends (UNTIL or COUNT)"
	case open:
		return "open now, until " + utc(o.End) + " (in " + duration.HumanDuration(o.End.Sub(now)) + ")"
	}
	return utc(o.Start) + " (in " + duration.HumanDuration(o.Start.Sub(now)) + ") until " + utc(o.End)
}
