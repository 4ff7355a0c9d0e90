package state

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// PoolReplicaFailure is the Pool condition the pool controller sets, as a
// ReplicaSet's: True while the Pool has fewer Machines than spec.replicas
// and cannot claim more (the message says why), absent otherwise.
const PoolReplicaFailure = "ReplicaFailure"

// PoolFrozen is the Pool condition the safety controller sets (Gardener
// MCM's frozen MachineSet): True while too many of the Pool's Machines are
// unhealthy at once, its Cluster's API is unreachable, or it holds more
// Machines than its replicas; no replacement starts and no reboot is
// admitted meanwhile. False (with the reason it cleared) once it holds no
// more.
const PoolFrozen = "Frozen"

// PoolRemediating is the Pool condition the remediation controller sets:
// True while Machines of the Pool are being replaced, the message naming
// each and why; absent otherwise.
const PoolRemediating = "Remediating"

// MachineRemediating is the Machine condition the remediation controller
// sets on a failed Machine it replaces (a Cluster API MachineHealthCheck's
// remediation): True with reason ReasonUnreachable or
// ReasonRevisionFailed. Such a Machine no longer counts toward its Pool's
// replicas or rollout; it is released once its Server is reachable and
// the Pool has its replicas Ready.
const MachineRemediating = "Remediating"

// Reasons of PoolFrozen and MachineRemediating.
const (
	ReasonTooManyUnhealthy   = "TooManyUnhealthy"
	ReasonClusterUnreachable = "ClusterUnreachable"
	ReasonOverReplicated     = "OverReplicated"
	ReasonHealthy            = "Healthy"
	ReasonUnreachable        = "Unreachable"
	ReasonRevisionFailed     = "RevisionFailed"
)

// poolConditionAllowed says whether a controller may set or clear Pool
// condition typ under rules.
func poolConditionAllowed(typ string, rules uint32) bool {
	return typ == PoolReplicaFailure || rules >= RulesRemediation && (typ == PoolFrozen || typ == PoolRemediating)
}

// Reasons of PoolReplicaFailure.
const (
	ReasonNoMatchingServers    = "NoMatchingServers"
	ReasonInvalidMachineClass  = "InvalidMachineClass"
	ReasonMachineClassNotFound = "MachineClassNotFound"
)

