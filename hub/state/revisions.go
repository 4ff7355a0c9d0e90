package state

import (
	"fmt"
	"sort"

	"github.com/hashicorp/go-memdb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Revision phases (RevisionStatus.phase).
const (
	RevisionPending    = "Pending"
	RevisionBooted     = "Booted"
	RevisionGood       = "Good"
	RevisionFailed     = "Failed"
	RevisionSuperseded = "Superseded"
)

// AgentHealthy is the agent condition (ServerStatus.conditions) holding its
// boot assessment of the booted Revision: True once the network profile is
// verified and the required units are active, when the agent marks the
// boot entry good.
const AgentHealthy = "Healthy"

// MaxRevisionHistory is how many Revisions the FSM keeps per Server; the
// oldest beyond it are removed (never the booted or the newest one).
const MaxRevisionHistory = 5

const (
	kindRevision = "Revision"
	kindLease    = "Lease"
)

// RevisionName is the name of Server server's Revision number n:
// "<server>-<n>".
func RevisionName(server string, n int64) string { return fmt.Sprintf("%s-%d", server, n) }

// revisionsOf returns server's Revisions in txn, oldest first. The refs
// index finds them: a Revision refers to its Server.
func revisionsOf(txn *memdb.Txn, server string) ([]*roostv1.Revision, error) {
	it, err := txn.Get(kindRevision, indexRefs, refKey(kindServer, server))
	if err != nil {
		return nil, err
	}
	var out []*roostv1.Revision
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if r := raw.(*roostv1.Object).GetRevision(); r.GetSpec().GetServer() == server {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetSpec().GetNumber() < out[j].GetSpec().GetNumber() })
	return out, nil
}

// Revisions returns Server server's Revisions, oldest first (clones).
func (f *FSM) Revisions(server string) []*roostv1.Revision {
	revs, err := revisionsOf(f.db.Load().Txn(false), server)
	if err != nil {
		return nil
	}
	for i, r := range revs {
		revs[i] = proto.Clone(r).(*roostv1.Revision)
	}
	return revs
}

// DesiredRevision returns Server server's newest Revision (a clone) and the
// Raft index of its last change, or nil and 0 when it has none or no
// Machine holds the Server any more. The hub sends it to the agent as
// DesiredState (generation = that index).
func (f *FSM) DesiredRevision(server string) (*roostv1.Revision, uint64) {
	txn := f.db.Load().Txn(false)
	revs, err := revisionsOf(txn, server)
	if err != nil || len(revs) == 0 {
		return nil, 0
	}
	r := revs[len(revs)-1]
	raw, err := txn.First(kindMachine, indexRefs, refKey(kindServer, server))
	if err != nil || raw == nil || raw.(*roostv1.Object).GetMachine().GetMetadata().GetName() != r.GetSpec().GetMachine() {
		return nil, 0
	}
	return proto.Clone(r).(*roostv1.Revision), r.GetMetadata().GetModifyIndex()
}

// LatestRevision returns Server server's newest Revision (a clone),
// whether or not a Machine holds the Server, or nil.
func (f *FSM) LatestRevision(server string) *roostv1.Revision {
	revs, err := revisionsOf(f.db.Load().Txn(false), server)
	if err != nil || len(revs) == 0 {
		return nil
	}
	return proto.Clone(revs[len(revs)-1]).(*roostv1.Revision)
}

func revisionPhase(r *roostv1.Revision) string { return r.GetStatus().GetPhase() }

