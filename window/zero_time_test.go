package window

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// A DTSTART or UNTIL in year 1 parses to the zero time.Time; it must be
// refused like any other date out of range, not read as "not set" (which
// anchored the rule at 2001 and let COUNT through without a start).
func TestYearOneIsNotUnset(t *testing.T) {
	for _, c := range []struct{ rule, zone, want string }{
		{"FREQ=DAILY;DTSTART=19000101T000000", "", "DTSTART is in the year 1900"},
		{"FREQ=DAILY;DTSTART=00010101T000000", "", "DTSTART is in the year 1"},
		{"FREQ=DAILY;DTSTART=00010101", "", "DTSTART is in the year 1"},
		{"FREQ=DAILY;DTSTART=00010101T000000Z", "", "DTSTART is in the year 1"},
		{"FREQ=DAILY;DTSTART=00010101T000000Z", "Europe/Berlin", "DTSTART is in the year 1"},
		{"FREQ=DAILY;DTSTART=00010101T000000Z", "America/New_York", "DTSTART is in the year 0"},
		{"FREQ=DAILY;COUNT=3;DTSTART=00010101T000000", "", "DTSTART is in the year 1"},
		{"FREQ=WEEKLY;BYDAY=TU;COUNT=3;DTSTART=00010101T000000", "", "DTSTART is in the year 1"},
		{"FREQ=DAILY;UNTIL=00010101T000000", "", "UNTIL=00010101T000000 is before the first opening"},
		{"FREQ=DAILY;UNTIL=00010101T000000Z", "", "UNTIL=00010101T000000 is before the first opening"},
		{"FREQ=DAILY;UNTIL=20250101;DTSTART=20260101", "", "UNTIL=20250101T000000 is before the first opening"},
	} {
		_, err := Parse(&roostv1.MaintenanceWindowSpec{Rrule: c.rule, Duration: durationpb.New(time.Hour), TimeZone: c.zone})
		if err == nil || !strings.HasPrefix(err.Error(), "rrule: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q, %q) = %v\nwant an rrule error with %q", c.rule, c.zone, err, c.want)
		}
	}
	// The bounds themselves are kept.
	for _, rule := range []string{"FREQ=DAILY;DTSTART=19700101T000000", "FREQ=DAILY;COUNT=3;DTSTART=29990101T000000",
		"FREQ=DAILY;UNTIL=20260101;DTSTART=20260101"} {
		mustParse(t, rule, time.Hour, "")
	}
}
