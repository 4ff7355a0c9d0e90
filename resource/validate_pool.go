package resource

import (
	"strconv"
	"strings"
	"time"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// MaxReadyTimeout bounds a Pool's spec.rollout.readyTimeout: the reboot
// Lease lasts that long, and a Machine that fails to come up holds its
// Lease (and a place under maxUnavailable) until then.
const MaxReadyTimeout = 24 * time.Hour

// validatePool: cluster is optional (a Pool without one holds standalone
// hosts: Joined holds once provisioned); references are DNS-1123 labels;
// maintenance windows are not repeated; imageVersion, when set, is a
// valid version (ValidateImageVersion) and wins over imageChannel (a pin
// over the channel the pool returns to when unpinned); replicas and
// failureBudget are ≥ 0; maxUnavailable is an integer ≥ 1 or a percentage
// from 1% to 100%; durations are ≥ 0, readyTimeout at most
// MaxReadyTimeout (0 means the default, 30m); remediation (checkRemediation)
// and safety are set only with replicas, within their bounds.
func validatePool(e *violations, s *roostv1.PoolSpec) {
	checkRef(e, "spec.cluster", s.GetCluster())
	checkRef(e, "spec.machineClass", s.GetMachineClass())
	checkRef(e, "spec.networkProfile", s.GetNetworkProfile())
	seen := map[string]int{}
	for i, w := range s.GetMaintenanceWindows() {
		f := joinIndex("spec.maintenanceWindows", i)
		if w == "" {
			e.add(f, "is empty", "name a MaintenanceWindow or remove the item")
			continue
		}
		checkName(e, f, w)
		if j, dup := seen[w]; dup {
			e.addf(f, "remove one of them", "window %q is listed twice (also at index %d)", w, j)
		} else {
			seen[w] = i
		}
	}
	checkRef(e, "spec.imageChannel", s.GetImageChannel())
	if v := s.GetImageVersion(); v != "" {
		e.list = append(e.list, ValidateImageVersion("spec.imageVersion", v)...)
	}
	if s != nil && s.Replicas != nil && s.GetReplicas() < 0 {
		e.addf("spec.replicas", "leave replicas out for explicit membership", "must be ≥ 0, got %d", s.GetReplicas())
	}
	checkLabels(e, "spec.nodeLabels", s.GetNodeLabels())
	ro := s.GetRollout()
	if mu := ro.GetMaxUnavailable(); mu != nil {
		const f = "spec.rollout.maxUnavailable"
		switch v := mu.GetValue().(type) {
		case *roostv1.IntOrString_IntVal:
			if v.IntVal < 1 {
				e.addf(f, `a rollout needs at least one Machine down at a time; or use a percentage such as "25%"`, "must be ≥ 1, got %d", v.IntVal)
			}
		case *roostv1.IntOrString_StrVal:
			checkPercent(e, f, v.StrVal)
		default:
			e.add(f, "is empty", `write an integer such as 1 or a percentage such as "25%"`)
		}
	}
	checkDuration(e, "spec.rollout.settle", ro.GetSettle())
	checkDuration(e, "spec.rollout.readyTimeout", ro.GetReadyTimeout())
	if rt := ro.GetReadyTimeout(); rt.CheckValid() == nil && rt.AsDuration() > MaxReadyTimeout {
		e.addf("spec.rollout.readyTimeout", `the time a rebooted Machine has to become Ready; the default is "30m"`,
			"must be at most %s, got %s", durationText(MaxReadyTimeout), durationText(rt.AsDuration()))
	}
	if ro.GetFailureBudget() < 0 {
		e.addf("spec.rollout.failureBudget", "0 halts the pool on the first failure", "must be ≥ 0, got %d", ro.GetFailureBudget())
	}
	checkRemediation(e, s)
}

// MinUnhealthyTimeout bounds a Pool's spec.remediation.unhealthyTimeout
// from below: shorter, a Server missing a few heartbeats (a switch
// reload) would be replaced.
const MinUnhealthyTimeout = time.Minute

// checkRemediation checks spec.remediation and spec.safety:
// unhealthyTimeout 0 (default 10m) or at least MinUnhealthyTimeout;
// onFailedRevision "", "hold" or "replace"; maxInFlight ≥ 0 (0: no
// replacement); remediation only on a Pool with replicas (a Pool of
// explicit members has no spare claim to make); maxUnhealthyPercent from
// 1 to 100.
func checkRemediation(e *violations, s *roostv1.PoolSpec) {
	rem := s.GetRemediation()
	if rem != nil && s.Replicas == nil {
		e.add("spec.remediation", "applies only to a Pool with replicas", "set spec.replicas, or remove spec.remediation: an operator replaces explicit members")
	}
	const ut = "spec.remediation.unhealthyTimeout"
	checkDuration(e, ut, rem.GetUnhealthyTimeout())
	if d := rem.GetUnhealthyTimeout(); d.CheckValid() == nil && d.AsDuration() > 0 && d.AsDuration() < MinUnhealthyTimeout {
		e.addf(ut, `how long a Server may be Unreachable before its Machine is replaced; the default is "10m"`,
			"must be at least %s, got %s", durationText(MinUnhealthyTimeout), durationText(d.AsDuration()))
	}
	switch v := rem.GetOnFailedRevision(); v {
	case "", "hold", "replace":
	default:
		e.addf("spec.remediation.onFailedRevision", `"hold" keeps the Machine on its previous Revision (the default); "replace" claims another Server`,
			`must be "hold" or "replace", got %q`, v)
	}
	if rem != nil && rem.MaxInFlight != nil && rem.GetMaxInFlight() < 0 {
		e.addf("spec.remediation.maxInFlight", "0 turns replacement off; the default is 1", "must be ≥ 0, got %d", rem.GetMaxInFlight())
	}
	if saf := s.GetSafety(); saf != nil && saf.MaxUnhealthyPercent != nil {
		if p := saf.GetMaxUnhealthyPercent(); p < 1 || p > 100 {
			e.addf("spec.safety.maxUnhealthyPercent", "the default is 40; 100 never freezes the pool for unhealthy Machines", "must be from 1 to 100, got %d", p)
		}
	}
}

// ValidateImageVersion checks an image release version given as field
// (a Pool's spec.imageVersion, the VERSION of 'roostctl pool pin'): it is
// required and follows release.ValidateVersion, the rule every release
// version follows. Whether a release has it is the hub's business.
func ValidateImageVersion(field, v string) []apierror.Violation {
	if v == "" {
		return []apierror.Violation{{Field: field, Message: "is required", Hint: `give a release's version, e.g. "2026.11.0"`}}
	}
	if err := release.ValidateVersion(v); err != nil {
		return []apierror.Violation{{Field: field, Message: err.Error()}}
	}
	return nil
}

// checkPercent checks a maxUnavailable string: "N%" with N from 1 to 100.
func checkPercent(e *violations, field, s string) {
	num, ok := strings.CutSuffix(s, "%")
	n, err := strconv.Atoi(num)
	switch {
	case !ok || err != nil || strings.HasPrefix(num, "+"):
		e.addf(field, `write 1 (unquoted) or "25%"`, "must be an integer ≥ 1 or a percentage \"N%%\", got %q", s)
	case n < 1 || n > 100:
		e.addf(field, "", "must be a percentage from 1%% to 100%%, got %q", s)
	}
}
