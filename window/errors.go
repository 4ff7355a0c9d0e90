package window

import "strings"

// FieldError is one problem with one field of a MaintenanceWindowSpec.
type FieldError struct {
	// Field is the field's name as written in manifests: "rrule",
	// "duration" or "timeZone".
	Field string
	// Problem says what is wrong, with the value found, e.g.
	// "must be at most 24h, got 36h".
	Problem string
	// Fix says how to fix it, e.g. "split it into two windows"; it may be
	// empty.
	Fix string
}

// Error returns "field: problem (fix)", e.g.
// "duration: must be at most 24h, got 36h (split it into two windows)".
func (e *FieldError) Error() string {
	s := e.Field + ": " + e.Problem
	if e.Fix != "" {
		s += " (" + e.Fix + ")"
	}
	return s
}

// SpecError is every problem Parse found in a spec, in the order rrule,
// duration, timeZone; it is never empty.
type SpecError []*FieldError

// Error joins the problems with "; ".
func (e SpecError) Error() string {
	parts := make([]string, len(e))
	for i, fe := range e {
		parts[i] = fe.Error()
	}
	return strings.Join(parts, "; ")
}
