package window

import (
	"iter"
	"slices"
	"time"
)

// MaxMerged is the longest Opening NextAny returns: a chain of overlapping
// openings that stays open longer is cut into consecutive openings, each at
// most this long.
const MaxMerged = 7 * 24 * time.Hour

// MergedOpenings returns the union of the openings of windows that are
// still open at from or start after it (End > from), in order of Start.
// Openings that overlap or touch (one starts when another ends) become one
// Opening whose Windows lists the names of the windows that contributed, in
// order of their first opening; the merged Start and End keep the time zone
// of the window they came from. Openings that closed by from are not looked
// at, so a merged opening's Start is the earliest start among openings still
// open at from. Merged openings are at most MaxMerged long and never
// overlap each other.
func MergedOpenings(windows []*Window, from time.Time) iter.Seq[Opening] {
	return func(yield func(Opening) bool) {
		type source struct {
			next func() (Opening, bool)
			head Opening
			ok   bool
		}
		var srcs []*source
		for _, w := range windows {
			next, stop := iter.Pull(w.Openings(from))
			defer stop()
			s := &source{next: next}
			s.head, s.ok = next()
			srcs = append(srcs, s)
		}
		var pending *Opening // taken from a source, not merged yet
		get := func() (Opening, bool) {
			if pending != nil {
				o := *pending
				pending = nil
				return o, true
			}
			var first *source
			for _, s := range srcs {
				if s.ok && (first == nil || s.head.Start.Before(first.head.Start)) {
					first = s
				}
			}
			if first == nil {
				return Opening{}, false
			}
			o := first.head
			first.head, first.ok = first.next()
			return o, true
		}
		cur, ok := get()
		if !ok {
			return
		}
		ends := map[string]time.Time{} // latest end of each contributing window
		reset := func(o Opening) Opening {
			clear(ends)
			o.Windows = slices.Clone(o.Windows)
			for _, n := range o.Windows {
				ends[n] = o.End
			}
			return o
		}
		cur = reset(cur)
		for {
			exhausted := false
			for {
				o, more := get()
				if !more {
					exhausted = true
					break
				}
				if o.Start.After(cur.End) || o.Start.Sub(cur.Start) >= MaxMerged {
					pending = &o
					break
				}
				if o.End.After(cur.End) {
					cur.End = o.End
				}
				for _, n := range o.Windows {
					if !slices.Contains(cur.Windows, n) {
						cur.Windows = append(cur.Windows, n)
					}
					if o.End.After(ends[n]) {
						ends[n] = o.End
					}
				}
			}
			if cur.End.Sub(cur.Start) > MaxMerged {
				cut := cur.Start.Add(MaxMerged)
				rest := Opening{Start: cut.In(cur.End.Location()), End: cur.End}
				for _, n := range cur.Windows {
					if ends[n].After(cut) {
						rest.Windows = append(rest.Windows, n)
					}
				}
				cur.End = cut
				if !yield(cur) {
					return
				}
				cur = rest
				continue
			}
			if !yield(cur) || exhausted {
				return
			}
			o, _ := get() // pending
			cur = reset(o)
		}
	}
}

// NextAny returns up to n openings of the union of windows (the several
// windows of one Pool) that are open at from or start after it, merged and
// sorted as MergedOpenings describes; nil for n ≤ 0 or no windows.
func NextAny(windows []*Window, from time.Time, n int) []Opening {
	if n <= 0 {
		return nil
	}
	var out []Opening
	for o := range MergedOpenings(windows, from) {
		out = append(out, o)
		if len(out) == n {
			break
		}
	}
	return out
}

// OpenAny returns the merged opening that contains t, and true, when any of
// windows is open at t; false for no windows.
func OpenAny(windows []*Window, t time.Time) (Opening, bool) {
	for o := range MergedOpenings(windows, t) {
		return o, o.Contains(t)
	}
	return Opening{}, false
}
