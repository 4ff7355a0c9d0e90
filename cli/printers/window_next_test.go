package printers

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// get windows' NEXT OPENING and describe's Next Opening, for a window that
// is open, one that opens later, one whose rule ended and an invalid one.
func TestWindowNext(t *testing.T) {
	now := time.Date(2026, 12, 1, 2, 30, 0, 0, time.UTC) // a Tuesday
	mw := func(rule string) *roostv1.MaintenanceWindow {
		return &roostv1.MaintenanceWindow{Spec: &roostv1.MaintenanceWindowSpec{Rrule: rule, Duration: durationpb.New(2 * time.Hour), TimeZone: "UTC"}}
	}
	for _, c := range []struct {
		rule, cell, line string
	}{
		{"FREQ=DAILY;BYHOUR=2", "open (closes in 90m)", "open now, until 2026-12-01T04:00:00Z (in 90m)"},
		{"FREQ=WEEKLY;BYDAY=WE;BYHOUR=1", "in 22h", "2026-12-02T01:00:00Z (in 22h) until 2026-12-02T03:00:00Z"},
		{"FREQ=DAILY;BYHOUR=2;UNTIL=20261130T000000Z", "never", "never: spec.rrule ends (UNTIL or COUNT)"},
		{"FREQ=SECONDLY", "<invalid>", "<invalid spec>"},
	} {
		if got := windowNextCell(mw(c.rule), now); got != c.cell {
			t.Errorf("%s: cell %q, want %q", c.rule, got, c.cell)
		}
		if got := windowNextLine(mw(c.rule), now); got != c.line {
			t.Errorf("%s: line %q, want %q", c.rule, got, c.line)
		}
	}
}
