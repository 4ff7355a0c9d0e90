package window

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/teambition/rrule-go"
)

var zones = []string{"", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "America/Santiago", "Pacific/Apia"}

// randomRule returns a random valid-looking rule; some are rejected by
// Parse, which is fine.
func randomRule(r *rand.Rand) string {
	freqs := []string{"YEARLY", "MONTHLY", "WEEKLY", "DAILY", "DAILY", "DAILY", "HOURLY", "MINUTELY"}
	freq := freqs[r.IntN(len(freqs))]
	parts := []string{"FREQ=" + freq}
	some := func(lo, hi, max int) string {
		n := 1 + r.IntN(max)
		var vs []string
		for range n {
			vs = append(vs, fmt.Sprint(lo+r.IntN(hi-lo+1)))
		}
		return strings.Join(slices.Compact(slices.Sorted(slices.Values(vs))), ",")
	}
	if r.IntN(3) == 0 {
		parts = append(parts, fmt.Sprintf("INTERVAL=%d", 1+r.IntN(5)))
	}
	if freq != "HOURLY" && freq != "MINUTELY" || r.IntN(2) == 0 {
		parts = append(parts, "BYHOUR="+some(0, 23, 3))
	}
	if r.IntN(2) == 0 || freq == "MINUTELY" {
		parts = append(parts, "BYMINUTE="+some(0, 59, 2))
	}
	// Rules that match once in decades make slow tests: BYDAY and
	// BYMONTHDAY are not combined.
	if r.IntN(2) == 0 && freq != "YEARLY" {
		days := []string{"MO", "TU", "WE", "TH", "FR", "SA", "SU"}
		parts = append(parts, "BYDAY="+days[r.IntN(7)])
	} else if r.IntN(3) == 0 && freq != "WEEKLY" {
		parts = append(parts, "BYMONTHDAY="+some(1, 28, 2))
	}
	if r.IntN(5) == 0 {
		parts = append(parts, "BYMONTH="+some(1, 12, 3))
	}
	switch r.IntN(6) {
	case 0:
		parts = append(parts, fmt.Sprintf("UNTIL=%d%02d%02dT000000Z", 2026+r.IntN(3), 1+r.IntN(12), 1+r.IntN(28)))
	case 1:
		parts = append(parts, fmt.Sprintf("DTSTART=%d%02d%02dT%02d3000", 2020+r.IntN(8), 1+r.IntN(12), 1+r.IntN(28), r.IntN(24)))
	case 2:
		parts = append(parts, fmt.Sprintf("DTSTART=%d%02d%02dT000000", 2025+r.IntN(2), 1+r.IntN(12), 1+r.IntN(28)), fmt.Sprintf("COUNT=%d", 1+r.IntN(200)))
	}
	return strings.Join(parts, ";")
}

