package scheduler

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// ReplicaFailure returns the state.PoolReplicaFailure condition pool
// should carry, or nil for none: True while the Pool has fewer Machines
// than spec.replicas and cannot claim another Server, with a message that
// counts the Servers its MachineClass selects by why each cannot be
// claimed, e.g. "3 of 5 replicas; no Server can be claimed: 7 Servers
// match MachineClass large (roost.io/cpus>=16): 3 claimed, 2 cordoned, 2
// Unreachable". LastTransitionTime is left for the FSM to set.
func ReplicaFailure(snap Snapshot, pool *roostv1.Pool) *roostv1.Condition {
	if pool.GetSpec().Replicas == nil {
		return nil
	}
	name := pool.GetMetadata().GetName()
	want := int(pool.GetSpec().GetReplicas())
	claimedBy := map[string]string{}
	have := 0
	for _, m := range snap.Machines {
		claimedBy[m.GetSpec().GetServer()] = m.GetMetadata().GetName()
		if m.GetSpec().GetPool() == name && m.GetStatus().GetPhase() != state.PhaseDestroyed {
			have++
		}
	}
	if have >= want {
		return nil
	}
	short := fmt.Sprintf("%d of %d replicas", have, want)
	sel, err := selectorOf(snap, pool)
	if err != nil {
		reason := state.ReasonInvalidMachineClass
		if strings.HasSuffix(err.Error(), "does not exist") {
			reason = state.ReasonMachineClassNotFound
		}
		return &roostv1.Condition{Type: state.PoolReplicaFailure, Status: "True", Reason: reason, Message: short + ": " + err.Error()}
	}
	matched := 0
	blocked := map[string]int{}
	for _, s := range snap.Servers {
		if sel != nil && !sel.Matches(s.GetMetadata().GetLabels()) {
			continue
		}
		matched++
		b := state.ClaimBlocker(s, name, claimedBy[s.GetMetadata().GetName()])
		if b == "" {
			return nil // a Server can be claimed: Plan claims it
		}
		blocked[b]++
	}
	what := "Servers"
	if mc := pool.GetSpec().GetMachineClass(); mc != "" {
		what = fmt.Sprintf("Servers match MachineClass %s (%s)", mc, strings.Join(machineClassSelector(snap, mc), ", "))
		if matched == 1 {
			what = strings.Replace(what, "Servers match", "Server matches", 1)
		}
	} else if matched == 1 {
		what = "Server"
	}
	msg := fmt.Sprintf("%s; no Server can be claimed: %d %s", short, matched, what)
	if mc := pool.GetSpec().GetMachineClass(); matched == 0 && mc != "" {
		msg = fmt.Sprintf("%s; no Server matches MachineClass %s (%s) of the %d enrolled", short, mc, strings.Join(machineClassSelector(snap, mc), ", "), len(snap.Servers))
	} else if matched > 0 {
		causes := make([]string, 0, len(blocked))
		for b := range blocked {
			causes = append(causes, b)
		}
		sort.Strings(causes)
		for i, b := range causes {
			causes[i] = fmt.Sprintf("%d %s", blocked[b], b)
		}
		msg += ": " + strings.Join(causes, ", ")
	}
	return &roostv1.Condition{Type: state.PoolReplicaFailure, Status: "True", Reason: state.ReasonNoMatchingServers, Message: msg}
}

// machineClassSelector is the server selector of MachineClass mc in snap.
func machineClassSelector(snap Snapshot, mc string) []string {
	for _, c := range snap.MachineClasses {
		if c.GetMetadata().GetName() == mc {
			return c.GetSpec().GetServerSelector()
		}
	}
	return nil
}

// syncReplicaFailure proposes SetConditions when pool's ReplicaFailure
// condition differs from want (nil: none), so it is written on changes
// only.
func (c *Controller) syncReplicaFailure(ctx context.Context, pool *roostv1.Pool, want *roostv1.Condition) error {
	cur := state.FindCondition(pool.GetStatus().GetConditions(), state.PoolReplicaFailure)
	sc := &roostv1.SetConditions{Kind: "Pool", Name: pool.GetMetadata().GetName()}
	switch {
	case want == nil && cur == nil:
		return nil
	case want == nil:
		sc.Clear = []string{state.PoolReplicaFailure}
	case cur.GetStatus() == want.GetStatus() && cur.GetReason() == want.GetReason() && cur.GetMessage() == want.GetMessage():
		return nil
	default:
		sc.Set = []*roostv1.Condition{want}
	}
	return c.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_SetConditions{SetConditions: sc}})
}
