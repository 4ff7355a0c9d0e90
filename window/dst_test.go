package window

import (
	"testing"
	"time"
)

// Europe/Berlin springs forward on 2026-03-29 (02:00 CET → 03:00 CEST) and
// falls back on 2026-10-25 (03:00 CEST → 02:00 CET).

func TestSpringForwardGapAtStart(t *testing.T) {
	w := mustParse(t, "FREQ=DAILY;BYHOUR=2;BYMINUTE=30", 4*time.Hour, "Europe/Berlin")
	berlin := w.Location()
	got := w.Next(at(berlin, 2026, 3, 28, 12, 0), 3)
	checkOpenings(t, got,
		// 02:30 does not exist on the 29th: the window opens at the jump,
		// 03:00 CEST, and lasts 4 real hours.
		[2]string{"2026-03-29T03:00:00+02:00", "2026-03-29T07:00:00+02:00"},
		[2]string{"2026-03-30T02:30:00+02:00", "2026-03-30T06:30:00+02:00"},
		[2]string{"2026-03-31T02:30:00+02:00", "2026-03-31T06:30:00+02:00"})
	if got[0].Start.UTC() != time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC) {
		t.Errorf("start %s, want the jump at 01:00 UTC", got[0].Start.UTC())
	}
	// Open at 03:00 CEST sharp, not a second before (which is 01:59:59 CET).
	if _, ok := w.OpenAt(time.Date(2026, 3, 29, 0, 59, 59, 0, time.UTC)); ok {
		t.Error("open before the jump")
	}
	if o, ok := w.OpenAt(at(berlin, 2026, 3, 29, 3, 0)); !ok || !o.Start.Equal(got[0].Start) {
		t.Errorf("OpenAt(03:00 CEST) = %v, %v", o, ok)
	}
}

func TestSpringForwardStartsInGapOpenOnce(t *testing.T) {
	// 02:00, 02:15, 02:30 and 02:45 all fall into the gap: one opening at 03:00.
	w := mustParse(t, "FREQ=DAILY;BYHOUR=2;BYMINUTE=0,15,30,45", 10*time.Minute, "Europe/Berlin")
	got := w.Next(at(w.Location(), 2026, 3, 29, 0, 0), 2)
	checkOpenings(t, got,
		[2]string{"2026-03-29T03:00:00+02:00", "2026-03-29T03:10:00+02:00"},
		[2]string{"2026-03-30T02:00:00+02:00", "2026-03-30T02:10:00+02:00"})
}

func TestFallBackFoldOpensOnce(t *testing.T) {
	w := mustParse(t, "FREQ=DAILY;BYHOUR=2;BYMINUTE=30", 30*time.Minute, "Europe/Berlin")
	got := w.Next(at(w.Location(), 2026, 10, 24, 12, 0), 3)
	checkOpenings(t, got,
		// 02:30 happens twice on the 25th: the window opens at the first,
		// 02:30 CEST (00:30 UTC), and not again at 02:30 CET.
		// It ends 30 minutes later, at 03:00 CEST, which the clocks show as 02:00 CET.
		[2]string{"2026-10-25T02:30:00+02:00", "2026-10-25T02:00:00+01:00"},
		[2]string{"2026-10-26T02:30:00+01:00", "2026-10-26T03:00:00+01:00"},
		[2]string{"2026-10-27T02:30:00+01:00", "2026-10-27T03:00:00+01:00"})
	secondPass := time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC) // 02:30 CET
	if o, ok := w.OpenAt(secondPass); ok {
		t.Errorf("open again at the second 02:30: %v", o)
	}
}

func TestHourlyAcrossFold(t *testing.T) {
	// Every hour on the hour, wall clock: the repeated hour 02:00 opens once.
	w := mustParse(t, "FREQ=HOURLY;BYMINUTE=0", 10*time.Minute, "Europe/Berlin")
	got := w.Next(time.Date(2026, 10, 24, 23, 30, 0, 0, time.UTC), 3) // 01:30 CEST
	checkOpenings(t, got,
		[2]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:10:00+02:00"},
		[2]string{"2026-10-25T03:00:00+01:00", "2026-10-25T03:10:00+01:00"},
		[2]string{"2026-10-25T04:00:00+01:00", "2026-10-25T04:10:00+01:00"})
}

