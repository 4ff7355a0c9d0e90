package hub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/roostfleet/roost/hub/raftnode"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// forceNewClusterDone marks a data dir on which --force-new-cluster
// recovered the hub: DIR/force-new-cluster.done, with the time and the
// Raft index of the recovery. While it exists a later --force-new-cluster
// on the data dir is refused (CheckForceNewCluster): left on a command line
// (a systemd unit), it would drop, at the next restart, the members that
// joined the recovered hub.
func (d dataDir) forceNewClusterDone() string { return d.path("force-new-cluster.done") }

func (d dataDir) writeForceNewClusterDone(at time.Time, index uint64) error {
	text := fmt.Sprintf("# roost-hub --force-new-cluster made this member the only one of its hub.\n"+
		"# While this file exists, roost-hub refuses --force-new-cluster on this data dir (members that joined\n"+
		"# since would be dropped); delete it to force a new cluster again.\n"+
		"time %s\nindex %d\n", at.UTC().Format(time.RFC3339), index)
	return writeFile(d.forceNewClusterDone(), []byte(text), 0o600)
}

// readForceNewClusterDone returns the time and the Raft index recorded in
// DIR/force-new-cluster.done ("unknown" for what it lacks); ok is false
// when the file does not exist.
func (d dataDir) readForceNewClusterDone() (at, index string, ok bool, err error) {
	b, err := os.ReadFile(d.forceNewClusterDone())
	if errors.Is(err, os.ErrNotExist) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, err
	}
	at, index = "an unknown time", "unknown"
	for _, line := range strings.Split(string(b), "\n") {
		if v, found := strings.CutPrefix(line, "time "); found {
			at = strings.TrimSpace(v)
		}
		if v, found := strings.CutPrefix(line, "index "); found {
			index = strings.TrimSpace(v)
		}
	}
	return at, index, true, nil
}

// CheckForceNewCluster checks --force-new-cluster (force) against the data
// dir dir and --join (join) before anything binds or writes; roost-hub
// exits 2 when it fails. It is refused on a data dir without Raft state
// (nothing to recover; with --join it would use the token first and fail
// after), and on a data dir where it was used before
// (DIR/force-new-cluster.done).
func CheckForceNewCluster(dir, join string, force bool) error {
	if !force || dir == "" {
		return nil
	}
	d := dataDir(dir)
	hasState, err := raftnode.HasState(raftnode.Config{Dir: d.raft()})
	if err != nil {
		return nil // Start reports an unreadable data dir
	}
	switch {
	case !hasState && join != "":
		return fmt.Errorf("--force-new-cluster and --join do not go together: the data dir %s holds no Raft state, so there is nothing to recover; "+
			"to join a hub, leave out --force-new-cluster; to recover a hub that lost its majority, "+
			"run --force-new-cluster (without --join) on the data dir of its most up-to-date surviving member", dir)
	case !hasState:
		return fmt.Errorf("--force-new-cluster: the data dir %s holds no Raft state to recover; start it without the flag to bootstrap a new hub, "+
			"or point --data-dir at a member's data dir", dir)
	}
	at, index, done, err := d.readForceNewClusterDone()
	if err != nil {
		return fmt.Errorf("--force-new-cluster: %w", err)
	}
	if done {
		return fmt.Errorf("--force-new-cluster was already used on the data dir %s at %s (Raft index %s): used again it would drop every member that joined since; "+
			"remove --force-new-cluster from the command line (or, to force a new cluster from this member again, delete %s)",
			dir, at, index, d.forceNewClusterDone())
	}
	return nil
}

// forceNewCluster rewrites the Raft configuration in rcfg.Dir to hold only
// this member at raftAddr (Options.ForceNewCluster), replaying the log into
// a throw-away FSM as raftnode.Recover needs. It fails when the data dir
// holds no Raft state (hasState false): there is nothing to recover.
func (h *Hub) forceNewCluster(rcfg raftnode.Config, raftAddr string, hasState bool, halt func(error)) error {
	if !hasState {
		return errors.New("--force-new-cluster: the data dir holds no Raft state to recover; start it without the flag to bootstrap a new hub, or point --data-dir at a member's data dir")
	}
	rcfg.FSM = state.New(state.Options{Halt: halt})
	if err := raftnode.Recover(rcfg, raftAddr); err != nil {
		return err
	}
	h.log.Warn("forced a new one-member hub from this member's state: the other members are dropped from the Raft configuration; "+
		"start this member without --force-new-cluster from now on (it is refused on this data dir while the marker file exists), and join new members (roostctl hub join)",
		"raft_addr", raftAddr, "marker", h.dir.forceNewClusterDone())
	return nil
}

// forgetLostMembers deletes the member records of members that are not in
// the Raft configuration any more, after ForceNewCluster: they would
// otherwise be listed as addresses to forward to and to join through.
func (h *Hub) forgetLostMembers(ctx context.Context) error {
	servers, err := h.node.Servers()
	if err != nil {
		return err
	}
	in := map[string]bool{}
	for _, sv := range servers {
		in[string(sv.ID)] = true
	}
	for _, m := range h.fsm.Members() {
		if in[m.GetId()] {
			continue
		}
		if _, err := h.api.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_DeleteMember{DeleteMember: &roostv1.DeleteMember{Id: m.GetId()}}}); err != nil {
			return err
		}
		h.log.Info("forgot a member lost with --force-new-cluster", "lost_member", m.GetId())
	}
	return nil
}
