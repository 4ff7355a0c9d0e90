package state

import (
	"crypto/subtle"
	"fmt"
	"maps"
	"regexp"
	"sort"
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

// TokenNameRE is the form of an EnrollmentToken's name: the 6-character id
// of a kubeadm-style token "<id>.<secret>".
var TokenNameRE = regexp.MustCompile(`^[a-z0-9]{6}$`)

const (
	kindServer = "Server"
	kindToken  = "EnrollmentToken"
)

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

func (a *applier) getToken(name string) (*roostv1.EnrollmentToken, *apierror.Error) {
	raw, err := a.txn.First(kindToken, indexID, name)
	if err != nil {
		return nil, internal(err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*roostv1.Object).GetEnrollmentToken(), nil
}

// put stores r (a fresh clone, never a stored message) and records a watch
// event.
func (a *applier) put(r resource.Resource, created bool) *apierror.Error {
	obj := resource.Wrap(r)
	if err := a.txn.Insert(resource.KindOf(r).Name, obj); err != nil {
		return internal(err)
	}
	typ := roostv1.WatchEvent_TYPE_MODIFIED
	if created {
		typ = roostv1.WatchEvent_TYPE_ADDED
	}
	a.events = append(a.events, newEvent(typ, resource.KindOf(r).Name, obj, a.index))
	return nil
}

// touch updates the hub-set metadata of a changed object.
func (a *applier) touch(md *roostv1.ObjectMeta, specChanged bool) {
	md.ModifyIndex = a.index
	if specChanged {
		md.Generation++
	}
}

// newMeta is the metadata of an object the FSM creates.
func (a *applier) newMeta(name, uid string, now *timestamppb.Timestamp) *roostv1.ObjectMeta {
	return &roostv1.ObjectMeta{Name: name, Uid: uid, Generation: 1, CreateIndex: a.index, ModifyIndex: a.index, CreationTimestamp: now}
}

// putEnrollmentToken creates an EnrollmentToken.
func (a *applier) putEnrollmentToken(c *roostv1.PutEnrollmentToken) *apierror.Error {
	now, aerr := a.now()
	if aerr != nil {
		return aerr
	}
	in := c.GetToken()
	name := in.GetMetadata().GetName()
	var bad []apierror.Violation
	if !TokenNameRE.MatchString(name) {
		bad = append(bad, apierror.Violation{Field: "token.metadata.name", Message: fmt.Sprintf("%q is not 6 lower-case letters or digits", name)})
	}
	if len(in.GetSpec().GetSecretSha256()) != 64 {
		bad = append(bad, apierror.Violation{Field: "token.spec.secretSha256", Message: "must be 64 hex digits"})
	}
	if in.GetSpec().GetMaxUses() < 0 {
		bad = append(bad, apierror.Violation{Field: "token.spec.maxUses", Message: "must be ≥ 0"})
	}
	if c.GetUid() == "" {
		bad = append(bad, apierror.Violation{Field: "uid", Message: "is required"})
	}
	if len(bad) > 0 {
		return apierror.Invalid("invalid enrollment token", bad...)
	}
	old, aerr := a.getToken(name)
	if aerr != nil {
		return aerr
	}
	if old != nil {
		return apierror.AlreadyExists(kindToken, name)
	}
	if p := in.GetSpec().GetPool(); p != "" {
		ok, err := exists(a.txn, "Pool", p)
		if err != nil {
			return internal(err)
		}
		if !ok {
			return apierror.FailedPreconditionFields(fmt.Sprintf("Pool %q does not exist", p),
				apierror.Violation{Field: "token.spec.pool", Message: fmt.Sprintf("Pool %q does not exist", p)})
		}
	}
	t := &roostv1.EnrollmentToken{
		ApiVersion: resource.APIVersion, Kind: kindToken,
		Metadata: a.newMeta(name, c.GetUid(), now),
		Spec:     proto.Clone(in.GetSpec()).(*roostv1.EnrollmentTokenSpec),
		Status:   &roostv1.EnrollmentTokenStatus{},
	}
	if t.Spec == nil {
		t.Spec = &roostv1.EnrollmentTokenSpec{}
	}
	t.Metadata.Labels = in.GetMetadata().GetLabels()
	return a.put(t, true)
}

// revokeEnrollmentToken marks a token revoked (idempotent).
func (a *applier) revokeEnrollmentToken(c *roostv1.RevokeEnrollmentToken) *apierror.Error {
	now, aerr := a.now()
	if aerr != nil {
		return aerr
	}
	old, aerr := a.getToken(c.GetName())
	if aerr != nil {
		return aerr
	}
	if old == nil {
		return apierror.NotFound(kindToken, c.GetName())
	}
	if old.GetStatus().GetRevoked() {
		return nil
	}
	t := proto.Clone(old).(*roostv1.EnrollmentToken)
	if t.Status == nil {
		t.Status = &roostv1.EnrollmentTokenStatus{}
	}
	t.Status.Revoked = true
	t.Status.RevokedAt = now
	a.touch(t.Metadata, false)
	return a.put(t, false)
}

func formatTime(ts *timestamppb.Timestamp) string {
	return ts.AsTime().UTC().Format(time.RFC3339)
}

// EnrollmentTokenRefused is the one refusal message (PermissionDenied) for
// an enrollment token whose name is unknown or whose secret is wrong: a
// caller cannot tell the two apart, so it cannot probe for token names.
const EnrollmentTokenRefused = "enrollment token refused: unknown token or wrong secret " +
	"(give the agent the whole token 'roostctl token create' printed; 'roostctl token list' shows the tokens that exist)"

// CheckEnrollmentToken applies the token rules of EnrollServer to t (nil:
// no token named name) at now: nil when secretSHA256 (hex sha256 of the
// whole secret) matches and the token is neither revoked, expired nor used
// up; otherwise PermissionDenied, with EnrollmentTokenRefused for an
// unknown name or a wrong secret. Members call it before proposing an
// enrollment (see FSM.EnrollmentToken); the FSM calls it again, where
// concurrent uses race.
func CheckEnrollmentToken(t *roostv1.EnrollmentToken, name, secretSHA256 string, now *timestamppb.Timestamp) *apierror.Error {
	if t == nil || name == "" {
		// Compare anyway, so an unknown name costs the time of a wrong secret.
		subtle.ConstantTimeCompare(make([]byte, 64), []byte(secretSHA256))
		return apierror.PermissionDenied("%s", EnrollmentTokenRefused)
	}
	if subtle.ConstantTimeCompare([]byte(t.GetSpec().GetSecretSha256()), []byte(secretSHA256)) != 1 {
		return apierror.PermissionDenied("%s", EnrollmentTokenRefused)
	}
	if t.GetStatus().GetRevoked() {
		if at := t.GetStatus().GetRevokedAt(); at != nil {
			return apierror.PermissionDenied("enrollment token %s revoked at %s", name, formatTime(at))
		}
		return apierror.PermissionDenied("enrollment token %s revoked", name)
	}
	if exp := t.GetSpec().GetExpiresAt(); exp != nil && !now.AsTime().Before(exp.AsTime()) {
		return apierror.PermissionDenied("enrollment token %s expired at %s", name, formatTime(exp))
	}
	if m := t.GetSpec().GetMaxUses(); m > 0 && t.GetStatus().GetUses() >= m {
		return apierror.PermissionDenied("enrollment token %s used up (%d/%d uses)", name, t.GetStatus().GetUses(), m)
	}
	return nil
}

// EnrollmentToken returns the stored EnrollmentToken named name without
// copying it (callers must not modify it), or nil when there is none.
func (f *FSM) EnrollmentToken(name string) *roostv1.EnrollmentToken {
	raw, err := f.db.Load().Txn(false).First(kindToken, indexID, name)
	if err != nil || raw == nil {
		return nil
	}
	return raw.(*roostv1.Object).GetEnrollmentToken()
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
	var twin *roostv1.Server // the Server already holding this UUID with other MACs
	if old != nil && uuid != "" && old.GetSpec().GetMacFingerprint() != fp {
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
	fresh := created || st.GetState() == ServerDecommissioned
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
		return toLower(u)
	}
	return ""
}

func toLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
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
			if hubCondition(cd.GetType()) {
				next = append(next, cd)
			}
		}
		for _, cd := range c.GetConditions() {
			if hubCondition(cd.GetType()) || cd.GetType() == "" {
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

func hubCondition(t string) bool { return t == ConditionDuplicateUUID || t == ConditionApproved }

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
		st.State = ServerDecommissioned
		st.StateReason = reason
		if a.rules >= rulesDecommission {
			// Out of the fleet: no pool to return to, and no liveness
			// (its agent is refused) until it enrolls again.
			s.Spec.Pool = ""
			st.Reachability = ""
		}
	case roostv1.ServerAction_SERVER_ACTION_CORDON, roostv1.ServerAction_SERVER_ACTION_UNCORDON:
		want := c.GetAction() == roostv1.ServerAction_SERVER_ACTION_CORDON
		specChanged = s.Spec.Unschedulable != want
		s.Spec.Unschedulable = want
	case roostv1.ServerAction_SERVER_ACTION_LABEL:
		var bad []apierror.Violation
		for _, k := range sortedStrings(c.GetSetLabels()) {
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

func sortedStrings(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func findCondition(conds []*roostv1.Condition, typ string) *roostv1.Condition {
	for _, c := range conds {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}

// setCondition sets (or adds) a condition; its transition time moves to
// now only when the status changes.
func setCondition(conds []*roostv1.Condition, typ, status, reason, msg string, now *timestamppb.Timestamp) []*roostv1.Condition {
	for i, c := range conds {
		if c.GetType() != typ {
			continue
		}
		n := &roostv1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: c.GetLastTransitionTime()}
		if c.GetStatus() != status {
			n.LastTransitionTime = now
		}
		out := append([]*roostv1.Condition(nil), conds...)
		out[i] = n
		return out
	}
	return append(append([]*roostv1.Condition(nil), conds...), &roostv1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: now})
}

// FindCondition returns the condition of type typ in conds, or nil; for
// controllers outside this package that read conditions.
func FindCondition(conds []*roostv1.Condition, typ string) *roostv1.Condition {
	return findCondition(conds, typ)
}

// conditionTrue says whether conds has typ with status "True".
func conditionTrue(conds []*roostv1.Condition, typ string) bool {
	c := findCondition(conds, typ)
	return c != nil && c.GetStatus() == "True"
}

func removeCondition(conds []*roostv1.Condition, typ string) []*roostv1.Condition {
	var out []*roostv1.Condition
	for _, c := range conds {
		if c.GetType() != typ {
			out = append(out, c)
		}
	}
	return out
}