func TestDurationIsElapsedTimeAcrossDST(t *testing.T) {
	w := mustParse(t, "FREQ=DAILY;BYHOUR=0;BYMINUTE=30", 4*time.Hour, "Europe/Berlin")
	spring := w.Next(at(w.Location(), 2026, 3, 29, 0, 0), 1)
	// 00:30 CET + 4h = 05:30 CEST: three hours of wall clock later plus the skipped one.
	checkOpenings(t, spring, [2]string{"2026-03-29T00:30:00+01:00", "2026-03-29T05:30:00+02:00"})
	fall := w.Next(at(w.Location(), 2026, 10, 25, 0, 0), 1)
	// 00:30 CEST + 4h = 03:30 CET.
	checkOpenings(t, fall, [2]string{"2026-10-25T00:30:00+02:00", "2026-10-25T03:30:00+01:00"})
	for _, o := range append(spring, fall...) {
		if o.End.Sub(o.Start) != 4*time.Hour {
			t.Errorf("%v lasts %s", o, o.End.Sub(o.Start))
		}
	}
}

func TestOtherZones(t *testing.T) {
	// New York springs forward at 02:00 on 2027-03-14.
	ny := mustParse(t, "FREQ=WEEKLY;BYDAY=SU;BYHOUR=2;BYMINUTE=30", time.Hour, "America/New_York")
	checkOpenings(t, ny.Next(time.Date(2027, 3, 13, 0, 0, 0, 0, time.UTC), 2),
		[2]string{"2027-03-14T03:00:00-04:00", "2027-03-14T04:00:00-04:00"},
		[2]string{"2027-03-21T02:30:00-04:00", "2027-03-21T03:30:00-04:00"})
	// Lord Howe Island moves its clocks by 30 minutes (02:00 → 02:30 on 2026-10-04).
	lh := mustParse(t, "FREQ=DAILY;BYHOUR=2;BYMINUTE=15", time.Hour, "Australia/Lord_Howe")
	checkOpenings(t, lh.Next(time.Date(2026, 10, 3, 0, 0, 0, 0, time.UTC), 1),
		[2]string{"2026-10-04T02:30:00+11:00", "2026-10-04T03:30:00+11:00"})
	// Samoa skipped 2011-12-30 entirely (23:59:59 -10 on the 29th, then
	// 00:00 +14 on the 31st): the 30th's opening happens at the jump.
	ws := mustParse(t, "FREQ=DAILY;BYHOUR=12", time.Hour, "Pacific/Apia")
	checkOpenings(t, ws.Next(time.Date(2011, 12, 29, 12, 0, 0, 0, time.UTC), 3),
		[2]string{"2011-12-29T12:00:00-10:00", "2011-12-29T13:00:00-10:00"},
		[2]string{"2011-12-31T00:00:00+14:00", "2011-12-31T01:00:00+14:00"},
		[2]string{"2011-12-31T12:00:00+14:00", "2011-12-31T13:00:00+14:00"})
}

func TestResolve(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	for _, c := range []struct {
		wall time.Time
		want string
	}{
		{time.Date(2026, 3, 29, 1, 59, 59, 0, time.UTC), "2026-03-29T01:59:59+01:00"},
		{time.Date(2026, 3, 29, 2, 0, 0, 0, time.UTC), "2026-03-29T03:00:00+02:00"},
		{time.Date(2026, 3, 29, 2, 59, 59, 0, time.UTC), "2026-03-29T03:00:00+02:00"},
		{time.Date(2026, 3, 29, 3, 0, 0, 0, time.UTC), "2026-03-29T03:00:00+02:00"},
		{time.Date(2026, 10, 25, 2, 0, 0, 0, time.UTC), "2026-10-25T02:00:00+02:00"},
		{time.Date(2026, 10, 25, 2, 59, 59, 0, time.UTC), "2026-10-25T02:59:59+02:00"},
		{time.Date(2026, 10, 25, 3, 0, 0, 0, time.UTC), "2026-10-25T03:00:00+01:00"},
	} {
		if got := resolve(c.wall, berlin).Format(time.RFC3339); got != c.want {
			t.Errorf("resolve(%s) = %s, want %s", c.wall.Format("2006-01-02 15:04:05"), got, c.want)
		}
	}
}
