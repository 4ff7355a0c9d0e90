package window

import (
	"testing"
	"time"
)

func TestWindowCrossingMidnight(t *testing.T) {
	w := mustParse(t, "FREQ=WEEKLY;BYDAY=SA;BYHOUR=22", 4*time.Hour, "Europe/Berlin")
	berlin := w.Location()
	// Saturday 2026-11-07 22:00 to Sunday 02:00: it belongs to Saturday.
	sat := w.Next(at(berlin, 2026, 11, 7, 12, 0), 1)
	checkOpenings(t, sat, [2]string{"2026-11-07T22:00:00+01:00", "2026-11-08T02:00:00+01:00"})
	for _, c := range []struct {
		t    time.Time
		open bool
	}{
		{at(berlin, 2026, 11, 7, 21, 59), false},
		{at(berlin, 2026, 11, 7, 22, 0), true},
		{at(berlin, 2026, 11, 8, 0, 0), true},
		{at(berlin, 2026, 11, 8, 1, 0), true}, // after midnight, next day
		{at(berlin, 2026, 11, 8, 1, 59), true},
		{at(berlin, 2026, 11, 8, 2, 0), false}, // End is exclusive
		{at(berlin, 2026, 11, 8, 22, 0), false},
	} {
		o, ok := w.OpenAt(c.t)
		if ok != c.open || ok && !o.Start.Equal(sat[0].Start) {
			t.Errorf("OpenAt(%s) = %v, %v; want open %v", c.t.Format(time.RFC3339), o, ok, c.open)
		}
	}
	// From Sunday 01:00, the running opening comes first.
	checkOpenings(t, w.Next(at(berlin, 2026, 11, 8, 1, 0), 2),
		[2]string{"2026-11-07T22:00:00+01:00", "2026-11-08T02:00:00+01:00"},
		[2]string{"2026-11-14T22:00:00+01:00", "2026-11-15T02:00:00+01:00"})
}

func TestUntilAndCountExhaust(t *testing.T) {
	// UNTIL as wall clock in the zone: the opening at 02:00 on the 3rd is
	// the last (02:00 ≤ 02:00), the rule is done after it.
	w := mustParse(t, "FREQ=DAILY;BYHOUR=2;UNTIL=20261203T020000", time.Hour, "Europe/Berlin")
	from := at(w.Location(), 2026, 12, 1, 0, 0)
	checkOpenings(t, w.Next(from, 5),
		[2]string{"2026-12-01T02:00:00+01:00", "2026-12-01T03:00:00+01:00"},
		[2]string{"2026-12-02T02:00:00+01:00", "2026-12-02T03:00:00+01:00"},
		[2]string{"2026-12-03T02:00:00+01:00", "2026-12-03T03:00:00+01:00"})
	if got := w.Next(at(w.Location(), 2026, 12, 3, 3, 0), 5); len(got) != 0 {
		t.Errorf("after UNTIL: %v", got)
	}
	if _, ok := w.OpenAt(at(w.Location(), 2026, 12, 4, 2, 30)); ok {
		t.Error("open after UNTIL")
	}
	// UNTIL with Z is an instant: 01:00Z is 02:00 CET, the same last opening.
	z := mustParse(t, "FREQ=DAILY;BYHOUR=2;UNTIL=20261203T010000Z", time.Hour, "Europe/Berlin")
	if got := z.Next(from, 5); len(got) != 3 {
		t.Errorf("UNTIL with Z: %v", got)
	}
	// COUNT counts from DTSTART, also when asked from later.
	c := mustParse(t, "FREQ=DAILY;BYHOUR=1;COUNT=3;DTSTART=20261201T000000", time.Hour, "Europe/Berlin")
	checkOpenings(t, c.Next(at(c.Location(), 2026, 12, 2, 0, 0), 5),
		[2]string{"2026-12-02T01:00:00+01:00", "2026-12-02T02:00:00+01:00"},
		[2]string{"2026-12-03T01:00:00+01:00", "2026-12-03T02:00:00+01:00"})
	if got := c.Next(at(c.Location(), 2027, 1, 1, 0, 0), 5); len(got) != 0 {
		t.Errorf("after COUNT: %v", got)
	}
	if got := c.Next(from, 0); got != nil {
		t.Errorf("n=0: %v", got)
	}
}
