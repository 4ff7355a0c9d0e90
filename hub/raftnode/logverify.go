package raftnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/verifier"
)

// Online log verification: raft-wal's verifier (the one behind Consul's
// raft_logstore.verification), so that a member whose log differs from
// the leader's (a disk that changes data, memory errors, a bug) is noticed
// while it runs, not at its next start.
//
// The leader appends a checkpoint entry every VerifyInterval when the log
// grew since the last one (Node.Checkpoint). The verifier.LogStore around
// every member's log store keeps a running checksum of the entries it
// stores; on the leader it writes the checksum of the range since the
// previous checkpoint into the checkpoint's Extensions, which Raft
// replicates. Each member then reads that range back from its own log
// and compares: a difference is a failure (logged, counted, and the
// member reports itself unhealthy until it restarts; see
// Node.LogVerification). A member whose log does not hold the whole range
// (it joined or was compacted since) skips it.

// checkpointData is a checkpoint entry's command bytes. It is not a valid
// roostv1.Command (field 0 with wire type 7 does not decode), so every
// roost-hub, also one from before checkpoints, applies it as a malformed
// command: it changes nothing but the applied index.
var checkpointData = []byte("\x07roost-log-verification-checkpoint")

// DefaultVerifyInterval is how often the leader appends a log
// verification checkpoint when Config.VerifyInterval is 0.
const DefaultVerifyInterval = time.Minute

// isCheckpoint is the verifier's IsCheckpointFn.
func isCheckpoint(l *raft.Log) (bool, error) {
	return l.Type == raft.LogCommand && bytes.Equal(l.Data, checkpointData), nil
}

// LogVerification is what the member's log verification found since it
// started.
type LogVerification struct {
	// Checkpoints counts the checkpoints this member stored.
	Checkpoints uint64
	// Verified counts ranges read back with the leader's checksum.
	Verified uint64
	// Skipped counts ranges this member's log does not hold entirely
	// (joined or compacted since), or that came too fast to verify.
	Skipped uint64
	// Failures counts ranges whose checksum differed or could not be read.
	Failures uint64
	// Failure is the first failure, nil while there is none: the member's
	// log differs from the leader's.
	Failure error
}

// logVerify is a Node's verification state.
type logVerify struct {
	checkpoints, verified, skipped, failures atomic.Uint64
	failure                                  atomic.Pointer[error]
	report                                   func(verifier.VerificationReport)
}

// IncrementCounter implements raft-wal's metrics.Collector for the
// verifier (checkpoints_written is the one it reports that the reports
// do not).
func (v *logVerify) IncrementCounter(name string, delta uint64) {
	if name == "checkpoints_written" {
		v.checkpoints.Add(delta)
	}
}

// SetGauge implements metrics.Collector; the verifier sets none.
func (v *logVerify) SetGauge(string, uint64) {}

// onReport counts a verification report, records the first failure and
// passes the report on to Config.VerifyReport.
func (v *logVerify) onReport(r verifier.VerificationReport) {
	switch {
	case r.Err == nil:
		v.verified.Add(1)
	case errors.Is(r.Err, verifier.ErrRangeMismatch):
		v.skipped.Add(1)
	default:
		v.failures.Add(1)
		err := fmt.Errorf("log verification of Raft indexes %s failed: %w", r.Range, r.Err)
		v.failure.CompareAndSwap(nil, &err)
	}
	if r.SkippedRange != nil {
		v.skipped.Add(1)
	}
	if v.report != nil {
		v.report(r)
	}
}

// verifiedStore is a member's log store inside the verifier.
type verifiedStore struct {
	*verifier.LogStore // the log half
	raft.StableStore
	closeOnce sync.Once
	closeErr  error
}

// Close stops the verifier and closes the store; later calls return the
// first one's error (the verifier's own Close panics when called twice).
func (s *verifiedStore) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.LogStore.Close() })
	return s.closeErr
}

func newVerifiedStore(s logStore, v *logVerify) *verifiedStore {
	return &verifiedStore{LogStore: verifier.NewLogStore(s, isCheckpoint, v.onReport, v), StableStore: s}
}

// LogVerification returns what the member's log verification found.
func (n *Node) LogVerification() LogVerification {
	out := LogVerification{Checkpoints: n.verify.checkpoints.Load(), Verified: n.verify.verified.Load(),
		Skipped: n.verify.skipped.Load(), Failures: n.verify.failures.Load()}
	if p := n.verify.failure.Load(); p != nil {
		out.Failure = *p
	}
	return out
}

// Checkpoint appends a log verification checkpoint (leader only:
// ErrNotLeader elsewhere) and waits until it is applied here; every
// member then verifies the entries since the previous checkpoint.
func (n *Node) Checkpoint(ctx context.Context) error {
	_, _, err := n.Apply(ctx, checkpointData)
	return err
}

// runCheckpoints appends a checkpoint every interval while this member
// leads and the log grew since the last one, or since it became leader:
// an idle hub writes none.
func (n *Node) runCheckpoints(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var last uint64
	leading := false
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		if !n.IsLeader() {
			leading = false
			continue
		}
		li := n.raft.LastIndex()
		if !leading {
			leading, last = true, li
			continue
		}
		if li == last {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, idx, err := n.Apply(ctx, checkpointData)
		cancel()
		if err == nil {
			last = idx
		}
	}
}
