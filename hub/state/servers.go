package state

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Server states (ServerStatus.state).
const (
	ServerEnrolling       = "Enrolling"
	ServerPendingApproval = "PendingApproval"
	ServerAvailable       = "Available"
	ServerClaimed         = "Claimed"
	ServerCleaning        = "Cleaning"
	ServerDecommissioned  = "Decommissioned"
)

// Reachability values (ServerStatus.reachability).
const (
	Reachable   = "Reachable"
	Unreachable = "Unreachable"
)

// Condition types the hub owns on Servers; agents' conditions of these
// types are ignored.
const (
	ConditionDuplicateUUID = "DuplicateUUID"
	ConditionApproved      = "Approved"
)

const kindServer = "Server"

func (a *applier) getServer(name string) (*roostv1.Server, *apierror.Error) {
	raw, err := a.txn.First(kindServer, indexID, name)
	if err != nil {
		return nil, internal(err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*roostv1.Object).GetServer(), nil
}

// enrollServer checks the token and creates or updates the Server, all in
// one step. The one result names the Server.
func (a *applier) enrollServer(c *roostv1.EnrollServer) ([]*roostv1.ApplyResult, *apierror.Error) {
	now, aerr := a.now()
	if aerr != nil {
		return nil, aerr
	}
	tok, aerr := a.getToken(c.GetTokenName())
	if aerr != nil {
		return nil, aerr
	}
	if aerr := CheckEnrollmentToken(tok, c.GetTokenName(), c.GetSecretSha256(), now); aerr != nil {
		return nil, aerr
	}
	name, uuid, fp, macs := baseServerName(c.GetIdentity())
	if uuid == "" && len(macs) == 0 {
		return nil, apierror.Invalid("the server has no usable system UUID and no permanent MAC addresses",
			apierror.Violation{Field: "identity", Message: "needs a usable systemUuid or at least one permanent MAC"})
	}
	old, aerr := a.getServer(name)
	if aerr != nil {
		return nil, aerr
	}
	// registered: the record is one an operator registered with its BMC
	// before it enrolled (under this name, or matched below).
	registered := a.rules >= RulesBMC && old.GetStatus().GetState() == ServerRegistered
	if old == nil {
		// A Server an operator registered with its BMC before it booted
		// is this one when its MACs or the BMC's system UUID match.
		reg, aerr := a.registeredMatch(normalizedUUID(c.GetIdentity().GetSystemUuid()), fp, macs)
		if aerr != nil {
			return nil, aerr
		}
		if reg != nil {
			old, name, registered = reg, reg.GetMetadata().GetName(), true
		}
	}
	var twin *roostv1.Server // the Server already holding this UUID with other MACs
	if old != nil && !registered && uuid != "" && old.GetSpec().GetMacFingerprint() != fp {
		twin = old
		name = duplicateName(uuid, fp)
		if old, aerr = a.getServer(name); aerr != nil {
			return nil, aerr
		}
	}

	created := old == nil
	var s *roostv1.Server
	if created {
		if c.GetUid() == "" {
			return nil, apierror.Invalid("a new Server needs a UID in the command", apierror.Violation{Field: "uid", Message: "is required"})
		}
		s = &roostv1.Server{ApiVersion: resource.APIVersion, Kind: kindServer, Metadata: a.newMeta(name, c.GetUid(), now),
			Spec: &roostv1.ServerSpec{}, Status: &roostv1.ServerStatus{}}
	} else {
		s = proto.Clone(old).(*roostv1.Server)
		if s.Spec == nil {
			s.Spec = &roostv1.ServerSpec{}
		}
		if s.Status == nil {
			s.Status = &roostv1.ServerStatus{}
		}
	}
	oldSpec := proto.Clone(s.Spec)
	s.Spec.SystemUuid = normalizedUUID(c.GetIdentity().GetSystemUuid())
	s.Spec.MacFingerprint = fp
	s.Spec.PermanentMacs = macs
	// A Server enrolling after its decommission starts over with its new
	// token: its pool (none if the token names none), its labels.
	restart := a.rules >= rulesDecommission && old.GetStatus().GetState() == ServerDecommissioned
	if s.Spec.Pool == "" || restart {
		s.Spec.Pool = tok.GetSpec().GetPool()
	}
	// Labels: the operator's (and earlier tokens') stay; this token's fill
	// in keys not set (or replace them on a restart); derived labels are
	// recomputed.
	labels := map[string]string{}
	for k, v := range s.GetMetadata().GetLabels() {
		if !IsDerivedLabel(k) {
			labels[k] = v
		}
	}
	for k, v := range tok.GetSpec().GetServerLabels() {
		if _, set := labels[k]; (!set || restart) && !IsDerivedLabel(k) {
			labels[k] = v
		}
	}
	maps.Copy(labels, DerivedLabels(c.GetInventory()))
	s.Metadata.Labels = labels

	st := s.Status
	fresh := created || old.GetStatus().GetState() == ServerRegistered || st.GetState() == ServerDecommissioned
	if fresh {
		st.State = ServerEnrolling
		st.StateReason = ""
		if tok.GetSpec().GetRequireApproval() {
			st.Conditions = setCondition(st.Conditions, ConditionApproved, "False", "TokenRequiresApproval",
				fmt.Sprintf("enrollment token %s requires an operator's approval (roostctl server approve %s)", tok.GetMetadata().GetName(), name), now)
		} else {
			st.Conditions = removeCondition(st.Conditions, ConditionApproved)
		}
	}
	st.AgentVersion = c.GetAgentVersion()
	st.Inventory = c.GetInventory()
	st.EnrollmentToken = tok.GetMetadata().GetName()
	st.EnrolledAt = now
	st.Reachability = Reachable
	st.LastSeen = now
	if twin != nil {
		msg := fmt.Sprintf("system UUID %s is also claimed by Server %s, which has other MAC addresses", uuid, twin.GetMetadata().GetName())
		st.Conditions = setCondition(st.Conditions, ConditionDuplicateUUID, "True", "SameUUIDOtherMACs", msg, now)
		t := proto.Clone(twin).(*roostv1.Server)
		if t.Status == nil {
			t.Status = &roostv1.ServerStatus{}
		}
		t.Status.Conditions = setCondition(t.Status.Conditions, ConditionDuplicateUUID, "True", "SameUUIDOtherMACs",
			fmt.Sprintf("system UUID %s is also claimed by Server %s, which has other MAC addresses", uuid, name), now)
		a.touch(t.Metadata, false)
		if aerr := a.put(t, false); aerr != nil {
			return nil, aerr
		}
	}
	if !created {
		a.touch(s.Metadata, !proto.Equal(oldSpec, s.Spec))
	}
	if aerr := a.put(s, created); aerr != nil {
		return nil, aerr
	}

	t := proto.Clone(tok).(*roostv1.EnrollmentToken)
	if t.Status == nil {
		t.Status = &roostv1.EnrollmentTokenStatus{}
	}
	t.Status.Uses++
	t.Status.LastUsedAt = now
	a.touch(t.Metadata, false)
	if aerr := a.put(t, false); aerr != nil {
		return nil, aerr
	}
	reason, msg := "Enrolled", "enrolled with enrollment token "+tok.GetMetadata().GetName()
	if !created {
		reason, msg = "EnrolledAgain", "enrolled again with enrollment token "+tok.GetMetadata().GetName()
	}
	if fresh && tok.GetSpec().GetRequireApproval() {
		msg += "; waiting for an operator's approval (roostctl server approve " + name + ")"
	}
	if aerr := a.recordEvent(kindServer, name, EventNormal, reason, msg, EventSourceHub); aerr != nil {
		return nil, aerr
	}
	if aerr := a.recordEvent("EnrollmentToken", tok.GetMetadata().GetName(), EventNormal, "TokenUsed",
		fmt.Sprintf("Server %s enrolled with it (use %d)", name, t.Status.Uses), EventSourceHub); aerr != nil {
		return nil, aerr
	}
	action := ActionConfigured
	if created {
		action = ActionCreated
	}
	return []*roostv1.ApplyResult{{Kind: kindServer, Name: name, Action: action}}, nil
}

// normalizedUUID is the reported UUID in lower case when well-formed
// (placeholders included: they are worth showing), else "".
func normalizedUUID(u string) string {
	if l, ok := UsableUUID(u); ok {
		return l
	}
	if uuidRE.MatchString(u) {
		return strings.ToLower(u) // uuidRE: ASCII only
	}
	return ""
}

// updateServerStatus records an agent's report.
func (a *applier) updateServerStatus(c *roostv1.UpdateServerStatus) *apierror.Error {
	now, aerr := a.now()
	if aerr != nil {
		return aerr
	}
	old, aerr := a.getServer(c.GetName())
	if aerr != nil {
		return aerr
	}
	if old == nil {
		return apierror.NotFound(kindServer, c.GetName())
	}
	if old.GetStatus().GetState() == ServerDecommissioned {
		return apierror.FailedPrecondition("Server %s is decommissioned", c.GetName())
	}
	s := proto.Clone(old).(*roostv1.Server)
	if s.Status == nil {
		s.Status = &roostv1.ServerStatus{}
	}
	st := s.Status
	if inv := c.GetInventory(); inv != nil && !proto.Equal(inv, st.GetInventory()) {
		st.Inventory = inv
		labels := map[string]string{}
		for k, v := range s.GetMetadata().GetLabels() {
			if !IsDerivedLabel(k) {
				labels[k] = v
			}
		}
		maps.Copy(labels, DerivedLabels(inv))
		s.Metadata.Labels = labels
	}
	if c.GetHasBootedRevision() {
		if a.rules >= RulesBootHealth && c.GetBootedRevision() != st.GetBootedRevision() && !c.GetHasConditions() {
			st.Conditions = removeCondition(st.GetConditions(), AgentHealthy)
		}
		st.BootedRevision = c.GetBootedRevision()
		if raw, err := a.txn.First(kindRevision, indexID, RevisionName(c.GetName(), st.BootedRevision)); err != nil {
			return internal(err)
		} else if raw != nil {
			st.ImageVersion = raw.(*roostv1.Object).GetRevision().GetSpec().GetImageVersion()
		}
	}
	if c.GetHasAppliedGeneration() {
		st.AppliedGeneration = c.GetAppliedGeneration()
	}
	if v := c.GetAgentVersion(); v != "" {
		st.AgentVersion = v
	}
	if c.GetHasConditions() {
		var next []*roostv1.Condition
		for _, cd := range st.GetConditions() {
			if a.hubCondition(cd.GetType()) {
				next = append(next, cd)
			}
		}
		for _, cd := range c.GetConditions() {
			if a.hubCondition(cd.GetType()) || cd.GetType() == "" {
				continue
			}
			next = setCondition(next, cd.GetType(), cd.GetStatus(), cd.GetReason(), cd.GetMessage(), now)
			// keep the old transition time when the status did not change
			for _, oc := range st.GetConditions() {
				if oc.GetType() == cd.GetType() && oc.GetStatus() == cd.GetStatus() {
					next[len(next)-1].LastTransitionTime = oc.GetLastTransitionTime()
				}
			}
		}
		st.Conditions = next
	}
	if r := c.GetCleaningResult(); r != nil && a.rules >= RulesCleaning {
		if aerr := a.recordCleaning(s, r, now); aerr != nil {
			return aerr
		}
	}
	if c.GetConnected() && st.GetState() == ServerEnrolling {
		if cond := findCondition(st.GetConditions(), ConditionApproved); cond != nil && cond.GetStatus() == "False" {
			st.State = ServerPendingApproval
		} else {
			st.State = ServerAvailable
		}
	}
	if proto.Equal(s, old) && !c.GetHasFailedRevisions() {
		return nil
	}
	if !proto.Equal(s, old) {
		a.touch(s.Metadata, false)
		if aerr := a.put(s, false); aerr != nil {
			return aerr
		}
	}
	return a.afterServerChange(s, c.GetFailedRevisions(), now)
}

// afterServerChange brings what depends on a Server's status up to date:
// its Revisions' phases, its Lease and its Machine's milestones.
func (a *applier) afterServerChange(s *roostv1.Server, failed []*roostv1.FailedRevision, now *timestamppb.Timestamp) *apierror.Error {
	if aerr := a.recordBoot(s, failed); aerr != nil {
		return aerr
	}
	if aerr := a.settleLease(s); aerr != nil {
		return aerr
	}
	m, aerr := a.machineOf(s.GetMetadata().GetName())
	if aerr != nil {
		return aerr
	}
	return a.refreshMachine(m, s, now)
}

// hubCondition says whether the hub owns Server conditions of type t (an
// agent's report neither replaces nor removes them): DuplicateUUID,
// Approved and Cleaned, and from RulesBMC on the BMC controller's
// BMCReachable and BMCOperation.
func (a *applier) hubCondition(t string) bool {
	switch t {
	case ConditionDuplicateUUID, ConditionApproved, ConditionCleaned:
		return true
	case ConditionBMCReachable, ConditionBMCOperation:
		return a.rules >= RulesBMC
	}
	return false
}

// setServerReachability records liveness transitions. Unknown Servers are
// skipped (deleted meanwhile).
func (a *applier) setServerReachability(c *roostv1.SetServerReachability) *apierror.Error {
	for _, ch := range c.GetChanges() {
		old, aerr := a.getServer(ch.GetName())
		if aerr != nil {
			return aerr
		}
		if old == nil || a.rules >= rulesDecommission && old.GetStatus().GetState() == ServerDecommissioned {
			continue
		}
		s := proto.Clone(old).(*roostv1.Server)
		if s.Status == nil {
			s.Status = &roostv1.ServerStatus{}
		}
		if ch.GetReachable() {
			s.Status.Reachability = Reachable
		} else {
			s.Status.Reachability = Unreachable
		}
		if ch.GetLastSeen() != nil {
			s.Status.LastSeen = ch.GetLastSeen()
		}
		if proto.Equal(s, old) {
			continue
		}
		a.touch(s.Metadata, false)
		if aerr := a.put(s, false); aerr != nil {
			return aerr
		}
		m, aerr := a.machineOf(s.GetMetadata().GetName())
		if aerr != nil {
			return aerr
		}
		if aerr := a.refreshMachine(m, s, a.time); aerr != nil {
			return aerr
		}
		if was := old.GetStatus().GetReachability(); was != s.Status.Reachability && was != "" {
			typ, reason, msg := EventNormal, "Reachable", "its agent is connected again"
			if !ch.GetReachable() {
				typ, reason, msg = EventWarning, "Unreachable", "its agent stopped answering"
				if ls := ch.GetLastSeen(); ls != nil {
					msg += "; last seen " + ls.AsTime().UTC().Format(time.RFC3339)
				}
			}
			if aerr := a.recordEvent(kindServer, s.GetMetadata().GetName(), typ, reason, msg, EventSourceHub); aerr != nil {
				return aerr
			}
		}
	}
	return nil
}

// modifyServer applies an operator's change. The one result names the
// Server ("configured" or "unchanged").
func (a *applier) modifyServer(c *roostv1.ModifyServer) ([]*roostv1.ApplyResult, *apierror.Error) {
	now, aerr := a.now()
	if aerr != nil {
		return nil, aerr
	}
	old, aerr := a.getServer(c.GetName())
	if aerr != nil {
		return nil, aerr
	}
	if old == nil {
		return nil, apierror.NotFound(kindServer, c.GetName())
	}
	s := proto.Clone(old).(*roostv1.Server)
	if s.Spec == nil {
		s.Spec = &roostv1.ServerSpec{}
	}
	if s.Status == nil {
		s.Status = &roostv1.ServerStatus{}
	}
	if s.Metadata.Labels == nil {
		s.Metadata.Labels = map[string]string{}
	}
	st := s.Status
	name := c.GetName()
	specChanged := false
	switch c.GetAction() {
	case roostv1.ServerAction_SERVER_ACTION_APPROVE:
		if st.GetState() == ServerDecommissioned {
			return nil, apierror.FailedPrecondition("Server %s is decommissioned; it must enroll again before it can be approved", name)
		}
		st.Conditions = setCondition(st.Conditions, ConditionApproved, "True", "ApprovedByOperator", "approved by an operator", now)
		if st.GetState() == ServerPendingApproval {
			st.State = ServerAvailable
		}
	case roostv1.ServerAction_SERVER_ACTION_DENY, roostv1.ServerAction_SERVER_ACTION_DECOMMISSION:
		if st.GetState() == ServerClaimed {
			then := "decommission it"
			if c.GetAction() == roostv1.ServerAction_SERVER_ACTION_DENY {
				then = "deny it"
			}
			m, aerr := a.machineOf(name)
			if aerr != nil {
				return nil, aerr
			}
			var pool *roostv1.Pool
			if p := m.GetSpec().GetPool(); p != "" {
				if pool, aerr = a.getPool(p); aerr != nil {
					return nil, aerr
				}
			}
			return nil, apierror.FailedPrecondition("%s", ClaimedRefusal(s, m, pool, then))
		}
		reason := c.GetReason()
		if c.GetAction() == roostv1.ServerAction_SERVER_ACTION_DENY {
			if reason == "" {
				reason = "denied by an operator"
			}
			st.Conditions = setCondition(st.Conditions, ConditionApproved, "False", "DeniedByOperator", reason, now)
		} else if reason == "" {
			reason = "decommissioned by an operator"
		}
		if c.GetAction() == roostv1.ServerAction_SERVER_ACTION_DECOMMISSION && a.rules >= RulesCleaning &&
			st.GetState() != ServerDecommissioned {
			done, aerr := a.decommissionUnclaimed(s, reason, now)
			if aerr != nil {
				return nil, aerr
			}
			if !done {
				break // cleaned first
			}
		} else {
			st.State = ServerDecommissioned
			st.StateReason = reason
		}
		if a.rules >= rulesDecommission {
			// Out of the fleet: no pool to return to, and no liveness
			// (its agent is refused) until it enrolls again.
			s.Spec.Pool = ""
			st.Reachability = ""
		}
		if st.GetState() == ServerDecommissioned {
			a.powerOffDecommissioned(s, c.GetOperationId(), now)
		}
	case roostv1.ServerAction_SERVER_ACTION_CLEAN:
		if a.rules < RulesCleaning {
			return nil, apierror.Invalid(fmt.Sprintf("unknown server action %v", c.GetAction()), apierror.Violation{Field: "action", Message: "needs apply rules 11 (every hub member upgraded)"})
		}
		if aerr := a.cleanServer(s, now); aerr != nil {
			return nil, aerr
		}
	case roostv1.ServerAction_SERVER_ACTION_POWER, roostv1.ServerAction_SERVER_ACTION_BOOT_ONCE, roostv1.ServerAction_SERVER_ACTION_PROVISION:
		if aerr := a.requestBMCOperation(s, c); aerr != nil {
			return nil, aerr
		}
	case roostv1.ServerAction_SERVER_ACTION_CORDON, roostv1.ServerAction_SERVER_ACTION_UNCORDON:
		want := c.GetAction() == roostv1.ServerAction_SERVER_ACTION_CORDON
		specChanged = s.Spec.Unschedulable != want
		s.Spec.Unschedulable = want
	case roostv1.ServerAction_SERVER_ACTION_LABEL:
		var bad []apierror.Violation
		for _, k := range slices.Sorted(maps.Keys(c.GetSetLabels())) {
			if IsDerivedLabel(k) {
				bad = append(bad, apierror.Violation{Field: "setLabels[" + k + "]", Message: "is computed by the hub from the inventory and cannot be set"})
			}
			s.Metadata.Labels[k] = c.GetSetLabels()[k]
		}
		for _, k := range c.GetRemoveLabels() {
			if IsDerivedLabel(k) {
				bad = append(bad, apierror.Violation{Field: "removeLabels", Message: fmt.Sprintf("%s is computed by the hub from the inventory and cannot be removed", k)})
			}
			delete(s.Metadata.Labels, k)
		}
		if len(bad) > 0 {
			return nil, apierror.Invalid("invalid labels", bad...)
		}
	default:
		return nil, apierror.Invalid(fmt.Sprintf("unknown server action %v", c.GetAction()), apierror.Violation{Field: "action", Message: "is required"})
	}
	if proto.Equal(s, old) {
		return []*roostv1.ApplyResult{{Kind: kindServer, Name: name, Action: ActionUnchanged}}, nil
	}
	a.touch(s.Metadata, specChanged)
	if aerr := a.put(s, false); aerr != nil {
		return nil, aerr
	}
	return []*roostv1.ApplyResult{{Kind: kindServer, Name: name, Action: ActionConfigured}}, nil
}
