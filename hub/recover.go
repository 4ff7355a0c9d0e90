package hub

import (
	"context"
	"errors"

	"github.com/roostfleet/roost/hub/raftnode"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

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
		"start this member without --force-new-cluster from now on, and join new members (roostctl hub join)", "raft_addr", raftAddr)
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
