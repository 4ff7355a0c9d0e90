// Package leader holds the once-per-term barrier the hub's leader-only
// controllers pass before the first read of a term (hub/controller runs
// them).
package leader

import (
	"context"
	"fmt"
)

// Term tracks leadership for one controller. The zero value with IsLeader
// set is ready to use.
type Term struct {
	// IsLeader reports whether this member leads now.
	IsLeader func() bool
	// Barrier, if set, is called once per leadership term before the first
	// read, so a new leader does not plan from a state that lags the log.
	Barrier func(context.Context) error

	synced bool
}

// Ready reports whether the controller may act now: this member leads and
// Barrier succeeded in this term. The error is Barrier's, wrapped.
func (t *Term) Ready(ctx context.Context) (bool, error) {
	if !t.IsLeader() {
		t.synced = false
		return false, nil
	}
	if !t.synced && t.Barrier != nil {
		if err := t.Barrier(ctx); err != nil {
			return false, fmt.Errorf("barrier: %w", err)
		}
	}
	t.synced = true
	return true, nil
}
