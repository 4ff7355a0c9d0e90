// Package window computes when MaintenanceWindows are open: the instants at
// which disruptive work (image upgrades, reboots) may start.
//
// A MaintenanceWindow is an RFC 5545 recurrence rule (RRULE), a duration
// and an IANA time zone (roostv1.MaintenanceWindowSpec). Parse checks a
// spec and returns a *Window; Window.Next lists its next openings and
// Window.OpenAt says whether it is open at an instant. NextAny and OpenAny
// do the same for the several windows of one Pool. Recurrences are expanded
// by github.com/teambition/rrule-go; this package adds what a maintenance
// window needs on top of it: wall-clock time zones, DST, a start date, and
// bounds that keep every call fast.
//
// # Wall clock
//
// The rule is evaluated on the wall clock of the window's time zone:
// "FREQ=DAILY;BYHOUR=2" opens at 02:00 local time every day, in winter and
// in summer. An empty time zone means UTC. Each wall-clock start is then
// turned into an instant by these rules:
//
//   - Spring forward (a gap): a start time the clocks skip, such as 02:30 on
//     the day Europe/Berlin jumps from 02:00 to 03:00, opens at the first
//     instant after the gap, 03:00 local (the moment of the jump), like cron
//     runs jobs of a skipped hour right after the change. Starts in the same
//     gap that become the same instant open once.
//   - Fall back (a fold): a start time the clocks show twice, such as 02:30
//     on the day Europe/Berlin goes back from 03:00 to 02:00, opens once, at
//     its first occurrence (02:30 CEST).
//   - Duration is elapsed (absolute) time: an opening ends exactly duration
//     after it started, whatever the clocks do in between. A 4h window
//     starting at 00:30 local ends at 05:30 local on the day clocks spring
//     forward and at 03:30 local on the day they fall back.
//   - An opening belongs to the day it starts: "BYDAY=SA;BYHOUR=22" with a
//     4h duration opens Saturday 22:00 and is still open Sunday 01:00.
//
// # Start date (DTSTART)
//
// A MaintenanceWindow has no start date of its own. The rule is anchored at
// 2001-01-01T00:00:00 on the window's wall clock (a Monday, the first day of
// a month and year), so what RFC 5545 takes from DTSTART defaults to it:
// the time of day is 00:00:00 unless BYHOUR, BYMINUTE or BYSECOND say
// otherwise, FREQ=WEEKLY without BYDAY means Mondays, FREQ=MONTHLY without
// BYMONTHDAY the 1st, FREQ=YEARLY without BYMONTH/BYMONTHDAY January 1st,
// and INTERVAL counts periods from that week, day or month. A rule may set
// its own anchor with the part DTSTART=YYYYMMDDTHHMMSS (wall clock in the
// window's zone, or with a trailing Z an instant in UTC; an extension of
// rrule-go); COUNT, which counts openings from the anchor, requires it.
// UNTIL is a wall-clock date-time in the window's zone, or with a trailing Z
// an instant; openings whose wall-clock start is after it do not happen.
//
// # Several windows
//
// A Pool may list several windows. NextAny merges their openings into one
// sorted list: openings that overlap or touch become one Opening whose
// Windows lists every window it came from; OpenAny is true when any window
// is open. Windows are independent of each other; each keeps its own zone.
//
// # Bounds
//
// Parse rejects rules that can never open (e.g. February 30th, looked for
// over 400 years), rules the library would search forever (e.g.
// FREQ=HOURLY;INTERVAL=24;BYHOUR=1 when the anchor is at 00:00),
// FREQ=SECONDLY, and BYSETPOS with FREQ=DAILY or finer, so that Next and
// OpenAt always finish quickly: they start expanding the rule at the period
// before the instant asked about, not at the anchor (except with COUNT,
// which is limited to 10000). Parse itself takes well under a second even
// for rules it rejects. A merged opening of NextAny is at most MaxMerged
// long; a chain of openings that never closes (FREQ=DAILY with a duration
// of 24h) comes back as consecutive openings of that length.
package window
