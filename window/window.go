package window

import (
	"fmt"
	"iter"
	"time"
	_ "time/tzdata" // IANA zones for timeZone on hosts without /usr/share/zoneinfo

	"github.com/teambition/rrule-go"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// MaxDuration is the longest duration of a window's openings.
const MaxDuration = 24 * time.Hour

// Window is a parsed MaintenanceWindow: when it opens and for how long.
// Use Parse to make one. A Window is immutable apart from Name and safe for
// concurrent use.
type Window struct {
	// Name is the MaintenanceWindow's name, copied into each Opening's
	// Windows; Parse leaves it empty.
	Name string

	rule     *parsedRule
	loc      *time.Location
	duration time.Duration
}

// Opening is one period in which disruptive work may start: from Start
// (inclusive) to End (exclusive). Start and End are in the time zone of the
// window they came from, so Format shows local times.
type Opening struct {
	Start, End time.Time
	// Windows names the windows the opening came from: one name for an
	// opening of a named Window, several for one merged by NextAny, none
	// for a Window without a Name.
	Windows []string
}

// Contains reports whether t is in [Start, End).
func (o Opening) Contains(t time.Time) bool { return !t.Before(o.Start) && t.Before(o.End) }

// String returns "START – END" in RFC 3339, e.g.
// "2026-12-01T02:00:00+01:00 – 2026-12-01T06:00:00+01:00".
func (o Opening) String() string {
	return o.Start.Format(time.RFC3339) + " – " + o.End.Format(time.RFC3339)
}

// Parse checks spec and returns its Window. Rules:
//
//   - rrule: an RFC 5545 RRULE value without the "RRULE:" prefix, e.g.
//     "FREQ=WEEKLY;BYDAY=TU;BYHOUR=2;BYMINUTE=0"; parts are case-insensitive
//     and each may appear once; DTSTART=YYYYMMDDTHHMMSS may anchor it (see
//     the package doc); COUNT (1 to 10000) needs DTSTART; the rule must
//     open at least once.
//   - duration: more than 0 and at most MaxDuration (24h).
//   - timeZone: an IANA name such as "Europe/Berlin"; empty means UTC;
//     "Local" is refused (it would be the zone of whoever evaluates it).
//
// The error is a SpecError listing every problem, each a FieldError that
// names the field and the fix, e.g.
// "duration: must be at most 24h, got 36h (split it into two windows)".
func Parse(spec *roostv1.MaintenanceWindowSpec) (*Window, error) {
	var errs SpecError
	loc, zerr := parseZone(spec.GetTimeZone())
	rule, rerr := parseRule(spec.GetRrule(), loc)
	if rerr == nil {
		rerr = checkOpens(rule)
	}
	if rerr != nil {
		errs = append(errs, &FieldError{Field: "rrule", Problem: rerr.problem, Fix: rerr.fix})
	}
	d, derr := parseDuration(spec)
	if derr != nil {
		errs = append(errs, derr)
	}
	if zerr != nil {
		errs = append(errs, zerr)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return &Window{rule: rule, loc: loc, duration: d}, nil
}

func parseDuration(spec *roostv1.MaintenanceWindowSpec) (time.Duration, *FieldError) {
	bad := func(fix, format string, a ...any) *FieldError {
		return &FieldError{Field: "duration", Problem: fmt.Sprintf(format, a...), Fix: fix}
	}
	pd := spec.GetDuration()
	switch {
	case pd == nil:
		return 0, bad(`how long each opening lasts, e.g. "4h"`, "is required")
	case pd.CheckValid() != nil:
		return 0, bad(`e.g. "4h"`, "invalid duration: %v", pd.CheckValid())
	}
	d := pd.AsDuration()
	switch {
	case d <= 0:
		return 0, bad(`e.g. "4h"`, "must be > 0, got %s", FormatDuration(d))
	case d > MaxDuration:
		n := int((d + MaxDuration - 1) / MaxDuration)
		fix := "split it into two windows"
		if n > 2 {
			fix = fmt.Sprintf("split it into %d windows", n)
		}
		return 0, bad(fix, "must be at most %s, got %s", FormatDuration(MaxDuration), FormatDuration(d))
	}
	return d, nil
}

func parseZone(tz string) (*time.Location, *FieldError) {
	const fix = `use an IANA name such as "Europe/Berlin", "America/New_York" or "UTC"`
	switch tz {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return time.UTC, &FieldError{Field: "timeZone", Problem: `"Local" is the zone of whoever reads the window, not an IANA name`,
			Fix: `name the zone, e.g. "Europe/Berlin", or "UTC"`}
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return time.UTC, &FieldError{Field: "timeZone", Problem: fmt.Sprintf("unknown time zone %q", tz), Fix: fix}
	}
	return loc, nil
}

// probeYear is where checkOpens looks for an opening of the unbounded
// rule: rrule-go gives up after year 9999, so a rule that never matches is
// given up on after about 400 years, a whole cycle of the Gregorian
// calendar.
const probeYear = 9999 - 410

// checkOpens rejects rules that never open, and rules rrule-go cannot
// expand.
func checkOpens(p *parsedRule) (err *ruleError) {
	defer func() {
		if r := recover(); r != nil {
			err = badRule("simplify the rule", "cannot be expanded: %v", r)
		}
	}()
	if err := checkDtstart(p.opts.Dtstart); err != nil {
		return err
	}
	never := badRule("check BYMONTH, BYMONTHDAY, BYDAY, BYYEARDAY, BYWEEKNO, BYSETPOS and INTERVAL against each other", "never matches any date")
	probe := time.Date(probeYear, time.January, 1, 0, 0, 0, 0, time.UTC)
	if p.opts.Freq >= rrule.DAILY {
		// Days first, cheaply: the same day filters, one year at a time.
		o := p.opts
		days := rrule.ROption{Freq: rrule.YEARLY, Dtstart: probe, Wkst: o.Wkst,
			Bymonth: o.Bymonth, Bymonthday: o.Bymonthday, Byyearday: o.Byyearday, Byweekday: o.Byweekday}
		if len(days.Bymonth)+len(days.Bymonthday)+len(days.Byyearday)+len(days.Byweekday) > 0 {
			r, e := rrule.NewRRule(days)
			if e != nil {
				return badRule(ruleExample, "%v", e)
			}
			if _, ok := r.Iterator()(); !ok {
				return never
			}
		}
	}
	unbounded := p.opts
	unbounded.Count, unbounded.Until = 0, time.Time{}
	unbounded = rebase(unbounded, probe)
	r, e := rrule.NewRRule(unbounded)
	if e != nil {
		return badRule(ruleExample, "%v", e)
	}
	if _, ok := r.Iterator()(); !ok {
		return never
	}
	if p.until {
		r, e := rrule.NewRRule(p.opts)
		if e != nil {
			return badRule(ruleExample, "%v", e)
		}
		if _, ok := r.Iterator()(); !ok {
			return badRule("move UNTIL later, or DTSTART earlier", "UNTIL=%s is before the first opening", p.opts.Until.Format("20060102T150405"))
		}
	}
	return nil
}

// Duration returns how long each opening lasts (elapsed time).
func (w *Window) Duration() time.Duration { return w.duration }

// Location returns the window's time zone (UTC when the spec has none).
func (w *Window) Location() *time.Location { return w.loc }

// Rule returns the window's rule, upper-cased, e.g. "FREQ=DAILY;BYHOUR=2".
func (w *Window) Rule() string { return w.rule.text }

// margin is how far before the wall clock of an instant Openings starts
// expanding: more than any jump of a zone's offset.
const margin = 48 * time.Hour

// Openings returns the window's openings that are still open at from or
// start after it (End > from), in order of Start: the first may have
// started before from. The sequence ends when the rule does (UNTIL, COUNT),
// else the caller stops it. Openings of one window may overlap each other
// (e.g. FREQ=HOURLY with a duration of 2h); each lasts exactly Duration.
func (w *Window) Openings(from time.Time) iter.Seq[Opening] {
	return w.openings(from, true)
}

// openings is Openings; without fast, it expands the rule from its anchor
// (the reference the tests compare with).
func (w *Window) openings(from time.Time, fast bool) iter.Seq[Opening] {
	return func(yield func(Opening) bool) {
		lo := from.Add(-w.duration) // an opening is still open at from iff it starts after lo
		startWall := floating(lo.In(w.loc)).Add(-margin)
		o := w.rule.opts
		if fast && !w.rule.counted {
			o = rebase(o, startWall)
		}
		r, err := rrule.NewRRule(o)
		if err != nil {
			return
		}
		next := safe(r.Iterator())
		var names []string
		if w.Name != "" {
			names = []string{w.Name}
		}
		var last time.Time
		for {
			wall, ok := next()
			if !ok {
				return
			}
			if wall.Before(startWall) {
				continue
			}
			start := resolve(wall, w.loc)
			if start.Equal(last) || !start.After(lo) {
				last = start
				continue
			}
			last = start
			if !yield(Opening{Start: start, End: start.Add(w.duration), Windows: names}) {
				return
			}
		}
	}
}

// safe wraps an rrule-go iterator so that a panic in the library ends the
// sequence instead of the program.
func safe(next rrule.Next) rrule.Next {
	done := false
	return func() (t time.Time, ok bool) {
		if done {
			return time.Time{}, false
		}
		defer func() {
			if r := recover(); r != nil {
				done, t, ok = true, time.Time{}, false
			}
		}()
		return next()
	}
}

// Next returns up to n openings of the window that are open at from or
// start after it, in order of Start; an opening that started before from
// and is still open comes first. It returns fewer (possibly none) when the
// rule ends, and nil for n ≤ 0.
func (w *Window) Next(from time.Time, n int) []Opening {
	var out []Opening
	if n <= 0 {
		return nil
	}
	for o := range w.Openings(from) {
		out = append(out, o)
		if len(out) == n {
			break
		}
	}
	return out
}

// OpenAt returns the opening that contains t, and true, when the window is
// open at t. When several do (openings that overlap), it returns the one
// that started last, which also ends last.
func (w *Window) OpenAt(t time.Time) (Opening, bool) {
	var found Opening
	ok := false
	for o := range w.Openings(t) {
		if o.Start.After(t) {
			break
		}
		found, ok = o, true
	}
	return found, ok
}
