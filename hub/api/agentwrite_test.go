package api

import (
	"context"
	"errors"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/roostfleet/roost/apierror"
)

// An agent's report is written again while the write was not applied (no
// leader, or the forward to it failed before it was sent), and never again
// once it may have been: its outcome unknown, or another error.
func TestRetryAgentWriteOnlyWhatWasNotApplied(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		errs  []error
		calls int
		ok    bool
	}{
		{"no leader, then a leader", []error{raft.ErrNotLeader, apierror.NotApplied("no hub leader elected yet; retry"), nil}, 3, true},
		{"outcome unknown", []error{apierror.OutcomeUnknown("leadership lost"), nil}, 1, false},
		{"invalid", []error{apierror.Invalid("bad"), nil}, 1, false},
		{"stopping", []error{raft.ErrRaftShutdown, nil}, 1, false},
	} {
		calls := 0
		err := retryAgentWrite(ctx, func() error {
			calls++
			return tc.errs[calls-1]
		})
		if calls != tc.calls || (err == nil) != tc.ok {
			t.Errorf("%s: %d calls, err %v; want %d calls, ok %v", tc.name, calls, err, tc.calls, tc.ok)
		}
	}
	// The stream's end stops the retries.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	calls := 0
	if err := retryAgentWrite(cctx, func() error { calls++; return raft.ErrNotLeader }); !errors.Is(err, raft.ErrNotLeader) || calls != 1 {
		t.Errorf("ended stream: %d calls, %v", calls, err)
	}
}
