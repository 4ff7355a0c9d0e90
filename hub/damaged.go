package hub

import (
	"errors"
	"fmt"

	"github.com/roostfleet/roost/hub/raftnode"
)

// ExitDamagedStorage is roost-hub's exit status when the member's Raft log
// or newest snapshot is damaged (raftnode.DamagedError): 65, EX_DATAERR of
// sysexits.h. Restarting does not help, so a systemd unit should not
// restart it (RestartPreventExitStatus=65); the error says how to recover
// (docs/operations.md, "A damaged log or snapshot").
const ExitDamagedStorage = 65

// withRecovery adds to a *raftnode.DamagedError in err how to recover
// this member (its Fix), and returns err; other errors are returned as
// they are.
func (h *Hub) withRecovery(err error) error {
	var d *raftnode.DamagedError
	if !errors.As(err, &d) || d.Fix != "" {
		return err
	}
	multi := fmt.Sprintf("to recover (docs/operations.md, \"A damaged log or snapshot\"): on a hub of several members, "+
		"run 'roostctl hub remove %s' against another member, move this data dir (%s) aside, and start this member on an empty data dir "+
		"with --join and a token from 'roostctl hub join': it receives the whole state from the others; ", h.id, h.dir)
	wal := h.dir.path("raft", "wal")
	if d.What == "snapshot" {
		d.Fix = multi + "on a single-member hub, if moving the snapshot aside loses nothing (see above), do that and start it again; " +
			"otherwise move the snapshot and " + wal + " aside and start it again: it comes back at its next older snapshot; " +
			"then restore your newest backup with 'roostctl hub snapshot restore' (or put back an offline copy of the data dir)"
	} else {
		d.Fix = multi + "on a single-member hub, move " + wal + " aside and start it again: it comes back at its newest Raft snapshot; " +
			"then restore your newest backup with 'roostctl hub snapshot restore' (or put back an offline copy of the data dir)"
	}
	return err
}
