package window

import (
	"time"

	"github.com/teambition/rrule-go"
)

// rebase returns o with its DTSTART moved forward to the start of the last
// period (year, month, week, day, hour, minute or second, per FREQ) at or
// before wall that the rule's INTERVAL steps on, so that expanding from
// there yields exactly the occurrences of o that are at or after it, without
// walking every period since the anchor. o must have explicit defaults
// (explicitDefaults) and no COUNT; when wall is not after o's own period it
// returns o unchanged. All times are on the floating wall clock.
func rebase(o rrule.ROption, wall time.Time) rrule.ROption {
	d := o.Dtstart
	iv := o.Interval
	var p time.Time // start of the first period after d's, stepping by iv
	switch o.Freq {
	case rrule.YEARLY:
		k := floorDiv(wall.Year()-d.Year(), iv)
		p = time.Date(d.Year()+k*iv, time.January, 1, 0, 0, 0, 0, time.UTC)
	case rrule.MONTHLY:
		months := (wall.Year()-d.Year())*12 + int(wall.Month()-d.Month())
		k := floorDiv(months, iv)
		p = time.Date(d.Year(), d.Month()+time.Month(k*iv), 1, 0, 0, 0, 0, time.UTC)
	case rrule.WEEKLY:
		back := (int(d.Weekday()) - int(toTimeWeekday(o.Wkst)) + 7) % 7
		ws := time.Date(d.Year(), d.Month(), d.Day()-back, 0, 0, 0, 0, time.UTC)
		k := floorDiv(int(wall.Sub(ws)/(24*time.Hour)), 7*iv)
		p = ws.AddDate(0, 0, 7*k*iv)
	default:
		unit := map[rrule.Frequency]time.Duration{rrule.DAILY: 24 * time.Hour, rrule.HOURLY: time.Hour,
			rrule.MINUTELY: time.Minute, rrule.SECONDLY: time.Second}[o.Freq]
		ps := d.Truncate(unit)
		step := unit * time.Duration(iv)
		if wall.Sub(ps) >= 1<<62 || step <= 0 {
			return o
		}
		p = ps.Add(step * (wall.Sub(ps) / step))
	}
	if !p.After(d) {
		return o
	}
	o.Dtstart = p
	return o
}

// toTimeWeekday converts rrule-go's weekday (MO = 0) to time's (Sunday = 0).
func toTimeWeekday(w rrule.Weekday) time.Weekday {
	return time.Weekday((w.Day() + 1) % 7)
}

func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
