package resource

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // time zones for MaintenanceWindow.spec.timeZone without system zoneinfo

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// maxWindowDuration bounds MaintenanceWindow.spec.duration.
const maxWindowDuration = 7 * 24 * time.Hour

// validateMaintenanceWindow: rrule is a well-formed RFC 5545 RRULE value;
// duration is > 0 and at most 7 days; timeZone, when set, is an IANA zone
// name (empty means UTC).
func validateMaintenanceWindow(e *violations, s *roostv1.MaintenanceWindowSpec) {
	if s.GetRrule() == "" {
		e.add("spec.rrule", "is required", `e.g. "FREQ=WEEKLY;BYDAY=TU;BYHOUR=2;BYMINUTE=0"`)
	} else if err := CheckRRule(s.GetRrule()); err != nil {
		e.add("spec.rrule", err.Error(), `e.g. "FREQ=WEEKLY;BYDAY=TU;BYHOUR=2;BYMINUTE=0"`)
	}
	const f = "spec.duration"
	switch d := s.GetDuration(); {
	case d == nil:
		e.add(f, "is required", `how long each opening lasts, e.g. "4h"`)
	case d.CheckValid() != nil:
		e.addf(f, "", "invalid duration: %v", d.CheckValid())
	case d.AsDuration() <= 0:
		e.addf(f, `e.g. "4h"`, "must be > 0, got %s", d.AsDuration())
	case d.AsDuration() > maxWindowDuration:
		e.addf(f, "", "must be at most 168h (7 days), got %s", d.AsDuration())
	}
	switch tz := s.GetTimeZone(); tz {
	case "", "UTC":
	case "Local":
		e.add("spec.timeZone", `"Local" is the hub's own zone, not an IANA name`, `name the zone, e.g. "Europe/Berlin", or "UTC"`)
	default:
		if _, err := time.LoadLocation(tz); err != nil {
			e.addf("spec.timeZone", `use an IANA name such as "Europe/Berlin", "America/New_York" or "UTC"`, "unknown time zone %q", tz)
		}
	}
}

var (
	rruleFreqs = []string{"SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY"}
	rruleKeys  = []string{"FREQ", "UNTIL", "COUNT", "INTERVAL", "BYSECOND", "BYMINUTE", "BYHOUR",
		"BYDAY", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYMONTH", "BYSETPOS", "WKST"}
	rruleDay   = regexp.MustCompile(`^[+-]?([1-9]|[1-4][0-9]|5[0-3])?(MO|TU|WE|TH|FR|SA|SU)$`)
	rruleUntil = regexp.MustCompile(`^\d{8}(T\d{6}Z?)?$`)
)

// CheckRRule checks the syntax of an RFC 5545 recurrence rule value such as
// "FREQ=WEEKLY;BYDAY=TU;BYHOUR=2;BYMINUTE=0": KEY=VALUE parts separated by
// ';', each key known and given once, FREQ present and one of SECONDLY …
// YEARLY, and the values of the numeric and day parts in range. It does not
// expand the rule. The error says which part is wrong.
func CheckRRule(rule string) error {
	if strings.HasPrefix(strings.ToUpper(rule), "RRULE:") {
		return fmt.Errorf(`drop the "RRULE:" prefix`)
	}
	seen := map[string]bool{}
	for _, part := range strings.Split(rule, ";") {
		key, val, ok := strings.Cut(part, "=")
		switch {
		case part == "":
			return fmt.Errorf("empty part in %q: remove the extra ';'", rule)
		case !ok:
			return fmt.Errorf("part %q is not KEY=VALUE", part)
		case !slices.Contains(rruleKeys, key):
			if s := suggest(key, rruleKeys); s != "" {
				return fmt.Errorf("unknown part %q: did you mean %q?", key, s)
			}
			return fmt.Errorf("unknown part %q (known: %s)", key, strings.Join(rruleKeys, ", "))
		case seen[key]:
			return fmt.Errorf("%s is given twice", key)
		case val == "":
			return fmt.Errorf("%s has no value", key)
		}
		seen[key] = true
		if err := checkRRulePart(key, val); err != nil {
			return err
		}
	}
	if !seen["FREQ"] {
		return fmt.Errorf("FREQ is missing: start the rule with FREQ=DAILY, FREQ=WEEKLY, …")
	}
	if seen["COUNT"] && seen["UNTIL"] {
		return fmt.Errorf("COUNT and UNTIL are mutually exclusive")
	}
	return nil
}

func checkRRulePart(key, val string) error {
	ints := func(lo, hi int, signed bool) error {
		for _, x := range strings.Split(val, ",") {
			n, err := strconv.Atoi(x)
			if err != nil || n > hi || n < lo || (signed && n == 0) || (!signed && strings.HasPrefix(x, "+")) {
				if signed {
					return fmt.Errorf("%s=%s: each value must be an integer from %d to %d or from %d to %d", key, val, -hi, -1, 1, hi)
				}
				return fmt.Errorf("%s=%s: each value must be an integer from %d to %d", key, val, lo, hi)
			}
		}
		return nil
	}
	switch key {
	case "FREQ":
		if !slices.Contains(rruleFreqs, val) {
			return fmt.Errorf("unknown FREQ %q (one of %s)", val, strings.Join(rruleFreqs, ", "))
		}
	case "COUNT", "INTERVAL":
		return ints(1, 1<<30, false)
	case "BYSECOND":
		return ints(0, 60, false)
	case "BYMINUTE":
		return ints(0, 59, false)
	case "BYHOUR":
		return ints(0, 23, false)
	case "BYMONTH":
		return ints(1, 12, false)
	case "BYMONTHDAY":
		return ints(-31, 31, true)
	case "BYYEARDAY":
		return ints(-366, 366, true)
	case "BYWEEKNO":
		return ints(-53, 53, true)
	case "BYSETPOS":
		return ints(-366, 366, true)
	case "BYDAY":
		for _, x := range strings.Split(val, ",") {
			if !rruleDay.MatchString(x) {
				return fmt.Errorf("BYDAY=%s: %q is not a weekday (MO, TU, WE, TH, FR, SA, SU, optionally with an ordinal such as 1MO or -1FR)", val, x)
			}
		}
	case "WKST":
		if !slices.Contains([]string{"MO", "TU", "WE", "TH", "FR", "SA", "SU"}, val) {
			return fmt.Errorf("WKST=%s: must be one of MO, TU, WE, TH, FR, SA, SU", val)
		}
	case "UNTIL":
		if !rruleUntil.MatchString(val) {
			return fmt.Errorf("UNTIL=%s: must be a date YYYYMMDD or a time YYYYMMDDTHHMMSSZ", val)
		}
	}
	return nil
}
