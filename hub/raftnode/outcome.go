package raftnode

import (
	"errors"
	"reflect"

	"github.com/hashicorp/raft"
)

// OutcomeUnknownError is Apply's error once the entry was handed to Raft
// and Raft then failed without saying that the entry was refused: it may
// have been appended, and may commit (or have committed) later. Err is
// Raft's error (raft.ErrLeadershipLost, raft.ErrRaftShutdown, a log store
// error) or the context's (the caller stopped waiting). errors.Is sees
// through to Err.
type OutcomeUnknownError struct{ Err error }

func (e *OutcomeUnknownError) Error() string {
	return e.Err.Error() + ": the write may or may not have been applied"
}

func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// IsOutcomeUnknown says whether err is (or wraps) an *OutcomeUnknownError.
func IsOutcomeUnknown(err error) bool {
	var u *OutcomeUnknownError
	return errors.As(err, &u)
}

// refusedBeforeAppend says whether err, returned by an apply future Raft
// accepted, means the entry was refused before it was appended to the log:
// a follower (or a leader stepping down) answers ErrNotLeader, a leader
// transferring leadership ErrLeadershipTransferInProgress, before either
// stores anything.
func refusedBeforeAppend(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress)
}

// classifyApply returns err as Apply reports it: errors from a future Raft
// never queued (enqueued false: ErrEnqueueTimeout, ErrRaftShutdown before
// queueing) and refusals before append as they are (nothing was applied);
// anything else wrapped in *OutcomeUnknownError.
func classifyApply(err error, enqueued bool) error {
	if err == nil || !enqueued || refusedBeforeAppend(err) {
		return err
	}
	return &OutcomeUnknownError{Err: err}
}

// neverQueued says whether f is the future raft.Raft.Apply returns when it
// did not queue the entry (ErrEnqueueTimeout, or ErrRaftShutdown before
// queueing): Raft's unexported errorFuture. An ErrRaftShutdown from a
// queued entry's future may come after the entry committed, so the error
// alone does not tell. TestNeverQueued pins the type's name.
func neverQueued(f raft.Future) bool {
	t := reflect.TypeOf(f)
	return t != nil && t.PkgPath() == "github.com/hashicorp/raft" && t.Name() == "errorFuture"
}
