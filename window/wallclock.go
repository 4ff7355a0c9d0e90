package window

import (
	"slices"
	"time"
)

// resolve returns the instant at which the wall clock wall (a local date
// and time of loc, written as UTC) happens in loc:
//
//   - the one instant, usually;
//   - in a fold (the clocks go back and show wall twice), the first one;
//   - in a gap (the clocks jump over wall), the first instant after the
//     gap, i.e. the moment of the jump (03:00 local when 02:00 jumps to
//     03:00).
//
// The result is in loc.
func resolve(wall time.Time, loc *time.Location) time.Time {
	w := wall.Unix()
	// The offsets in effect around wall; zones are at most ±14h from UTC,
	// so the right one is in effect within a day of the instant w.
	var offsets []int
	for _, d := range []int64{-2 * 86400, -86400, 0, 86400, 2 * 86400} {
		if _, off := time.Unix(w+d, 0).In(loc).Zone(); !slices.Contains(offsets, off) {
			offsets = append(offsets, off)
		}
	}
	found := false
	var best int64
	for _, off := range offsets {
		i := w - int64(off)
		if _, o := time.Unix(i, 0).In(loc).Zone(); o == off && (!found || i < best) {
			best, found = i, true
		}
	}
	if found {
		return time.Unix(best, 0).In(loc)
	}
	// A gap: read with the smallest offset (the one before a jump
	// forward), wall lies after the jump; the zone period it lies in
	// starts at the jump.
	i := w - int64(slices.Min(offsets))
	if start, _ := time.Unix(i, 0).In(loc).ZoneBounds(); !start.IsZero() && start.Unix() <= i {
		return start.In(loc)
	}
	return time.Unix(i, 0).In(loc)
}
