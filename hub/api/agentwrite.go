package api

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/raft"

	"github.com/roostfleet/roost/apierror"
)

// AgentWriteRetry bounds how long an agent's stream holds a report of its
// (hello, status, cleaning result) whose write was not applied because the
// hub has no leader or is changing it. Elections end within seconds; ending
// the stream instead made every agent of a member reconnect at once, one
// TLS handshake each, and on a loaded hub those handshakes starved Raft
// into the next election (10,000 simulated Servers on 3 members on 2
// cores: elections every few seconds, 75,000 reconnects in 15 minutes).
const AgentWriteRetry = 30 * time.Second

// agentWriteBackoff is the first wait between attempts; it doubles up to
// agentWriteMaxBackoff.
const (
	agentWriteBackoff    = 250 * time.Millisecond
	agentWriteMaxBackoff = 4 * time.Second
)

// retryAgentWrite runs write until it succeeds, fails for another reason
// than notApplied, ctx ends or AgentWriteRetry passed; it returns write's
// last error. Only writes that never entered the log are retried, so a
// report is applied at most once.
func retryAgentWrite(ctx context.Context, write func() error) error {
	deadline := time.Now().Add(AgentWriteRetry)
	wait := agentWriteBackoff
	for {
		err := write()
		if err == nil || !notApplied(err) || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, agentWriteMaxBackoff)
	}
}

// notApplied says whether err guarantees that the write never entered the
// Raft log: no leader, not the leader, a leadership transfer, a full
// queue (Raft's errors, or apierror.ReasonNotApplied from forwarding).
func notApplied(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress) ||
		errors.Is(err, raft.ErrEnqueueTimeout) || apierror.ReasonOf(err) == apierror.ReasonNotApplied
}
