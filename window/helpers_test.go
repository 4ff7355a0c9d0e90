package window

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// mustParse parses a window or fails the test.
func mustParse(t testing.TB, rule string, d time.Duration, tz string) *Window {
	t.Helper()
	w, err := Parse(&roostv1.MaintenanceWindowSpec{Rrule: rule, Duration: durationpb.New(d), TimeZone: tz})
	if err != nil {
		t.Fatalf("Parse(%q, %s, %q): %v", rule, d, tz, err)
	}
	return w
}

func zone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// at is a wall-clock time in loc (the first one in a fold).
func at(loc *time.Location, y int, mo time.Month, d, h, mi int) time.Time {
	return time.Date(y, mo, d, h, mi, 0, 0, loc)
}

// checkOpenings compares openings with want, given as RFC 3339 start/end pairs.
func checkOpenings(t *testing.T, got []Opening, want ...[2]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d openings, want %d:\n%v", len(got), len(want), got)
	}
	for i, w := range want {
		if s, e := got[i].Start.Format(time.RFC3339), got[i].End.Format(time.RFC3339); s != w[0] || e != w[1] {
			t.Errorf("opening %d = %s – %s, want %s – %s", i, s, e, w[0], w[1])
		}
	}
}

func specOf(rule string, d time.Duration, tz string) *roostv1.MaintenanceWindowSpec {
	return &roostv1.MaintenanceWindowSpec{Rrule: rule, Duration: durationpb.New(d), TimeZone: tz}
}
