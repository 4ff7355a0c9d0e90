package window

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/teambition/rrule-go"
)

// ruleExample is shown with every problem in a rule.
const ruleExample = `e.g. "FREQ=WEEKLY;BYDAY=TU;BYHOUR=2;BYMINUTE=0"`

// maxCount bounds COUNT: a counted rule is expanded from its anchor.
const maxCount = 10000

// anchor is the default DTSTART: a Monday, the first day of a month and of
// a year, at midnight on the window's wall clock (see the package doc).
var anchor = time.Date(2001, time.January, 1, 0, 0, 0, 0, time.UTC)

// ruleKeys are the parts a rule may have: RFC 5545's, plus DTSTART.
var ruleKeys = []string{"FREQ", "UNTIL", "COUNT", "INTERVAL", "BYSECOND", "BYMINUTE", "BYHOUR",
	"BYDAY", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYMONTH", "BYSETPOS", "WKST", "DTSTART"}

// parsedRule is a rule checked part by part.
type parsedRule struct {
	// text is the rule as given, upper-cased.
	text string
	// opts holds the rule on a floating wall clock: every time in it is
	// the window's local wall clock written as UTC.
	opts rrule.ROption
	// counted is true with COUNT: the rule is always expanded from its anchor.
	counted bool
	// until is true with UNTIL. The rule's own parts say what it sets, not
	// zero times in opts: a DTSTART or UNTIL in year 1 parses to the zero
	// time.Time, which would otherwise read as "not set" (and rrule-go
	// takes a zero DTSTART for now, a zero UNTIL for none).
	until bool
}

// ruleError is a problem with the rule, with the fix; it becomes a
// FieldError for "rrule".
type ruleError struct{ problem, fix string }

func (e *ruleError) Error() string { return e.problem }

func badRule(fix, format string, a ...any) *ruleError {
	return &ruleError{problem: fmt.Sprintf(format, a...), fix: fix}
}

// parseRule checks rule (an RRULE value such as "FREQ=DAILY;BYHOUR=2")
// part by part, each part with rrule-go, and returns it on the floating
// wall clock of loc.
func parseRule(rule string, loc *time.Location) (*parsedRule, *ruleError) {
	rule = strings.TrimSpace(rule)
	up := strings.ToUpper(rule)
	switch {
	case rule == "":
		return nil, badRule(ruleExample, "is required")
	case strings.HasPrefix(up, "RRULE:"):
		return nil, badRule(`write only the value, e.g. "FREQ=DAILY;BYHOUR=2"`, `drop the "RRULE:" prefix`)
	case strings.ContainsAny(rule, "\r\n"):
		return nil, badRule(`put the start date into the rule as "DTSTART=YYYYMMDDTHHMMSS"`, "must be a single line")
	}
	values := map[string]string{}
	for _, part := range strings.Split(rule, ";") {
		key, val, ok := strings.Cut(strings.ToUpper(part), "=")
		switch {
		case part == "":
			return nil, badRule(ruleExample, "empty part in %q: remove the extra ';'", rule)
		case !ok:
			return nil, badRule(ruleExample, "part %q is not KEY=VALUE", part)
		case !slices.Contains(ruleKeys, key):
			if s := suggest(key, ruleKeys); s != "" {
				return nil, badRule(ruleExample, "unknown part %q: did you mean %q?", key, s)
			}
			return nil, badRule("known parts: "+strings.Join(ruleKeys, ", "), "unknown part %q", key)
		case values[key] != "":
			return nil, badRule("keep one of them", "%s is given twice", key)
		case val == "":
			return nil, badRule(ruleExample, "%s has no value", key)
		}
		values[key] = val
		if err := checkPart(key, val); err != nil {
			return nil, err
		}
	}
	if values["FREQ"] == "" {
		return nil, badRule(ruleExample, "FREQ is missing: start the rule with FREQ=DAILY, FREQ=WEEKLY, …")
	}
	// Every part parsed on its own; now the whole rule, on the floating
	// wall clock (UTC): dates without Z are wall-clock dates.
	opts, err := rrule.StrToROptionInLocation(up, time.UTC)
	if err != nil {
		return nil, badRule(ruleExample, "%v", err)
	}
	for _, k := range []string{"UNTIL", "DTSTART"} {
		if strings.HasSuffix(values[k], "Z") {
			t := &opts.Until
			if k == "DTSTART" {
				t = &opts.Dtstart
			}
			*t = floating(t.In(loc))
		}
	}
	p := &parsedRule{text: up, opts: *opts, counted: values["COUNT"] != "", until: values["UNTIL"] != ""}
	if err := p.checkCombination(values); err != nil {
		return nil, err
	}
	if values["DTSTART"] == "" {
		p.opts.Dtstart = anchor
	} else if err := checkDtstart(p.opts.Dtstart); err != nil {
		// Before anything expands it: rrule-go takes a zero DTSTART
		// (year 1) for now.
		return nil, err
	}
	if p.until && p.opts.Until.Before(p.opts.Dtstart) {
		// Also a zero UNTIL (year 1), which rrule-go would ignore.
		return nil, badRule("move UNTIL later, or DTSTART earlier", "UNTIL=%s is before the first opening", p.opts.Until.Format("20060102T150405"))
	}
	p.opts.Dtstart = p.opts.Dtstart.Truncate(time.Second)
	explicitDefaults(&p.opts)
	if err := checkReachable(p.opts); err != nil {
		return nil, err
	}
	return p, nil
}

// checkDtstart refuses a DTSTART outside the years a window may start in.
func checkDtstart(t time.Time) *ruleError {
	if y := t.Year(); y < 1970 || y > 2999 {
		return badRule("use a date from 1970 to 2999", "DTSTART is in the year %d", y)
	}
	return nil
}

// checkPart checks one KEY=VALUE part by parsing it with rrule-go, so that
// the library's message can name the part.
func checkPart(key, val string) *ruleError {
	part := key + "=" + val
	if key == "FREQ" {
		if _, err := rrule.StrToFreq(val); err != nil {
			return badRule("one of YEARLY, MONTHLY, WEEKLY, DAILY, HOURLY, MINUTELY, SECONDLY", "unknown FREQ %q", val)
		}
		return nil
	}
	opts, err := rrule.StrToROptionInLocation("FREQ=YEARLY;"+part, time.UTC)
	if err == nil {
		_, err = rrule.NewRRule(*opts)
	}
	if err != nil {
		var ne *strconv.NumError
		switch {
		case errors.As(err, &ne):
			return badRule(partFix(key), "%s: %q is not a number", part, ne.Num)
		case strings.HasPrefix(err.Error(), "undefined weekday"):
			return badRule(partFix(key), "%s: %q is not a weekday", part, strings.TrimPrefix(err.Error(), "undefined weekday: "))
		case strings.HasPrefix(err.Error(), "parsing time"):
			return badRule(partFix(key), "%s: not a date", part)
		}
		return badRule(partFix(key), "%s: %v", part, err)
	}
	switch key {
	case "COUNT":
		if opts.Count < 1 || opts.Count > maxCount {
			return badRule("use UNTIL for longer series", "%s: must be from 1 to %d", part, maxCount)
		}
	case "INTERVAL":
		if opts.Interval < 1 {
			return badRule(`e.g. "INTERVAL=2" for every other period`, "%s: must be at least 1", part)
		}
	}
	return nil
}

// partFix says what a part's values look like.
func partFix(key string) string {
	switch key {
	case "BYDAY":
		return "MO, TU, WE, TH, FR, SA, SU, optionally with an ordinal such as 1MO or -1FR"
	case "WKST":
		return "one of MO, TU, WE, TH, FR, SA, SU"
	case "UNTIL", "DTSTART":
		return "a date YYYYMMDD, a wall-clock time YYYYMMDDTHHMMSS, or a UTC time YYYYMMDDTHHMMSSZ"
	case "BYSECOND", "BYMINUTE":
		return "integers from 0 to 59, separated by ','"
	case "BYHOUR":
		return "integers from 0 to 23, separated by ','"
	case "BYMONTH":
		return "integers from 1 to 12, separated by ','"
	case "BYMONTHDAY":
		return "integers from 1 to 31 or -31 to -1, separated by ','"
	}
	return ruleExample
}

// checkCombination checks how parts go together (RFC 5545 §3.3.10).
func (p *parsedRule) checkCombination(values map[string]string) *ruleError {
	o := p.opts
	switch {
	case o.Freq == rrule.SECONDLY:
		return badRule("use FREQ=MINUTELY or coarser", "FREQ=SECONDLY is not supported: openings are at least a minute apart")
	case len(o.Bysetpos) > 0 && o.Freq >= rrule.DAILY:
		return badRule("use it with FREQ=WEEKLY, MONTHLY or YEARLY", "BYSETPOS is not supported with FREQ=%s", o.Freq)
	case values["COUNT"] != "" && values["UNTIL"] != "":
		return badRule("keep one of them", "COUNT and UNTIL are mutually exclusive")
	case values["COUNT"] != "" && values["DTSTART"] == "":
		return badRule("add DTSTART=YYYYMMDDTHHMMSS, a wall-clock time, to the rule, or bound it with UNTIL instead",
			"COUNT counts openings from DTSTART, which the rule does not set")
	case len(o.Byweekno) > 0 && o.Freq != rrule.YEARLY:
		return badRule("use it with FREQ=YEARLY", "BYWEEKNO is only allowed with FREQ=YEARLY")
	case len(o.Byyearday) > 0 && (o.Freq == rrule.MONTHLY || o.Freq == rrule.WEEKLY || o.Freq == rrule.DAILY):
		return badRule("use it with FREQ=YEARLY", "BYYEARDAY is not allowed with FREQ=%s", o.Freq)
	case len(o.Bymonthday) > 0 && o.Freq == rrule.WEEKLY:
		return badRule("use BYDAY with FREQ=WEEKLY", "BYMONTHDAY is not allowed with FREQ=WEEKLY")
	}
	limit := 0 // largest ordinal allowed in BYDAY
	switch {
	case o.Freq == rrule.MONTHLY, o.Freq == rrule.YEARLY && len(o.Bymonth) > 0:
		limit = 5
	case o.Freq == rrule.YEARLY:
		limit = 53
	}
	for _, d := range o.Byweekday {
		switch n := d.N(); {
		case n != 0 && limit == 0:
			return badRule(`drop the number, e.g. "BYDAY=MO", or use FREQ=MONTHLY`,
				"BYDAY=%s: an ordinal (%s) is only allowed with FREQ=MONTHLY or FREQ=YEARLY", values["BYDAY"], d)
		case n > limit || n < -limit:
			return badRule(fmt.Sprintf("use an ordinal from -%d to -1 or 1 to %d", limit, limit),
				"BYDAY=%s: %s is out of range", values["BYDAY"], d)
		}
	}
	return nil
}

// explicitDefaults writes into o what rrule-go would take from DTSTART, so
// that the rule means the same whatever DTSTART it is expanded from (see
// rebase).
func explicitDefaults(o *rrule.ROption) {
	d := o.Dtstart
	if len(o.Byweekno) == 0 && len(o.Byyearday) == 0 && len(o.Bymonthday) == 0 && len(o.Byweekday) == 0 && len(o.Byeaster) == 0 {
		switch o.Freq {
		case rrule.YEARLY:
			if len(o.Bymonth) == 0 {
				o.Bymonth = []int{int(d.Month())}
			}
			o.Bymonthday = []int{d.Day()}
		case rrule.MONTHLY:
			o.Bymonthday = []int{d.Day()}
		case rrule.WEEKLY:
			o.Byweekday = []rrule.Weekday{weekday(d.Weekday())}
		}
	}
	if len(o.Byhour) == 0 && o.Freq < rrule.HOURLY {
		o.Byhour = []int{d.Hour()}
	}
	if len(o.Byminute) == 0 && o.Freq < rrule.MINUTELY {
		o.Byminute = []int{d.Minute()}
	}
	if len(o.Bysecond) == 0 && o.Freq < rrule.SECONDLY {
		o.Bysecond = []int{d.Second()}
	}
	if o.Interval < 1 {
		o.Interval = 1
	}
}

// weekday returns rrule-go's Weekday for d.
func weekday(d time.Weekday) rrule.Weekday {
	return []rrule.Weekday{rrule.SU, rrule.MO, rrule.TU, rrule.WE, rrule.TH, rrule.FR, rrule.SA}[d]
}

// checkReachable rejects HOURLY, MINUTELY and SECONDLY rules whose INTERVAL
// never lands on a BYHOUR/BYMINUTE/BYSECOND value from the anchor (e.g.
// FREQ=HOURLY;INTERVAL=24;BYHOUR=1 from midnight): rrule-go would search for
// one forever.
func checkReachable(o rrule.ROption) *ruleError {
	var unit int
	switch o.Freq {
	case rrule.HOURLY:
		unit = 3600
	case rrule.MINUTELY:
		unit = 60
	case rrule.SECONDLY:
		unit = 1
	default:
		return nil
	}
	perDay := 86400 / unit
	start := (o.Dtstart.Hour()*3600 + o.Dtstart.Minute()*60 + o.Dtstart.Second()) / unit
	g := gcd(o.Interval, perDay)
	for t := start % g; t < perDay; t += g {
		s := t * unit
		if ok(o.Byhour, s/3600) && (o.Freq == rrule.HOURLY || ok(o.Byminute, s/60%60)) && (o.Freq != rrule.SECONDLY || ok(o.Bysecond, s%60)) {
			return nil
		}
	}
	return badRule("change INTERVAL or the BY parts, or set DTSTART to a time the rule matches",
		"FREQ=%s;INTERVAL=%d never reaches the given BYHOUR/BYMINUTE/BYSECOND from %s", o.Freq, o.Interval, o.Dtstart.Format("15:04:05"))
}

func ok(set []int, v int) bool { return len(set) == 0 || slices.Contains(set, v) }

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// floating returns t's wall clock (to the second) written as UTC.
func floating(t time.Time) time.Time {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return time.Date(y, mo, d, h, mi, s, 0, time.UTC)
}

// suggest returns the candidate within two edits of word, or "".
func suggest(word string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b.
func editDistance(a, b string) int {
	if len(a) > 32 || len(b) > 32 {
		return max(len(a), len(b))
	}
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