// putRevision records a Server's next Revision (see roostv1.PutRevision).
func (a *applier) putRevision(c *roostv1.PutRevision) ([]*roostv1.ApplyResult, *apierror.Error) {
	now, aerr := a.now()
	if aerr != nil {
		return nil, aerr
	}
	in := c.GetRevision()
	spec := in.GetSpec()
	var vs []apierror.Violation
	if spec.GetServer() == "" {
		vs = append(vs, apierror.Violation{Field: "revision.spec.server", Message: "is required"})
	}
	if spec.GetMachine() == "" {
		vs = append(vs, apierror.Violation{Field: "revision.spec.machine", Message: "is required"})
	}
	if spec.GetNumber() < 1 {
		vs = append(vs, apierror.Violation{Field: "revision.spec.number", Message: fmt.Sprintf("must be ≥ 1, got %d", spec.GetNumber())})
	}
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid Revision", vs...)
	}
	srv, aerr := a.getServer(spec.GetServer())
	if aerr != nil {
		return nil, aerr
	}
	if srv == nil {
		return nil, apierror.NotFound(kindServer, spec.GetServer())
	}
	m, aerr := a.machineOf(spec.GetServer())
	if aerr != nil {
		return nil, aerr
	}
	if m == nil || m.GetMetadata().GetName() != spec.GetMachine() {
		return nil, apierror.FailedPrecondition("Machine %s no longer holds Server %s", spec.GetMachine(), spec.GetServer())
	}
	revs, err := revisionsOf(a.txn, spec.GetServer())
	if err != nil {
		return nil, internal(err)
	}
	next := int64(1)
	if len(revs) > 0 {
		next = revs[len(revs)-1].GetSpec().GetNumber() + 1
	}
	if spec.GetNumber() != next {
		return nil, apierror.FailedPrecondition("Revision %d of Server %s: the next Revision is %d (another one was rendered meanwhile)",
			spec.GetNumber(), spec.GetServer(), next)
	}
	booted := srv.GetStatus().GetBootedRevision()
	for _, old := range revs {
		if revisionPhase(old) == RevisionPending && old.GetSpec().GetNumber() != booted {
			o := proto.Clone(old).(*roostv1.Revision)
			o.Status.Phase = RevisionSuperseded
			o.Status.Reason = fmt.Sprintf("Revision %d replaced it before it was booted", next)
			a.touch(o.Metadata, false)
			if aerr := a.put(o, false); aerr != nil {
				return nil, aerr
			}
		}
	}
	r := &roostv1.Revision{
		ApiVersion: resource.APIVersion, Kind: kindRevision,
		Metadata: a.newMeta(RevisionName(spec.GetServer(), next), c.GetUid(), now),
		Spec:     proto.Clone(spec).(*roostv1.RevisionSpec),
		Status:   &roostv1.RevisionStatus{Phase: RevisionPending},
	}
	if aerr := a.put(r, true); aerr != nil {
		return nil, aerr
	}
	// history limit: drop the oldest, never the booted one or the new one
	excess := len(revs) + 1 - MaxRevisionHistory
	for _, old := range revs {
		if excess <= 0 {
			break
		}
		if old.GetSpec().GetNumber() == booted {
			continue
		}
		if aerr := a.deleteObjectRow(kindRevision, old.GetMetadata().GetName()); aerr != nil {
			return nil, aerr
		}
		excess--
	}
	if aerr := a.refreshMachine(m, srv, now); aerr != nil {
		return nil, aerr
	}
	msg := fmt.Sprintf("Revision %d rendered for Machine %s", next, spec.GetMachine())
	if v := spec.GetImageVersion(); v != "" {
		msg += " (image " + v + ")"
	}
	if aerr := a.recordEvent(kindServer, spec.GetServer(), EventNormal, "RevisionRendered", msg, EventSourceHub); aerr != nil {
		return nil, aerr
	}
	return []*roostv1.ApplyResult{{Kind: kindRevision, Name: r.GetMetadata().GetName(), Action: ActionCreated}}, nil
}

// deleteObjectRow removes kind/name (if present) and records the event.
func (a *applier) deleteObjectRow(kind, name string) *apierror.Error {
	raw, err := a.txn.First(kind, indexID, name)
	if err != nil {
		return internal(err)
	}
	if raw == nil {
		return nil
	}
	if err := a.txn.Delete(kind, raw); err != nil {
		return internal(err)
	}
	a.events = append(a.events, newEvent(roostv1.WatchEvent_TYPE_DELETED, kind, raw.(*roostv1.Object), a.index))
	return nil
}

