package window

import (
	"testing"
	"time"
)

// FuzzParse checks that no rule makes Parse, Next or OpenAt panic or hang,
// and that what Parse accepts opens with well-formed openings.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"FREQ=WEEKLY;BYDAY=TU;BYHOUR=2;BYMINUTE=0", "FREQ=MONTHLY;BYDAY=-1FR", "FREQ=YEARLY;BYDAY=53MO",
		"FREQ=YEARLY;BYWEEKNO=-1;BYDAY=SU", "FREQ=HOURLY;INTERVAL=7;BYHOUR=3", "FREQ=MINUTELY;INTERVAL=90",
		"FREQ=MONTHLY;BYMONTHDAY=-31;BYSETPOS=-1", "FREQ=YEARLY;BYYEARDAY=-366", "FREQ=DAILY;COUNT=2;DTSTART=20260101",
		"FREQ=SECONDLY;INTERVAL=86401", "FREQ=YEARLY;BYMONTH=2;BYDAY=-5SU", "FREQ=DAILY;UNTIL=20260101T000000Z",
	} {
		f.Add(s, int64(3600), "Europe/Berlin")
	}
	f.Fuzz(func(t *testing.T, rule string, seconds int64, tz string) {
		w, err := Parse(specOf(rule, time.Duration(seconds)*time.Second, tz))
		if err != nil {
			return
		}
		from := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
		got := w.Next(from, 3)
		for i, o := range got {
			if !o.Start.Before(o.End) || o.End.Sub(o.Start) != w.Duration() || !o.End.After(from) || i > 0 && !got[i-1].Start.Before(o.Start) {
				t.Fatalf("%q: bad openings %v", rule, got)
			}
		}
		w.OpenAt(from)
	})
}
