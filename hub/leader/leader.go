// Package leader holds what the hub's leader-only controllers share: a
// once-per-term barrier before the first read of a term, and the periodic
// loop that calls a controller's step.
package leader

import (
	"context"
	"fmt"
	"log/slog"
	"time"
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

// RunEvery calls step now and then every tick until ctx ends, logging a
// failed step as "<name>: step failed; retrying" (nil log: slog.Default).
func RunEvery(ctx context.Context, tick time.Duration, log *slog.Logger, name string, step func(context.Context) error) {
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		if err := step(ctx); err != nil && ctx.Err() == nil {
			log.Warn(name+": step failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