// recordBoot updates server's Revisions from an agent report: the booted
// one becomes Booted (Good once the agent's Healthy condition holds), the
// reported failures become Failed with their reasons. It returns whether
// anything changed.
func (a *applier) recordBoot(srv *roostv1.Server, failed []*roostv1.FailedRevision) *apierror.Error {
	name := srv.GetMetadata().GetName()
	revs, err := revisionsOf(a.txn, name)
	if err != nil {
		return internal(err)
	}
	booted := srv.GetStatus().GetBootedRevision()
	healthy := findCondition(srv.GetStatus().GetConditions(), AgentHealthy)
	good := healthy != nil && healthy.GetStatus() == "True"
	failedReason := map[int64]string{}
	for _, f := range failed {
		if f.GetNumber() != booted {
			failedReason[f.GetNumber()] = f.GetReason()
		}
	}
	for _, old := range revs {
		n := old.GetSpec().GetNumber()
		r := proto.Clone(old).(*roostv1.Revision)
		if r.Status == nil {
			r.Status = &roostv1.RevisionStatus{}
		}
		switch {
		case n == booted:
			phase := RevisionBooted
			if good {
				phase = RevisionGood
			}
			if r.Status.Phase != RevisionGood || phase == RevisionGood {
				r.Status.Phase = phase
			}
			r.Status.Reason = ""
			if r.Status.BootedAt == nil {
				r.Status.BootedAt = a.time
			}
		case failedReason[n] != "" && r.Status.Phase != RevisionFailed && r.Status.Phase != RevisionGood:
			r.Status.Phase = RevisionFailed
			r.Status.Reason = failedReason[n]
		default:
			continue
		}
		if proto.Equal(r, old) {
			continue
		}
		a.touch(r.Metadata, false)
		if aerr := a.put(r, false); aerr != nil {
			return aerr
		}
		if aerr := a.recordBootEvent(name, n, old.GetStatus().GetPhase(), r.GetStatus()); aerr != nil {
			return aerr
		}
	}
	return nil
}

// refreshMachine recomputes m's milestones from its Server srv and the
// Server's Revisions, and stores m when they changed:
//
//	Provisioned  the Server booted a Revision rendered for m
//	Joined       standalone (no cluster): as soon as Provisioned; workers
//	             once a Node with providerID roost://<server> is registered
//	             (status.node_name, observed by the leader)
//	Ready        Provisioned, Joined, the agent's boot assessment holds,
//	             the Server is reachable and, for workers, the Node is Ready
func (a *applier) refreshMachine(old *roostv1.Machine, srv *roostv1.Server, now *timestamppb.Timestamp) *apierror.Error {
	if old == nil || srv == nil {
		return nil
	}
	return a.refreshMachineFrom(old, proto.Clone(old).(*roostv1.Machine), srv, now)
}

