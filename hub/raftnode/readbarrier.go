package raftnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// trackedFSM is the member's FSM as Raft sees it: it records the index of
// the last entry the FSM's Apply returned from (0 after a Restore, which
// does not say its index), because Raft's AppliedIndex counts entries
// handed to the FSM's goroutine, not entries the FSM has applied.
type trackedFSM struct {
	raft.FSM
	applied atomic.Uint64
}

// newTrackedFSM wraps fsm, or returns nil when fsm has optional
// interfaces (raft.BatchingFSM, raft.ConfigurationStore) the wrapper would
// hide from Raft.
func newTrackedFSM(fsm raft.FSM) *trackedFSM {
	_, batching := fsm.(raft.BatchingFSM)
	_, configs := fsm.(raft.ConfigurationStore)
	if batching || configs {
		return nil
	}
	return &trackedFSM{FSM: fsm}
}

func (f *trackedFSM) Apply(l *raft.Log) any {
	res := f.FSM.Apply(l)
	f.applied.Store(l.Index)
	return res
}

func (f *trackedFSM) Restore(rc io.ReadCloser) error {
	f.applied.Store(0) // everything up to the snapshot's index: Raft's last snapshot says which
	return f.FSM.Restore(rc)
}

// ReadBarrier makes the next read of the local FSM linearizable without
// writing to the log (Raft's ReadIndex, as etcd and Consul read):
//
//  1. this member leads and has committed an entry of its current term
//     (a new leader's commit index may lag until its first entry, Raft's
//     no-op, commits: ReadBarrier waits for it, bounded by ctx);
//  2. readIndex := the leader's commit index;
//  3. raft.VerifyLeader: one heartbeat round to a quorum (nothing is
//     appended) confirms that no other member has led since, in the same
//     term;
//  4. it waits until the FSM has applied every entry up to readIndex.
//
// It returns readIndex. A read served from the FSM afterwards reflects
// every write acknowledged before ReadBarrier was called.
//
// Errors: raft.ErrNotLeader (wrapped, with the reason) when this member
// does not lead, or cannot verify its leadership (a deposed or
// partitioned leader: VerifyLeader fails once the leader's lease ends, or
// the term changed meanwhile); raft.ErrRaftShutdown; ctx's error when ctx
// ends first. None of them means a write happened. An FSM that is a
// raft.BatchingFSM or raft.ConfigurationStore falls back to Barrier
// (which appends an entry), as does, once per term, a leader whose commit
// index has no log entry to check the term of (right after Restore's hole
// in the log).
func (n *Node) ReadBarrier(ctx context.Context) (uint64, error) {
	if n.fsm == nil {
		if err := n.Barrier(ctx); err != nil {
			return 0, err
		}
		return n.raft.AppliedIndex(), nil
	}
	term, readIndex, err := n.readIndex(ctx)
	if err != nil {
		return 0, err
	}
	if err := waitFuture(ctx, n.raft.VerifyLeader()); err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, notLeader("leadership not verified by a quorum", err)
	}
	if t := n.raft.CurrentTerm(); t != term {
		return 0, fmt.Errorf("%w: the term changed during the read (%d to %d)", ErrNotLeader, term, t)
	}
	if err := n.waitApplied(ctx, readIndex); err != nil {
		return 0, err
	}
	return readIndex, nil
}

// notLeader wraps err, a Raft error of a failed leadership check, as an
// ErrNotLeader (shutdowns stay ErrRaftShutdown).
func notLeader(what string, err error) error {
	if errors.Is(err, raft.ErrRaftShutdown) || errors.Is(err, ErrNotLeader) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrNotLeader, what, err)
}

// readIndex returns the current term and commit index once this member
// leads and has committed an entry of that term (steps 1 and 2 of
// ReadBarrier).
func (n *Node) readIndex(ctx context.Context) (term, index uint64, err error) {
	wait := readPollMin
	for {
		if n.raft.State() != raft.Leader {
			return 0, 0, fmt.Errorf("%w: this member is %s", ErrNotLeader, n.raft.State())
		}
		term = n.raft.CurrentTerm()
		index = n.raft.CommitIndex()
		if n.readyTerm.Load() == term {
			return term, index, nil
		}
		var l raft.Log
		switch err := n.store.GetLog(index, &l); {
		case err == nil && l.Term == term:
			n.readyTerm.Store(term)
			return term, index, nil
		case err == nil && l.Term < term:
			// Leading, but the first entry of the term has not committed:
			// earlier terms' entries may be committed beyond index.
			if err := sleepCtx(ctx, &wait); err != nil {
				return 0, 0, err
			}
		default:
			// No entry at the commit index (nothing yet, or the hole a
			// user restore leaves): commit one of this term.
			if err := n.Barrier(ctx); err != nil {
				if ctx.Err() != nil {
					return 0, 0, ctx.Err()
				}
				return 0, 0, notLeader("committing an entry of the term", err)
			}
			n.readyTerm.Store(term)
		}
	}
}

// waitApplied waits until the FSM has applied every entry up to index
// (step 4 of ReadBarrier): Raft has handed them to the FSM
// (AppliedIndex), and the FSM has returned from the last one it receives
// (entries such as Raft's no-ops and barriers never reach it), or that
// entry is in a snapshot the FSM took or restored.
func (n *Node) waitApplied(ctx context.Context, index uint64) error {
	if n.fsm.applied.Load() >= index {
		return nil
	}
	wait := readPollMin
	for n.raft.AppliedIndex() < index {
		if err := n.sleepApply(ctx, &wait); err != nil {
			return err
		}
	}
	target, err := n.lastFSMEntry(index)
	if err != nil {
		return err
	}
	if target == 0 || target <= n.lastSnapshotIndex() {
		return nil
	}
	for n.fsm.applied.Load() < target {
		if err := n.sleepApply(ctx, &wait); err != nil {
			return err
		}
	}
	return nil
}

// lastSnapshotIndex is the index of the member's last snapshot (taken from
// the FSM, or restored into it), 0 when unknown.
func (n *Node) lastSnapshotIndex() uint64 {
	i, _ := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	return i
}

// sleepApply is sleepCtx for waitApplied: a member that stopped applies
// nothing more (raft.ErrRaftShutdown).
func (n *Node) sleepApply(ctx context.Context, d *time.Duration) error {
	if n.raft.State() == raft.Shutdown {
		return raft.ErrRaftShutdown
	}
	return sleepCtx(ctx, d)
}

// lastFSMEntry returns the index of the last entry at or before index
// that Raft hands to the FSM (a command: the tracked FSM is neither a
// BatchingFSM nor a ConfigurationStore), 0 when the log holds none:
// entries before the log's first, or before the hole a user restore
// leaves, are in a snapshot the FSM has taken or restored.
func (n *Node) lastFSMEntry(index uint64) (uint64, error) {
	first, err := n.store.FirstIndex()
	if err != nil {
		return 0, err
	}
	for i := index; i >= first && i > 0; i-- {
		var l raft.Log
		if err := n.store.GetLog(i, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				return 0, nil // the hole of a user restore
			}
			return 0, fmt.Errorf("reading log entry %d: %w", i, err)
		}
		if l.Type == raft.LogCommand {
			return i, nil
		}
	}
	return 0, nil
}

const (
	readPollMin = 50 * time.Microsecond
	readPollMax = 5 * time.Millisecond
)

// sleepCtx sleeps *d (then doubles it up to readPollMax) or until ctx ends.
func sleepCtx(ctx context.Context, d *time.Duration) error {
	t := time.NewTimer(*d)
	defer t.Stop()
	if *d *= 2; *d > readPollMax {
		*d = readPollMax
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
