package window

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func TestParseRejects(t *testing.T) {
	const rule, tz = "FREQ=DAILY;BYHOUR=2", "Europe/Berlin"
	d := durationpb.New(4 * time.Hour)
	for _, c := range []struct {
		name string
		spec *roostv1.MaintenanceWindowSpec
		want string // the whole Error()
	}{
		{"longer than a day", &roostv1.MaintenanceWindowSpec{Rrule: rule, Duration: durationpb.New(36 * time.Hour), TimeZone: tz},
			"duration: must be at most 24h, got 36h (split it into two windows)"},
		{"a week", &roostv1.MaintenanceWindowSpec{Rrule: rule, Duration: durationpb.New(7*24*time.Hour + 30*time.Minute), TimeZone: tz},
			"duration: must be at most 24h, got 168h30m (split it into 8 windows)"},
		{"zero duration", &roostv1.MaintenanceWindowSpec{Rrule: rule, Duration: durationpb.New(0), TimeZone: tz},
			`duration: must be > 0, got 0s (e.g. "4h")`},
		{"no duration", &roostv1.MaintenanceWindowSpec{Rrule: rule, TimeZone: tz},
			`duration: is required (how long each opening lasts, e.g. "4h")`},
		{"invalid zone", &roostv1.MaintenanceWindowSpec{Rrule: rule, Duration: d, TimeZone: "Europe/Berlinn"},
			`timeZone: unknown time zone "Europe/Berlinn" (use an IANA name such as "Europe/Berlin", "America/New_York" or "UTC")`},
		{"local zone", &roostv1.MaintenanceWindowSpec{Rrule: rule, Duration: d, TimeZone: "Local"},
			`timeZone: "Local" is the zone of whoever reads the window, not an IANA name (name the zone, e.g. "Europe/Berlin", or "UTC")`},
		{"no rule", &roostv1.MaintenanceWindowSpec{Duration: d},
			`rrule: is required (e.g. "FREQ=WEEKLY;BYDAY=TU;BYHOUR=2;BYMINUTE=0")`},
		{"every field", &roostv1.MaintenanceWindowSpec{Rrule: "BYHOUR=2", Duration: durationpb.New(25 * time.Hour), TimeZone: "Mars/Olympus"},
			`rrule: FREQ is missing: start the rule with FREQ=DAILY, FREQ=WEEKLY, … (e.g. "FREQ=WEEKLY;BYDAY=TU;BYHOUR=2;BYMINUTE=0"); ` +
				`duration: must be at most 24h, got 25h (split it into two windows); ` +
				`timeZone: unknown time zone "Mars/Olympus" (use an IANA name such as "Europe/Berlin", "America/New_York" or "UTC")`},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := Parse(c.spec)
			if w != nil || err == nil {
				t.Fatalf("Parse accepted %v", c.spec)
			}
			if err.Error() != c.want {
				t.Errorf("error\n  %s\nwant\n  %s", err, c.want)
			}
			var se SpecError
			if !errors.As(err, &se) || len(se) == 0 {
				t.Fatalf("error is %T, want a SpecError", err)
			}
			for _, fe := range se {
				if fe.Field != "rrule" && fe.Field != "duration" && fe.Field != "timeZone" {
					t.Errorf("field %q", fe.Field)
				}
			}
		})
	}
}

func TestParseRuleMessages(t *testing.T) {
	for _, c := range []struct{ rule, want string }{
		{"RRULE:FREQ=DAILY", `drop the "RRULE:" prefix`},
		{"FREQ=DAILY\nBYHOUR=2", "must be a single line"},
		{"FREQ=FORTNIGHTLY", `unknown FREQ "FORTNIGHTLY"`},
		{"FREQ=DAILY;BYHUOR=2", `unknown part "BYHUOR": did you mean "BYHOUR"?`},
		{"FREQ=DAILY;COLOR=2", `unknown part "COLOR" (known parts: FREQ, UNTIL`},
		{"FREQ=DAILY;weekly", `part "weekly" is not KEY=VALUE`},
		{"FREQ=DAILY;", `empty part in "FREQ=DAILY;": remove the extra ';'`},
		{"FREQ=DAILY;FREQ=WEEKLY", "FREQ is given twice"},
		{"FREQ=DAILY;BYHOUR=", "BYHOUR has no value"},
		{"FREQ=DAILY;BYHOUR=24", "BYHOUR=24: byhour must be between 0 and 23"},
		{"FREQ=DAILY;BYHOUR=two", `BYHOUR=TWO: "TWO" is not a number`},
		{"FREQ=WEEKLY;BYDAY=TUE", `BYDAY=TUE: "TUE" is not a weekday`},
		{"FREQ=WEEKLY;BYDAY=-1FR", "BYDAY=-1FR: an ordinal (-1FR) is only allowed with FREQ=MONTHLY or FREQ=YEARLY"},
		{"FREQ=MONTHLY;BYDAY=6MO", "BYDAY=6MO: +6MO is out of range (use an ordinal from -5 to -1 or 1 to 5)"},
		{"FREQ=YEARLY;BYDAY=54MO", "byday must be between 1 and 53"},
		{"FREQ=DAILY;INTERVAL=0", "INTERVAL=0: must be at least 1"},
		{"FREQ=DAILY;UNTIL=tomorrow", "UNTIL=TOMORROW: not a date"},
		{"FREQ=DAILY;COUNT=3;UNTIL=20270101T000000Z", "COUNT and UNTIL are mutually exclusive"},
		{"FREQ=DAILY;COUNT=3", "COUNT counts openings from DTSTART, which the rule does not set"},
		{"FREQ=DAILY;COUNT=20000;DTSTART=20260101", "COUNT=20000: must be from 1 to 10000"},
		{"FREQ=DAILY;BYWEEKNO=3", "BYWEEKNO is only allowed with FREQ=YEARLY"},
		{"FREQ=WEEKLY;BYMONTHDAY=3", "BYMONTHDAY is not allowed with FREQ=WEEKLY"},
		{"FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", "never matches any date"},
		{"FREQ=DAILY;BYMONTH=4;BYMONTHDAY=31", "never matches any date"},
		{"FREQ=HOURLY;INTERVAL=24;BYHOUR=1", "FREQ=HOURLY;INTERVAL=24 never reaches the given BYHOUR/BYMINUTE/BYSECOND from 00:00:00"},
		{"FREQ=MINUTELY;INTERVAL=60;BYMINUTE=30", "FREQ=MINUTELY;INTERVAL=60 never reaches"},
		{"FREQ=DAILY;UNTIL=20000101", "UNTIL=20000101T000000 is before the first opening"},
		{"FREQ=SECONDLY", "FREQ=SECONDLY is not supported"},
		{"FREQ=DAILY;BYHOUR=1,2;BYSETPOS=3", "BYSETPOS is not supported with FREQ=DAILY"},
		{"FREQ=DAILY;INTERVAL=7;BYDAY=TU", "never matches any date"}, // every 7th day from a Monday
		{"FREQ=MONTHLY;BYMONTHDAY=31;BYSETPOS=2", "never matches any date"},
		{"FREQ=DAILY;DTSTART=30000101", "DTSTART is in the year 3000"},
	} {
		_, err := Parse(&roostv1.MaintenanceWindowSpec{Rrule: c.rule, Duration: durationpb.New(time.Hour)})
		if err == nil || !strings.HasPrefix(err.Error(), "rrule: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v\nwant an rrule error with %q", c.rule, err, c.want)
		}
	}
}

