package rollout

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/roostfleet/roost/hub/state"
	"github.com/roostfleet/roost/window"
)

// windowSet is a Pool's maintenance windows: open when any is.
type windowSet []*window.Window

// OpenAt implements Schedule.
func (s windowSet) OpenAt(t time.Time) bool {
	for _, w := range s {
		if _, ok := w.OpenAt(t); ok {
			return true
		}
	}
	return false
}

// NextStart implements Schedule: the earliest opening after t of any
// window.
func (s windowSet) NextStart(t time.Time) (time.Time, bool) {
	var best time.Time
	for _, w := range s {
		for o := range w.Openings(t) {
			if o.Start.After(t) {
				if best.IsZero() || o.Start.Before(best) {
					best = o.Start
				}
				break
			}
		}
	}
	return best, !best.IsZero()
}

// scheduleCache keeps parsed windows by name and modify index, so a step
// does not re-parse unchanged rules.
type scheduleCache struct {
	mu     sync.Mutex
	parsed map[string]parsedWindow
}

type parsedWindow struct {
	index uint64
	w     *window.Window
	err   error
}

// get returns the Schedule of the named windows (nil for none). A missing
// or invalid window is an error: the Pool then never opens, and its
// status says why.
func (c *scheduleCache) get(r *state.Reader, names []string) (Schedule, error) {
	if len(names) == 0 {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parsed == nil {
		c.parsed = map[string]parsedWindow{}
	}
	var set windowSet
	var bad []string
	for _, n := range names {
		o := r.Get("MaintenanceWindow", n)
		if o == nil {
			bad = append(bad, fmt.Sprintf("MaintenanceWindow %s does not exist", n))
			continue
		}
		mw := o.GetMaintenanceWindow()
		pw, ok := c.parsed[n]
		if !ok || pw.index != mw.GetMetadata().GetModifyIndex() {
			w, err := window.Parse(mw.GetSpec())
			pw = parsedWindow{index: mw.GetMetadata().GetModifyIndex(), w: w, err: err}
			c.parsed[n] = pw
		}
		if pw.err != nil {
			bad = append(bad, fmt.Sprintf("MaintenanceWindow %s: %v", n, pw.err))
			continue
		}
		set = append(set, pw.w)
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return set, nil
}