// setConditions applies a leader controller's SetConditions (see the
// proto): a Pool's ReplicaFailure, or the message of a Machine's
// Provisioned condition while it waits for a Revision. A Machine that no
// longer waits for a Revision is left alone (the controller saw an older
// state). Errors: InvalidArgument (another kind or condition type),
// NotFound (no such object).
func (a *applier) setConditions(c *roostv1.SetConditions) *apierror.Error {
	now, aerr := a.now()
	if aerr != nil {
		return aerr
	}
	invalid := func(field, format string, args ...any) *apierror.Error {
		return apierror.Invalid("invalid conditions", apierror.Violation{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	switch c.GetKind() {
	case kindPool:
		allowed := PoolReplicaFailure
		if a.rules >= RulesRemediation {
			allowed = strings.Join([]string{PoolReplicaFailure, PoolFrozen, PoolRemediating}, ", ")
		}
		for i, cond := range c.GetSet() {
			if !poolConditionAllowed(cond.GetType(), a.rules) {
				return invalid(fmt.Sprintf("set[%d].type", i), "must be %s for a Pool, got %q", allowed, cond.GetType())
			}
		}
		for i, t := range c.GetClear() {
			if !poolConditionAllowed(t, a.rules) {
				return invalid(fmt.Sprintf("clear[%d]", i), "must be %s for a Pool, got %q", allowed, t)
			}
		}
		old, aerr := a.getPool(c.GetName())
		if aerr != nil {
			return aerr
		}
		if old == nil {
			return apierror.NotFound(kindPool, c.GetName())
		}
		p := proto.Clone(old).(*roostv1.Pool)
		if p.Status == nil {
			p.Status = &roostv1.PoolStatus{}
		}
		p.Status.Conditions = applyConditions(p.Status.Conditions, c, now)
		if proto.Equal(p, old) {
			return nil
		}
		a.touch(p.Metadata, false)
		if aerr := a.put(p, false); aerr != nil {
			return aerr
		}
		return a.recordConditionEvent(kindPool, c.GetName(), PoolReplicaFailure, old.GetStatus().GetConditions(), p.GetStatus().GetConditions())
	case kindMachine:
		if a.rules >= RulesRemediation && isRemediating(c) {
			return a.setMachineRemediating(c, now)
		}
		if len(c.GetClear()) > 0 {
			return invalid("clear", "must be empty for a Machine")
		}
		for i, cond := range c.GetSet() {
			if cond.GetType() != MachineProvisioned || cond.GetStatus() != "False" || cond.GetReason() != ReasonWaitingForRevision {
				return invalid(fmt.Sprintf("set[%d]", i), "a Machine takes only %s=False with reason %s, got %s=%s (%s)",
					MachineProvisioned, ReasonWaitingForRevision, cond.GetType(), cond.GetStatus(), cond.GetReason())
			}
		}
		old, aerr := a.getMachine(c.GetName())
		if aerr != nil {
			return aerr
		}
		if old == nil {
			return apierror.NotFound(kindMachine, c.GetName())
		}
		if cur := findCondition(old.GetStatus().GetConditions(), MachineProvisioned); cur.GetStatus() != "False" || cur.GetReason() != ReasonWaitingForRevision {
			return nil
		}
		m := proto.Clone(old).(*roostv1.Machine)
		m.Status.Conditions = applyConditions(m.Status.Conditions, c, now)
		if proto.Equal(m, old) {
			return nil
		}
		a.touch(m.Metadata, false)
		return a.put(m, false)
	}
	return invalid("kind", "must be %s or %s, got %q", kindPool, kindMachine, c.GetKind())
}

// isRemediating says whether c sets or clears only a Machine's
// Remediating condition.
func isRemediating(c *roostv1.SetConditions) bool {
	if len(c.GetSet())+len(c.GetClear()) == 0 {
		return false
	}
	for _, s := range c.GetSet() {
		if s.GetType() != MachineRemediating {
			return false
		}
	}
	for _, t := range c.GetClear() {
		if t != MachineRemediating {
			return false
		}
	}
	return true
}

// setMachineRemediating applies c, which sets or clears Machine c.name's
// Remediating condition. Errors: InvalidArgument (a status other than
// True, or no reason), NotFound.
func (a *applier) setMachineRemediating(c *roostv1.SetConditions, now *timestamppb.Timestamp) *apierror.Error {
	for i, cond := range c.GetSet() {
		if cond.GetStatus() != "True" || cond.GetReason() == "" {
			return apierror.Invalid("invalid conditions", apierror.Violation{Field: fmt.Sprintf("set[%d]", i),
				Message: fmt.Sprintf("%s must be True with a reason, got %s (%q)", MachineRemediating, cond.GetStatus(), cond.GetReason())})
		}
	}
	old, aerr := a.getMachine(c.GetName())
	if aerr != nil {
		return aerr
	}
	if old == nil {
		return apierror.NotFound(kindMachine, c.GetName())
	}
	m := proto.Clone(old).(*roostv1.Machine)
	if m.Status == nil {
		m.Status = &roostv1.MachineStatus{}
	}
	m.Status.Conditions = applyConditions(m.Status.Conditions, c, now)
	if proto.Equal(m, old) {
		return nil
	}
	a.touch(m.Metadata, false)
	return a.put(m, false)
}

// Remediating says whether Machine m is being replaced (its Remediating
// condition is True): it no longer counts toward its Pool.
func Remediating(m *roostv1.Machine) bool {
	return conditionTrue(m.GetStatus().GetConditions(), MachineRemediating)
}

// applyConditions returns conds with c's set recorded and clear removed.
func applyConditions(conds []*roostv1.Condition, c *roostv1.SetConditions, now *timestamppb.Timestamp) []*roostv1.Condition {
	for _, s := range c.GetSet() {
		conds = setCondition(conds, s.GetType(), s.GetStatus(), s.GetReason(), s.GetMessage(), now)
	}
	for _, t := range c.GetClear() {
		if slices.ContainsFunc(conds, func(x *roostv1.Condition) bool { return x.GetType() == t }) {
			conds = removeCondition(conds, t)
		}
	}
	return conds
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