// TestProperties checks, over random rules, zones and durations, that every
// opening has Start < End and End-Start == duration, that openings come
// sorted, that OpenAt agrees with Next, and that the fast expansion (from
// the period before from) equals the slow one (from the anchor).
func TestProperties(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 1))
	n := 200
	if testing.Short() {
		n = 60
	}
	checked := 0
	for i := 0; i < n; i++ {
		rule := randomRule(r)
		tz := zones[r.IntN(len(zones))]
		d := time.Duration(1+r.IntN(24*60)) * time.Minute
		w, err := Parse(specOf(rule, d, tz))
		if err != nil {
			continue
		}
		checked++
		from := time.Date(2026, time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), 0, time.UTC)
		name := fmt.Sprintf("seed %d: %q %s %q from %s", seed, rule, d, tz, from.Format(time.RFC3339))
		got := w.Next(from, 40)
		for j, o := range got {
			if !o.Start.Before(o.End) || o.End.Sub(o.Start) != d {
				t.Fatalf("%s: opening %d %v: want Start < End and duration %s", name, j, o, d)
			}
			if !o.End.After(from) {
				t.Fatalf("%s: opening %d %v closed before from", name, j, o)
			}
			if j > 0 && !got[j-1].Start.Before(o.Start) {
				t.Fatalf("%s: openings %d and %d not strictly sorted: %v, %v", name, j-1, j, got[j-1], o)
			}
			if o.Start.Location() != w.Location() {
				t.Fatalf("%s: opening %d in %s", name, j, o.Start.Location())
			}
		}
		// The slow reference walks every period since the anchor: only where
		// that is cheap (coarse rules, or a recent DTSTART).
		cheap := w.rule.opts.Freq <= rrule.DAILY || w.rule.opts.Dtstart.Year() >= 2020
		// rrule-go stops about 290 years after DTSTART (its default UNTIL),
		// so compare the openings before 2290 only.
		got290 := slices.DeleteFunc(slices.Clone(got), func(o Opening) bool { return o.Start.Year() >= 2290 })
		if slow := []Opening(nil); cheap && !sameOpenings(got290, collectInto(&slow, w.openings(from, false), len(got290))) {
			t.Fatalf("%s: fast and slow expansions differ:\nfast %v\nslow %v", name, got, slow)
		}
		if len(got) == 0 {
			if _, ok := w.OpenAt(from); ok {
				t.Fatalf("%s: OpenAt(from) true without openings", name)
			}
			continue
		}
		// OpenAt at random instants and at the edges, up to the last start.
		last := got[len(got)-1].Start
		probes := []time.Time{from, last}
		for _, o := range got {
			probes = append(probes, o.Start, o.End, o.End.Add(-time.Second), o.Start.Add(-time.Second))
		}
		for range 20 {
			probes = append(probes, from.Add(time.Duration(r.Int64N(max(0, int64(last.Sub(from)))+1))))
		}
		for _, p := range probes {
			if p.Before(from) || p.After(last) {
				continue
			}
			var want *Opening
			for k := range got {
				if got[k].Contains(p) {
					want = &got[k] // the last one that contains p
				}
			}
			o, ok := w.OpenAt(p)
			switch {
			case ok != (want != nil):
				t.Fatalf("%s: OpenAt(%s) = %v, %v; Next says %v", name, p.Format(time.RFC3339), o, ok, want)
			case ok && (!o.Start.Equal(want.Start) || !o.End.Equal(want.End)):
				t.Fatalf("%s: OpenAt(%s) = %v, want %v", name, p.Format(time.RFC3339), o, *want)
			}
			// Next from inside an opening starts with the ones still open.
			if next := w.Next(p, 1); ok && (len(next) != 1 || next[0].Start.After(p)) {
				t.Fatalf("%s: Next(%s) = %v while open", name, p.Format(time.RFC3339), next)
			}
		}
	}
	if checked < n/3 {
		t.Errorf("only %d of %d random rules parsed", checked, n)
	}
}

// TestMergedProperties checks NextAny against the openings of each window.
func TestMergedProperties(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 2))
	for i := 0; i < 40; i++ {
		var ws []*Window
		for k := range 1 + r.IntN(3) {
			w, err := Parse(specOf(randomRule(r), time.Duration(1+r.IntN(12*60))*time.Minute, zones[r.IntN(len(zones))]))
			if err == nil {
				w.Name = fmt.Sprint("w", k)
				ws = append(ws, w)
			}
		}
		from := time.Date(2026, time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), 0, 0, 0, time.UTC)
		merged := NextAny(ws, from, 20)
		for j, m := range merged {
			if !m.Start.Before(m.End) || m.End.Sub(m.Start) > MaxMerged || len(m.Windows) == 0 {
				t.Fatalf("seed %d: merged %d: %v %v", seed, j, m, m.Windows)
			}
			if j > 0 && m.Start.Before(merged[j-1].End) {
				t.Fatalf("seed %d: merged %d overlaps the one before: %v, %v", seed, j, merged[j-1], m)
			}
		}
		if len(merged) == 0 {
			continue
		}
		// Every instant up to the last merged start is open in the union
		// iff it is open in some window.
		last := merged[len(merged)-1].Start
		for range 50 {
			p := from.Add(time.Duration(r.Int64N(max(0, int64(last.Sub(from))) + 1)))
			inMerged := slices.ContainsFunc(merged, func(o Opening) bool { return o.Contains(p) })
			inAny := false
			for _, w := range ws {
				if _, ok := w.OpenAt(p); ok {
					inAny = true
				}
			}
			_, openAny := OpenAny(ws, p)
			if inMerged != inAny || openAny != inAny {
				t.Fatalf("seed %d: at %s merged %v, OpenAny %v, some window %v", seed, p, inMerged, openAny, inAny)
			}
		}
	}
}

func collect(seq func(func(Opening) bool), n int) []Opening {
	var out []Opening
	if n == 0 {
		return nil
	}
	for o := range seq {
		out = append(out, o)
		if len(out) == n {
			break
		}
	}
	return out
}

func collectInto(dst *[]Opening, seq func(func(Opening) bool), n int) []Opening {
	*dst = collect(seq, n)
	return *dst
}

func sameOpenings(a, b []Opening) bool {
	return slices.EqualFunc(a, b, func(x, y Opening) bool { return x.Start.Equal(y.Start) && x.End.Equal(y.End) })
}
