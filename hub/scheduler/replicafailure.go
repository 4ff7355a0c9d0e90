package scheduler

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/roostfleet/roost/hub/state"
	"github.com/roostfleet/roost/internal/english"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// ReplicaFailure returns the state.PoolReplicaFailure condition pool
// should carry, or nil for none: True while the Pool has fewer Machines
// than spec.replicas and cannot claim enough Servers to reach it (also
// while claiming the last ones it can, so the condition does not flap),
// with a message that counts the Servers its MachineClass selects by why
// each cannot be claimed, and the enrolled Servers it does not select by
// the selector term that excludes them, e.g. "3 of 5 replicas; no more
// Servers can be claimed: 4 Servers match MachineClass big (rack=r12):
// 3 claimed by this Pool, 1 cordoned; of the 9 enrolled, 5 do not match:
// rack=r12 excludes 5". LastTransitionTime is left for the FSM to set.
func ReplicaFailure(snap Snapshot, pool *roostv1.Pool) *roostv1.Condition {
	if pool.GetSpec().Replicas == nil {
		return nil
	}
	name := pool.GetMetadata().GetName()
	want := int(pool.GetSpec().GetReplicas())
	claimedBy := map[string]*roostv1.Machine{}
	have := 0
	for _, m := range snap.Machines {
		claimedBy[m.GetSpec().GetServer()] = m
		if m.GetSpec().GetPool() == name && counts(m) {
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
	matched, claimable := 0, 0
	blocked := map[string]int{}
	excluded := make([]int, len(sel)) // per selector term: enrolled Servers it excludes
	for _, s := range snap.Servers {
		if !sel.Matches(s.GetMetadata().GetLabels()) {
			for i, r := range sel {
				if !r.Matches(s.GetMetadata().GetLabels()) {
					excluded[i]++
				}
			}
			continue
		}
		matched++
		m := claimedBy[s.GetMetadata().GetName()]
		switch b := state.ClaimBlocker(s, name, m.GetMetadata().GetName()); {
		case b == "":
			claimable++
		case m != nil && m.GetSpec().GetPool() == name:
			blocked["claimed by this Pool"]++
		case m != nil:
			blocked["claimed by other Pools or standalone"]++
		default:
			blocked[b]++
		}
	}
	if claimable >= want-have {
		return nil // Plan claims them
	}
	mc := pool.GetSpec().GetMachineClass()
	terms := machineClassSelector(snap, mc)
	var msg strings.Builder
	msg.WriteString(short)
	switch {
	case claimable > 0:
		fmt.Fprintf(&msg, "; only %d more %s can be claimed", claimable, english.Plural(claimable, "Server", "Servers"))
	default:
		msg.WriteString("; no more Servers can be claimed")
	}
	switch {
	case mc != "" && len(terms) == 0:
		fmt.Fprintf(&msg, ": %d enrolled (MachineClass %s selects any Server)", matched, mc)
	case mc != "":
		fmt.Fprintf(&msg, ": %d %s MachineClass %s (%s)", matched, english.Plural(matched, "Server matches", "Servers match"), mc, strings.Join(terms, ", "))
	default:
		fmt.Fprintf(&msg, ": %d enrolled", matched)
	}
	if len(blocked) > 0 {
		causes := make([]string, 0, len(blocked))
		for b := range blocked {
			causes = append(causes, b)
		}
		sort.Strings(causes)
		for i, b := range causes {
			causes[i] = fmt.Sprintf("%d %s", blocked[b], b)
		}
		msg.WriteString(": " + strings.Join(causes, ", "))
	}
	if n := len(snap.Servers) - matched; n > 0 {
		fmt.Fprintf(&msg, "; of the %d enrolled, %d %s not match", len(snap.Servers), n, english.Plural(n, "does", "do"))
		var parts []string
		for i, c := range excluded {
			if c > 0 && i < len(terms) {
				parts = append(parts, fmt.Sprintf("%s excludes %d", terms[i], c))
			}
		}
		if len(parts) > 0 {
			msg.WriteString(": " + strings.Join(parts, ", "))
		}
	}
	return &roostv1.Condition{Type: state.PoolReplicaFailure, Status: "True", Reason: state.ReasonNoMatchingServers, Message: msg.String()}
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
