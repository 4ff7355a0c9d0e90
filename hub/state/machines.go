package state

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Machine phases (MachineStatus.phase), in milestone order.
const (
	PhaseRequested   = "Requested"
	PhaseScheduled   = "Scheduled"
	PhaseProvisioned = "Provisioned"
	PhaseJoined      = "Joined"
	PhaseReady       = "Ready"
	PhaseDestroyed   = "Destroyed"
)

// Machine condition types, one per milestone after Requested.
const (
	MachineScheduled   = "Scheduled"
	MachineProvisioned = "Provisioned"
	MachineJoined      = "Joined"
	MachineReady       = "Ready"
)

// Machine condition reasons the hub sets.
const (
	ReasonServerClaimed       = "ServerClaimed"
	ReasonNoServer            = "NoServer"
	ReasonWaitingForRevision  = "WaitingForRevision"
	ReasonWaitingForProvision = "WaitingForProvisioned"
	ReasonNotAWorker          = "NotAWorker"
	ReasonWaitingForMilestone = "WaitingForMilestones"
	ReasonReleased            = "Released"
)

const (
	kindMachine = "Machine"
	kindPool    = "Pool"
)

// MachinePhase is the phase a Machine's conditions give: the furthest
// milestone reached in order (Scheduled, Provisioned, Joined, Ready), or
// Requested while no Server is bound. Destroyed is set only by release.
func MachinePhase(m *roostv1.Machine) string {
	if m.GetStatus().GetPhase() == PhaseDestroyed {
		return PhaseDestroyed
	}
	if m.GetSpec().GetServer() == "" {
		return PhaseRequested
	}
	holds := func(t string) bool {
		c := findCondition(m.GetStatus().GetConditions(), t)
		return c != nil && c.GetStatus() == "True"
	}
	phase := PhaseScheduled
	for _, step := range []struct{ cond, phase string }{
		{MachineProvisioned, PhaseProvisioned}, {MachineJoined, PhaseJoined}, {MachineReady, PhaseReady},
	} {
		if !holds(step.cond) {
			break
		}
		phase = step.phase
	}
	return phase
}

// Standalone reports whether m belongs to no Pool (no Cluster to join).
func Standalone(m *roostv1.Machine) bool { return m.GetSpec().GetPool() == "" }

// scheduledConditions are the conditions of a Machine just bound to
// server: Scheduled holds, the later milestones wait with their reasons.
func scheduledConditions(server string, standalone bool, now *timestamppb.Timestamp) []*roostv1.Condition {
	var cs []*roostv1.Condition
	cs = setCondition(cs, MachineScheduled, "True", ReasonServerClaimed, fmt.Sprintf("Server %s is claimed", server), now)
	cs = setCondition(cs, MachineProvisioned, "False", ReasonWaitingForRevision, "the Revision pipeline has not rendered a Revision yet", now)
	if standalone {
		cs = setCondition(cs, MachineJoined, "False", ReasonWaitingForProvision, "standalone Machine: joins no cluster; holds once provisioned", now)
	} else {
		cs = setCondition(cs, MachineJoined, "False", ReasonWaitingForProvision, "the kubelet joins the cluster after the Server is provisioned", now)
	}
	cs = setCondition(cs, MachineReady, "False", ReasonWaitingForMilestone, "waiting for Provisioned and Joined", now)
	return cs
}