// refreshMachineFrom is refreshMachine over m, a changed clone of the
// stored old; it stores m when it differs from old.
func (a *applier) refreshMachineFrom(old, m *roostv1.Machine, srv *roostv1.Server, now *timestamppb.Timestamp) *apierror.Error {
	revs, err := revisionsOf(a.txn, srv.GetMetadata().GetName())
	if err != nil {
		return internal(err)
	}
	if m.Status == nil {
		m.Status = &roostv1.MachineStatus{}
	}
	st := m.Status
	name := m.GetMetadata().GetName()
	booted := srv.GetStatus().GetBootedRevision()
	var desired, bootedRev *roostv1.Revision
	st.Revision, st.BootedRevision, st.FailedRevision = 0, 0, 0
	for _, r := range revs {
		if r.GetSpec().GetMachine() != name {
			continue
		}
		desired = r
		if r.GetSpec().GetNumber() == booted {
			bootedRev = r
		}
		if revisionPhase(r) == RevisionFailed {
			st.FailedRevision = r.GetSpec().GetNumber()
		}
	}
	if desired != nil {
		st.Revision = desired.GetSpec().GetNumber()
	}
	if bootedRev != nil {
		st.BootedRevision = booted
	}
	conds := st.Conditions
	provisioned := bootedRev != nil
	switch {
	case provisioned:
		conds = setCondition(conds, MachineProvisioned, "True", "Booted", fmt.Sprintf("Server %s booted Revision %d", srv.GetMetadata().GetName(), booted), now)
	case desired == nil:
		if c := findCondition(conds, MachineProvisioned); c == nil || c.GetStatus() == "True" {
			conds = setCondition(conds, MachineProvisioned, "False", ReasonWaitingForRevision, "no Revision rendered yet", now)
		}
	case revisionPhase(desired) == RevisionFailed:
		conds = setCondition(conds, MachineProvisioned, "False", "RevisionFailed",
			fmt.Sprintf("Revision %d failed: %s", desired.GetSpec().GetNumber(), desired.GetStatus().GetReason()), now)
	default:
		reason, msg := "WaitingForBoot", fmt.Sprintf("Revision %d is rendered; the agent installs, stages and reboots into it", desired.GetSpec().GetNumber())
		if c := agentBlocker(srv); c != nil {
			reason, msg = c.GetReason(), fmt.Sprintf("Revision %d: %s: %s", desired.GetSpec().GetNumber(), c.GetType(), c.GetMessage())
		}
		conds = setCondition(conds, MachineProvisioned, "False", reason, msg, now)
	}
	joined := false
	switch {
	case st.GetCluster() != "" && st.GetNodeName() != "":
		joined = true
		conds = setCondition(conds, MachineJoined, "True", "NodeRegistered", fmt.Sprintf("Node %s is registered with Cluster %s", st.GetNodeName(), st.GetCluster()), now)
	case st.GetCluster() != "":
		conds = setCondition(conds, MachineJoined, "False", "WaitingForNode", fmt.Sprintf("no Node with providerID roost://%s is registered with Cluster %s", srv.GetMetadata().GetName(), st.GetCluster()), now)
	case provisioned:
		joined = true
		conds = setCondition(conds, MachineJoined, "True", "Standalone", "joins no cluster", now)
	default:
		conds = setCondition(conds, MachineJoined, "False", ReasonWaitingForProvision, "standalone Machine: joins no cluster; holds once provisioned", now)
	}
	healthy := findCondition(srv.GetStatus().GetConditions(), AgentHealthy)
	switch {
	case !provisioned || !joined:
		conds = setCondition(conds, MachineReady, "False", ReasonWaitingForMilestone, "waiting for Provisioned and Joined", now)
	case srv.GetStatus().GetReachability() == Unreachable:
		conds = setCondition(conds, MachineReady, "False", "ServerUnreachable", "the agent stopped sending heartbeats", now)
	case st.GetCluster() != "" && !conditionTrue(conds, MachineNodeReady):
		msg := fmt.Sprintf("Node %s is not Ready", st.GetNodeName())
		if c := findCondition(conds, MachineNodeReady); c != nil && c.GetMessage() != "" {
			msg += ": " + c.GetMessage()
		}
		conds = setCondition(conds, MachineReady, "False", "NodeNotReady", msg, now)
	case healthy == nil || healthy.GetStatus() != "True":
		msg := "the agent has not assessed the boot yet"
		if healthy != nil {
			msg = healthy.GetMessage()
		}
		conds = setCondition(conds, MachineReady, "False", "Unhealthy", msg, now)
	default:
		msg := fmt.Sprintf("running Revision %d", booted)
		if st.Revision != booted {
			if st.FailedRevision == st.Revision {
				msg += fmt.Sprintf("; Revision %d failed", st.Revision)
			} else {
				msg += fmt.Sprintf("; Revision %d pending", st.Revision)
			}
		}
		conds = setCondition(conds, MachineReady, "True", "Healthy", msg, now)
	}
	st.Conditions = conds
	st.Phase = MachinePhase(m)
	if proto.Equal(m, old) {
		return nil
	}
	a.touch(m.Metadata, false)
	return a.put(m, false)
}

// agentBlocker returns the first agent condition on the way to a boot that
// does not hold (Installed, Staged, LeaseGranted), or nil.
func agentBlocker(srv *roostv1.Server) *roostv1.Condition {
	for _, t := range []string{"Installed", "Staged", "LeaseGranted"} {
		if c := findCondition(srv.GetStatus().GetConditions(), t); c != nil && c.GetStatus() == "False" {
			return c
		}
	}
	return nil
}

// MachineOf returns the Machine holding Server server (a clone), or nil.
func (f *FSM) MachineOf(server string) *roostv1.Machine {
	raw, err := f.db.Load().Txn(false).First(kindMachine, indexRefs, refKey(kindServer, server))
	if err != nil || raw == nil {
		return nil
	}
	return proto.Clone(raw.(*roostv1.Object).GetMachine()).(*roostv1.Machine)
}
