package raftnode

import (
	"fmt"
	"strings"
)

// DamagedError says that a file of the member's Raft state failed its
// checksum or lost records that were stored durably: the member must not
// start on it (it would serve a state without acknowledged writes, or with
// changed ones). Open, Recover and CheckStorage return it before Raft
// starts; roost-hub exits with hub.ExitDamagedStorage.
type DamagedError struct {
	// What is "log segment" or "snapshot".
	What string
	// File is the damaged file's path.
	File string
	// Offset is the byte offset in File where the damaged range starts,
	// End where it ends (exclusive); both -1 when unknown.
	Offset, End int64
	// FirstIndex and LastIndex are the Raft log indexes the damaged range
	// holds (for a snapshot, the index it was taken at in both).
	FirstIndex, LastIndex uint64
	// Reason says what failed (a checksum, a missing frame, …).
	Reason string
	// Fix, when not empty, says how to recover (the hub sets it: it knows
	// the member's ID and whether it has peers).
	Fix string
}

func (e *DamagedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "damaged Raft %s %s", e.What, e.File)
	switch {
	case e.Offset >= 0 && e.End > e.Offset:
		fmt.Fprintf(&b, " at byte offset %d (bytes %d–%d)", e.Offset, e.Offset, e.End-1)
	case e.Offset >= 0:
		fmt.Fprintf(&b, " at byte offset %d", e.Offset)
	}
	switch {
	case e.FirstIndex == 0:
	case e.FirstIndex == e.LastIndex:
		fmt.Fprintf(&b, ", Raft index %d", e.FirstIndex)
	default:
		fmt.Fprintf(&b, ", Raft indexes %d–%d", e.FirstIndex, e.LastIndex)
	}
	fmt.Fprintf(&b, ": %s; the member refuses to start rather than serve a state that lost or changed acknowledged writes", e.Reason)
	if e.Fix != "" {
		b.WriteString("; ")
		b.WriteString(e.Fix)
	}
	return b.String()
}