func (a *applier) getMachine(name string) (*roostv1.Machine, *apierror.Error) {
	raw, err := a.txn.First(kindMachine, indexID, name)
	if err != nil {
		return nil, internal(err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*roostv1.Object).GetMachine(), nil
}

func (a *applier) getPool(name string) (*roostv1.Pool, *apierror.Error) {
	raw, err := a.txn.First(kindPool, indexID, name)
	if err != nil {
		return nil, internal(err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*roostv1.Object).GetPool(), nil
}

// machineOf returns the Machine that claims server, or nil. It uses the
// refs index (Machine spec.server refers to the Server).
func (a *applier) machineOf(server string) (*roostv1.Machine, *apierror.Error) {
	raw, err := a.txn.First(kindMachine, indexRefs, refKey(kindServer, server))
	if err != nil {
		return nil, internal(err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*roostv1.Object).GetMachine(), nil
}

// ClaimRefusal says why s cannot be claimed for pool (empty: standalone),
// or "" when it can. It does not check for an existing Machine; claimedBy
// names the Machine holding s, if any.
func ClaimRefusal(s *roostv1.Server, pool, claimedBy string) string {
	_, why := claimBlock(s, pool, claimedBy, RulesVersion)
	return why
}

// ClaimBlocker is ClaimRefusal in a few words for counting Servers by
// cause, e.g. "cordoned", "Unreachable"; "" when s may be claimed.
func ClaimBlocker(s *roostv1.Server, pool, claimedBy string) string {
	short, _ := claimBlock(s, pool, claimedBy, RulesVersion)
	return short
}

// claimBlock says why s cannot be claimed for pool under apply rules
// rules: in a few words and as a sentence naming the Server and the fix;
// both "" when it can.
func claimBlock(s *roostv1.Server, pool, claimedBy string, rules uint32) (short, why string) {
	name := s.GetMetadata().GetName()
	st := s.GetStatus()
	switch {
	case claimedBy != "":
		return "claimed", fmt.Sprintf("Server %s is already claimed by Machine %s", name, claimedBy)
	case st.GetState() == ServerDecommissioned:
		return ServerDecommissioned, fmt.Sprintf("Server %s is Decommissioned", name)
	case st.GetState() == ServerPendingApproval:
		return ServerPendingApproval, fmt.Sprintf("Server %s is PendingApproval (roostctl server approve %s)", name, name)
	case st.GetState() == ServerRegistered:
		return ServerRegistered, fmt.Sprintf("Server %s is Registered and has not enrolled yet (roostctl server provision %s --iso FILE; assign it once it is Available)", name, name)
	case st.GetState() != ServerAvailable:
		return orUnknown(st.GetState()), fmt.Sprintf("Server %s is %s, not Available", name, orUnknown(st.GetState()))
	case s.GetSpec().GetUnschedulable():
		return "cordoned", fmt.Sprintf("Server %s is cordoned (roostctl server uncordon %s)", name, name)
	case st.GetReachability() == Unreachable:
		return Unreachable, fmt.Sprintf("Server %s is Unreachable", name)
	case s.GetSpec().GetPool() != "" && s.GetSpec().GetPool() != pool:
		return "pre-assigned to another Pool", fmt.Sprintf("Server %s is pre-assigned to Pool %s", name, s.GetSpec().GetPool())
	case rules >= RulesBMC && strings.EqualFold(st.GetInventory().GetFirmware(), "BIOS"):
		return "legacy BIOS", fmt.Sprintf("Server %s boots with legacy BIOS firmware: an installed Revision boots through systemd-boot, "+
			"whose boot counting and fallback need UEFI (switch the server's firmware to UEFI boot mode and boot the enrollment image again; "+
			"the agent reports the firmware at its next boot)", name)
	}
	return "", ""
}

func orUnknown(s string) string {
	if s == "" {
		return "in no state"
	}
	return s
}

// createMachines claims Servers, all or nothing. Errors: InvalidArgument
// (malformed machines), NotFound (Pool, Server, MachineClass or
// NetworkProfile), AlreadyExists (a Machine of that name, or a Machine of
// the same Pool with the same host name: see MachineHostname),
// FailedPrecondition (a Pool with replicas, Servers that cannot be
// claimed).
func (a *applier) createMachines(c *roostv1.CreateMachines) ([]*roostv1.ApplyResult, *apierror.Error) {
	now, aerr := a.now()
	if aerr != nil {
		return nil, aerr
	}
	if len(c.GetMachines()) == 0 {
		return nil, apierror.Invalid("no machines to create", apierror.Violation{Field: "machines", Message: "must hold at least one Machine"})
	}
	var bad []apierror.Violation
	seenName, seenServer := map[string]int{}, map[string]int{}
	for i, nm := range c.GetMachines() {
		f := fmt.Sprintf("machines[%d]", i)
		if msgs := validation.IsDNS1123Subdomain(nm.GetName()); len(msgs) > 0 {
			bad = append(bad, apierror.Violation{Field: f + ".name", Message: fmt.Sprintf("%q: %s", nm.GetName(), msgs[0])})
		}
		if nm.GetUid() == "" {
			bad = append(bad, apierror.Violation{Field: f + ".uid", Message: "is required"})
		}
		if nm.GetServer() == "" {
			bad = append(bad, apierror.Violation{Field: f + ".server", Message: "is required"})
		}
		if j, dup := seenName[nm.GetName()]; dup {
			bad = append(bad, apierror.Violation{Field: f + ".name", Message: fmt.Sprintf("also machines[%d]", j)})
		}
		if j, dup := seenServer[nm.GetServer()]; dup {
			bad = append(bad, apierror.Violation{Field: f + ".server", Message: fmt.Sprintf("Server %s is also in machines[%d]", nm.GetServer(), j)})
		}
		seenName[nm.GetName()], seenServer[nm.GetServer()] = i, i
		if nm.GetPool() != "" && (nm.GetMachineClass() != "" || nm.GetNetworkProfile() != "") {
			bad = append(bad, apierror.Violation{Field: f + ".machineClass", Message: "only a standalone Machine names its MachineClass and NetworkProfile; a pool Machine uses its Pool's"})
		}
	}
	if len(bad) > 0 {
		return nil, apierror.Invalid("invalid machines", bad...)
	}

	var results []*roostv1.ApplyResult
	var refusals []apierror.Violation
	hosts := poolHostnames{}
	for i, nm := range c.GetMachines() {
		f := fmt.Sprintf("machines[%d]", i)
		var pool *roostv1.Pool
		if p := nm.GetPool(); p != "" {
			if pool, aerr = a.getPool(p); aerr != nil {
				return nil, aerr
			}
			if pool == nil {
				return nil, apierror.NotFound(kindPool, p)
			}
			if pool.GetSpec().Replicas != nil && !c.GetByController() {
				return nil, apierror.FailedPrecondition("Pool %s has replicas: %d, so the hub chooses its Servers; change replicas (or remove it for explicit membership) instead of assigning",
					p, pool.GetSpec().GetReplicas())
			}
		}
		for _, ref := range []struct{ kind, name string }{{"MachineClass", nm.GetMachineClass()}, {"NetworkProfile", nm.GetNetworkProfile()}} {
			if ref.name == "" {
				continue
			}
			if ok, err := exists(a.txn, ref.kind, ref.name); err != nil {
				return nil, internal(err)
			} else if !ok {
				return nil, apierror.NotFound(ref.kind, ref.name)
			}
		}
		old, aerr := a.getMachine(nm.GetName())
		if aerr != nil {
			return nil, aerr
		}
		if old != nil {
			return nil, apierror.AlreadyExists(kindMachine, nm.GetName())
		}
		if pool != nil {
			host := newMachineHostname(nm)
			if holder, aerr := hosts.holder(a, nm.GetPool(), host); aerr != nil {
				return nil, aerr
			} else if holder != nil {
				return nil, hostnameTaken(nm, host, holder)
			}
		}
		srv, aerr := a.getServer(nm.GetServer())
		if aerr != nil {
			return nil, aerr
		}
		if srv == nil {
			return nil, apierror.NotFound(kindServer, nm.GetServer())
		}
		holder, aerr := a.machineOf(nm.GetServer())
		if aerr != nil {
			return nil, aerr
		}
		claimedBy := ""
		if holder != nil {
			claimedBy = holder.GetMetadata().GetName()
		}
		if _, why := claimBlock(srv, nm.GetPool(), claimedBy, a.rules); why != "" {
			refusals = append(refusals, apierror.Violation{Field: f + ".server", Message: why})
			continue
		}
		if pool != nil {
			if why, aerr := a.selectorRefusal(srv, pool); aerr != nil {
				return nil, aerr
			} else if why != "" {
				refusals = append(refusals, apierror.Violation{Field: f + ".server", Message: why})
				continue
			}
		}

		m := &roostv1.Machine{
			ApiVersion: resource.APIVersion, Kind: kindMachine,
			Metadata: a.newMeta(nm.GetName(), nm.GetUid(), now),
			Spec: &roostv1.MachineSpec{Server: nm.GetServer(), Pool: nm.GetPool(), Hostname: nm.GetHostname(),
				MachineClass: nm.GetMachineClass(), NetworkProfile: nm.GetNetworkProfile()},
			Status: &roostv1.MachineStatus{
				Cluster:    pool.GetSpec().GetCluster(),
				Conditions: scheduledConditions(nm.GetServer(), pool.GetSpec().GetCluster() == "", now),
			},
		}
		m.Status.Phase = MachinePhase(m)
		if aerr := a.put(m, true); aerr != nil {
			return nil, aerr
		}
		hosts.add(m)
		s := proto.Clone(srv).(*roostv1.Server)
		if s.Spec == nil {
			s.Spec = &roostv1.ServerSpec{}
		}
		if s.Status == nil {
			s.Status = &roostv1.ServerStatus{}
		}
		specChanged := s.Spec.Pool != nm.GetPool()
		s.Spec.Pool = nm.GetPool()
		s.Status.State = ServerClaimed
		s.Status.StateReason = fmt.Sprintf("claimed by Machine %s", nm.GetName())
		a.touch(s.Metadata, specChanged)
		if aerr := a.put(s, false); aerr != nil {
			return nil, aerr
		}
		if aerr := a.countPoolMachines(nm.GetPool(), +1); aerr != nil {
			return nil, aerr
		}
		msg := "claims Server " + nm.GetServer()
		if nm.GetPool() != "" {
			msg += " for pool " + nm.GetPool()
		}
		if aerr := a.recordEvent(kindMachine, nm.GetName(), EventNormal, "Created", msg, EventSourceHub); aerr != nil {
			return nil, aerr
		}
		results = append(results, &roostv1.ApplyResult{Kind: kindMachine, Name: nm.GetName(), Action: ActionCreated})
	}
	if len(refusals) > 0 {
		msg := "servers cannot be claimed"
		if len(refusals) == 1 {
			msg = refusals[0].Message
		}
		return nil, apierror.FailedPreconditionFields(msg, refusals...)
	}
	return results, nil
}

// selectorRefusal says why srv does not fit pool's MachineClass server
// selector, or "" when it does (or the pool has no class).
func (a *applier) selectorRefusal(srv *roostv1.Server, pool *roostv1.Pool) (string, *apierror.Error) {
	mc := pool.GetSpec().GetMachineClass()
	if mc == "" {
		return "", nil
	}
	raw, err := a.txn.First("MachineClass", indexID, mc)
	if err != nil {
		return "", internal(err)
	}
	if raw == nil {
		return "", nil // the reference index keeps this from happening
	}
	terms := raw.(*roostv1.Object).GetMachineClass().GetSpec().GetServerSelector()
	sel, perr := resource.ParseSelector(terms)
	if perr != nil {
		return fmt.Sprintf("MachineClass %s has an invalid server selector: %v", mc, perr), nil
	}
	if !sel.Matches(srv.GetMetadata().GetLabels()) {
		return fmt.Sprintf("Server %s does not match the server selector of MachineClass %s (%s)", srv.GetMetadata().GetName(), mc, joinTerms(terms)), nil
	}
	return "", nil
}

func joinTerms(terms []string) string {
	out := ""
	for i, t := range terms {
		if i > 0 {
			out += ", "
		}
		out += t
	}
	return out
}

// deleteMachines releases claims, all or nothing.
func (a *applier) deleteMachines(c *roostv1.DeleteMachines) ([]*roostv1.ApplyResult, *apierror.Error) {
	now, aerr := a.now()
	if aerr != nil {
		return nil, aerr
	}
	if len(c.GetNames())+len(c.GetServers()) == 0 {
		return nil, apierror.Invalid("no machines to delete", apierror.Violation{Field: "names", Message: "name Machines or Servers"})
	}
	if p := c.GetPool(); p != "" {
		pool, aerr := a.getPool(p)
		if aerr != nil {
			return nil, aerr
		}
		if pool == nil {
			return nil, apierror.NotFound(kindPool, p)
		}
	}
	var targets []*roostv1.Machine
	var bad []apierror.Violation
	seen := map[string]bool{}
	add := func(field string, m *roostv1.Machine) {
		if c.GetPool() != "" && m.GetSpec().GetPool() != c.GetPool() {
			where := "is standalone"
			if m.GetSpec().GetPool() != "" {
				where = "belongs to Pool " + m.GetSpec().GetPool()
			}
			bad = append(bad, apierror.Violation{Field: field, Message: fmt.Sprintf("Machine %s on Server %s %s, not Pool %s", m.GetMetadata().GetName(), m.GetSpec().GetServer(), where, c.GetPool())})
			return
		}
		if !seen[m.GetMetadata().GetName()] {
			seen[m.GetMetadata().GetName()] = true
			targets = append(targets, m)
		}
	}
	for i, n := range c.GetNames() {
		m, aerr := a.getMachine(n)
		if aerr != nil {
			return nil, aerr
		}
		if m == nil {
			return nil, apierror.NotFound(kindMachine, n)
		}
		add(fmt.Sprintf("names[%d]", i), m)
	}
	for i, s := range c.GetServers() {
		srv, aerr := a.getServer(s)
		if aerr != nil {
			return nil, aerr
		}
		if srv == nil {
			return nil, apierror.NotFound(kindServer, s)
		}
		m, aerr := a.machineOf(s)
		if aerr != nil {
			return nil, aerr
		}
		if m == nil {
			bad = append(bad, apierror.Violation{Field: fmt.Sprintf("servers[%d]", i), Message: fmt.Sprintf("Server %s is not claimed by any Machine", s)})
			continue
		}
		add(fmt.Sprintf("servers[%d]", i), m)
	}
	if len(bad) > 0 {
		msg := "machines cannot be released"
		if len(bad) == 1 {
			msg = bad[0].Message
		}
		return nil, apierror.FailedPreconditionFields(msg, bad...)
	}
	var results []*roostv1.ApplyResult
	for _, m := range targets {
		if aerr := a.releaseMachine(m, now); aerr != nil {
			return nil, aerr
		}
		results = append(results, &roostv1.ApplyResult{Kind: kindMachine, Name: m.GetMetadata().GetName(), Action: ActionDeleted})
	}
	return results, nil
}

// releaseMachine marks m Destroyed, removes it (the DELETED watch event
// carries the Destroyed Machine) and puts its Server in Cleaning (apply
// rules 11: its agent wipes it by the Machine's class's spec.cleaning;
// before, straight to Available).
func (a *applier) releaseMachine(old *roostv1.Machine, now *timestamppb.Timestamp) *apierror.Error {
	name := old.GetMetadata().GetName()
	raw, err := a.txn.First(kindMachine, indexID, name)
	if err != nil {
		return internal(err)
	}
	if err := a.txn.Delete(kindMachine, raw); err != nil {
		return internal(err)
	}
	m := proto.Clone(old).(*roostv1.Machine)
	if m.Status == nil {
		m.Status = &roostv1.MachineStatus{}
	}
	m.Status.Phase = PhaseDestroyed
	m.Status.Conditions = setCondition(m.Status.Conditions, MachineReady, "False", ReasonReleased, "the claim was released", now)
	m.Metadata.ModifyIndex = a.index
	a.events = append(a.events, newEvent(roostv1.WatchEvent_TYPE_DELETED, kindMachine, resource.Wrap(m), a.index))
	if aerr := a.countPoolMachines(old.GetSpec().GetPool(), -1); aerr != nil {
		return aerr
	}
	if aerr := a.recordEvent(kindMachine, name, EventNormal, "Released", "released Server "+old.GetSpec().GetServer(), EventSourceHub); aerr != nil {
		return aerr
	}

	srvName := old.GetSpec().GetServer()
	if srvName == "" {
		return nil
	}
	if aerr := a.deleteObjectRow(kindLease, srvName); aerr != nil {
		return aerr
	}
	// the released Machine's Revisions that never booted will not
	revs, err := revisionsOf(a.txn, srvName)
	if err != nil {
		return internal(err)
	}
	for _, r := range revs {
		if r.GetSpec().GetMachine() == name && revisionPhase(r) == RevisionPending {
			nr := proto.Clone(r).(*roostv1.Revision)
			nr.Status.Phase = RevisionSuperseded
			nr.Status.Reason = fmt.Sprintf("Machine %s was released before the Server booted it", name)
			a.touch(nr.Metadata, false)
			if aerr := a.put(nr, false); aerr != nil {
				return aerr
			}
		}
	}
	srv, aerr := a.getServer(srvName)
	if aerr != nil || srv == nil {
		return aerr
	}
	s := proto.Clone(srv).(*roostv1.Server)
	if s.Spec == nil {
		s.Spec = &roostv1.ServerSpec{}
	}
	if s.Status == nil {
		s.Status = &roostv1.ServerStatus{}
	}
	specChanged := s.Spec.Pool != ""
	s.Spec.Pool = ""
	if s.Status.State == ServerClaimed {
		if a.rules >= RulesCleaning {
			mc, aerr := a.classOf(old)
			if aerr != nil {
				return aerr
			}
			mode, data := cleaningPolicy(mc)
			if aerr := a.startCleaning(s, mode, data, false, 0, fmt.Sprintf("released by Machine %s; the agent wipes it before it is Available", name), now); aerr != nil {
				return aerr
			}
			s.Status.Cleaning.MachineClass = mc.GetMetadata().GetName()
		} else {
			s.Status.State = ServerAvailable
			s.Status.StateReason = fmt.Sprintf("released by Machine %s", name)
		}
	}
	a.touch(s.Metadata, specChanged)
	return a.put(s, false)
}

// countPoolMachines adds delta to status.machines of the Pool named pool
// (nothing for standalone Machines).
func (a *applier) countPoolMachines(pool string, delta int32) *apierror.Error {
	if pool == "" {
		return nil
	}
	old, aerr := a.getPool(pool)
	if aerr != nil || old == nil {
		return aerr
	}
	p := proto.Clone(old).(*roostv1.Pool)
	if p.Status == nil {
		p.Status = &roostv1.PoolStatus{}
	}
	p.Status.Machines = max(0, p.Status.Machines+delta)
	a.touch(p.Metadata, false)
	return a.put(p, false)
}