func TestParseAccepts(t *testing.T) {
	for _, rule := range []string{
		"FREQ=WEEKLY;BYDAY=TU;BYHOUR=2;BYMINUTE=0",
		"freq=weekly;byday=tu,th;byhour=2", // case-insensitive, like RFC 5545
		"FREQ=MONTHLY;BYDAY=2TU,-1FR;BYHOUR=3",
		"FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29",
		"FREQ=HOURLY;INTERVAL=6;BYMINUTE=15",
		"FREQ=HOURLY;INTERVAL=24;BYHOUR=1;DTSTART=20260101T010000",
		"FREQ=DAILY;COUNT=3;DTSTART=20261201T020000",
		"FREQ=DAILY;UNTIL=20261231T235959Z",
		"FREQ=YEARLY;BYWEEKNO=1,-1;BYDAY=MO",
		"FREQ=MONTHLY;BYMONTHDAY=-1;BYSETPOS=1",
	} {
		w := mustParse(t, rule, time.Hour, "Europe/Berlin")
		if w.Rule() != strings.ToUpper(rule) || w.Duration() != time.Hour || w.Location().String() != "Europe/Berlin" {
			t.Errorf("%q: Rule %q Duration %s Location %s", rule, w.Rule(), w.Duration(), w.Location())
		}
	}
	if w := mustParse(t, "FREQ=DAILY", 24*time.Hour, ""); w.Location() != time.UTC {
		t.Errorf("empty zone: %s, want UTC", w.Location())
	}
}

// Defaults taken from the anchor 2001-01-01T00:00:00 (a Monday, the 1st).
func TestAnchorDefaults(t *testing.T) {
	from := time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC) // a Wednesday
	checkOpenings(t, mustParse(t, "FREQ=WEEKLY", time.Hour, "").Next(from, 2),
		[2]string{"2026-11-09T00:00:00Z", "2026-11-09T01:00:00Z"}, [2]string{"2026-11-16T00:00:00Z", "2026-11-16T01:00:00Z"})
	checkOpenings(t, mustParse(t, "FREQ=MONTHLY;BYHOUR=3", time.Hour, "").Next(from, 1),
		[2]string{"2026-12-01T03:00:00Z", "2026-12-01T04:00:00Z"})
	checkOpenings(t, mustParse(t, "FREQ=YEARLY", time.Hour, "").Next(from, 1),
		[2]string{"2027-01-01T00:00:00Z", "2027-01-01T01:00:00Z"})
	// INTERVAL counts from the anchor's week: Mondays 2001-01-01 + 2k weeks;
	// 2026-11-09 is 1349 weeks after it, 2026-11-16 is 1350.
	checkOpenings(t, mustParse(t, "FREQ=WEEKLY;INTERVAL=2", time.Hour, "").Next(from, 2),
		[2]string{"2026-11-16T00:00:00Z", "2026-11-16T01:00:00Z"}, [2]string{"2026-11-30T00:00:00Z", "2026-11-30T01:00:00Z"})
	// DTSTART moves the phase and the defaults.
	checkOpenings(t, mustParse(t, "FREQ=WEEKLY;INTERVAL=2;DTSTART=20261110T040000", time.Hour, "Europe/Berlin").Next(from, 2),
		[2]string{"2026-11-10T04:00:00+01:00", "2026-11-10T05:00:00+01:00"}, [2]string{"2026-11-24T04:00:00+01:00", "2026-11-24T05:00:00+01:00"})
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		36 * time.Hour: "36h", 4*time.Hour + 30*time.Minute: "4h30m", 90 * time.Second: "1m30s",
		0: "0s", -time.Hour: "-1h", time.Hour + time.Second: "1h0m1s", 1500 * time.Millisecond: "1.5s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
