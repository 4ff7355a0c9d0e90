package state

import (
	"fmt"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// ClaimedRefusal is the refusal to take Server srv out of service while
// Machine m claims it: it names the Machine, says how to release it
// (ReleaseHint) and what to do then (then, e.g. "decommission it"). pool is
// m's Pool (nil for a standalone Machine, or when unknown); m may be nil
// when the state has no Machine for a Claimed Server.
func ClaimedRefusal(srv *roostv1.Server, m *roostv1.Machine, pool *roostv1.Pool, then string) string {
	name := srv.GetMetadata().GetName()
	if m == nil {
		return fmt.Sprintf("Server %s is Claimed; release its Machine first ('roostctl get machines' lists them), then %s", name, then)
	}
	holder := "standalone Machine " + m.GetMetadata().GetName()
	if p := m.GetSpec().GetPool(); p != "" {
		holder = fmt.Sprintf("Machine %s of Pool %s", m.GetMetadata().GetName(), p)
	}
	return fmt.Sprintf("Server %s is claimed by %s: %s, then %s", name, holder, ReleaseHint(name, m, pool), then)
}

// ReleaseHint says how to release Server server from Machine m, with the
// commands to run: 'roostctl pool unassign' for a pool's Machine (and,
// when the Pool has replicas, a cordon first so the pool controller does
// not claim the Server again), 'roostctl machine delete' for a standalone
// one. pool is m's Pool, nil when standalone or unknown.
func ReleaseHint(server string, m *roostv1.Machine, pool *roostv1.Pool) string {
	p := m.GetSpec().GetPool()
	if p == "" {
		return fmt.Sprintf("release it with 'roostctl machine delete %s'", m.GetMetadata().GetName())
	}
	release := fmt.Sprintf("release it with 'roostctl pool unassign %s %s' (a worker's Node is drained first)", p, server)
	if pool.GetSpec() != nil && pool.GetSpec().Replicas != nil {
		return fmt.Sprintf("cordon it so Pool %s (replicas: %d) does not claim it again ('roostctl server cordon %s'), %s",
			p, pool.GetSpec().GetReplicas(), server, release)
	}
	return release
}
