package window

import (
	"slices"
	"testing"
	"time"
)

func named(w *Window, name string) *Window { w.Name = name; return w }

func TestSeveralWindowsPerPool(t *testing.T) {
	nightly := named(mustParse(t, "FREQ=DAILY;BYHOUR=2;BYMINUTE=30", 4*time.Hour, "Europe/Berlin"), "nightly")
	saturday := named(mustParse(t, "FREQ=WEEKLY;BYDAY=SA;BYHOUR=22", 6*time.Hour, "Europe/Berlin"), "saturday-late")
	ny := named(mustParse(t, "FREQ=WEEKLY;BYDAY=SU;BYHOUR=12", time.Hour, "America/New_York"), "new-york")
	ws := []*Window{nightly, saturday, ny}
	from := time.Date(2026, 11, 7, 12, 0, 0, 0, time.UTC) // Saturday
	got := NextAny(ws, from, 4)
	checkOpenings(t, got,
		// Saturday 22:00–04:00 and nightly 02:30–06:30 overlap: one opening.
		[2]string{"2026-11-07T22:00:00+01:00", "2026-11-08T06:30:00+01:00"},
		// Each keeps its own zone.
		[2]string{"2026-11-08T12:00:00-05:00", "2026-11-08T13:00:00-05:00"},
		[2]string{"2026-11-09T02:30:00+01:00", "2026-11-09T06:30:00+01:00"},
		[2]string{"2026-11-10T02:30:00+01:00", "2026-11-10T06:30:00+01:00"})
	for i, want := range [][]string{{"saturday-late", "nightly"}, {"new-york"}, {"nightly"}, {"nightly"}} {
		if !slices.Equal(got[i].Windows, want) {
			t.Errorf("opening %d windows %v, want %v", i, got[i].Windows, want)
		}
	}
	for _, c := range []struct {
		t     time.Time
		open  bool
		start string
	}{
		{time.Date(2026, 11, 7, 20, 59, 0, 0, time.UTC), false, ""},
		{time.Date(2026, 11, 7, 23, 0, 0, 0, time.UTC), true, "2026-11-07T22:00:00+01:00"},
		// 05:00 CET: saturday-late has closed, nightly is open.
		{time.Date(2026, 11, 8, 4, 0, 0, 0, time.UTC), true, "2026-11-08T02:30:00+01:00"},
		{time.Date(2026, 11, 8, 17, 30, 0, 0, time.UTC), true, "2026-11-08T12:00:00-05:00"},
		{time.Date(2026, 11, 8, 18, 0, 0, 0, time.UTC), false, ""},
	} {
		o, ok := OpenAny(ws, c.t)
		if ok != c.open || ok && o.Start.Format(time.RFC3339) != c.start {
			t.Errorf("OpenAny(%s) = %v, %v; want %v from %s", c.t.Format(time.RFC3339), o, ok, c.open, c.start)
		}
	}
	// The merged opening seen from inside starts with the openings still open.
	if o, _ := OpenAny(ws, time.Date(2026, 11, 8, 4, 0, 0, 0, time.UTC)); !slices.Equal(o.Windows, []string{"nightly"}) {
		t.Errorf("from 05:00 CET: %v %v", o, o.Windows)
	}
	if got := NextAny(nil, from, 3); got != nil {
		t.Errorf("no windows: %v", got)
	}
	if _, ok := OpenAny(nil, from); ok {
		t.Error("no windows: open")
	}
}

func TestTouchingOpeningsMerge(t *testing.T) {
	a := named(mustParse(t, "FREQ=DAILY;BYHOUR=1", time.Hour, ""), "a")
	b := named(mustParse(t, "FREQ=DAILY;BYHOUR=2", time.Hour, ""), "b")
	got := NextAny([]*Window{b, a}, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 2)
	checkOpenings(t, got,
		[2]string{"2026-01-01T01:00:00Z", "2026-01-01T03:00:00Z"},
		[2]string{"2026-01-02T01:00:00Z", "2026-01-02T03:00:00Z"})
	if !slices.Equal(got[0].Windows, []string{"a", "b"}) {
		t.Errorf("windows %v", got[0].Windows)
	}
}

// A window that never closes comes back in pieces of MaxMerged.
func TestNeverClosingIsCut(t *testing.T) {
	always := named(mustParse(t, "FREQ=DAILY", 24*time.Hour, ""), "always")
	from := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	got := NextAny([]*Window{always}, from, 3)
	checkOpenings(t, got,
		[2]string{"2026-01-01T00:00:00Z", "2026-01-08T00:00:00Z"},
		[2]string{"2026-01-08T00:00:00Z", "2026-01-15T00:00:00Z"},
		[2]string{"2026-01-15T00:00:00Z", "2026-01-22T00:00:00Z"})
	if o, ok := OpenAny([]*Window{always}, from); !ok || !o.Contains(from) {
		t.Errorf("OpenAny = %v, %v", o, ok)
	}
	// Overlapping openings of one window (every hour, 2h each) merge too.
	hourly := mustParse(t, "FREQ=HOURLY", 2*time.Hour, "")
	if got := NextAny([]*Window{hourly}, from, 1); len(got) != 1 || got[0].End.Sub(got[0].Start) != MaxMerged {
		t.Errorf("hourly: %v", got)
	}
}
