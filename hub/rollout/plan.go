package rollout

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Schedule is a Pool's maintenance windows; nil means always open.
type Schedule interface {
	// OpenAt says whether a window is open at t.
	OpenAt(t time.Time) bool
	// NextStart is the start of the next opening after t; false when
	// there is none (the rules ended).
	NextStart(t time.Time) (time.Time, bool)
}

// MachineView is what the planner needs of one Machine of a Pool.
type MachineView struct {
	Name, Server string
	// Ready is the Machine's Ready condition; ReadySince when it last
	// became Ready (zero when not Ready): the settle delay counts from it.
	Ready      bool
	ReadySince time.Time
	// Provisioned says the Server booted a Revision of this Machine once
	// (booted_revision > 0): a Machine never provisioned is not "down".
	Provisioned bool
	// Desired and Booted are Revision numbers; DesiredFailed says the
	// desired Revision failed (the Server came back on an older one), with
	// DesiredFailReason; BootedVersion is the image version the Server
	// runs.
	Desired, Booted   int64
	DesiredFailed     bool
	DesiredFailReason string
	BootedVersion     string
	// Lease is the Server's Lease, nil when none.
	Lease *roostv1.LeaseSpec
}

// PoolView is one Pool and its Machines at one instant.
type PoolView struct {
	Pool     *roostv1.Pool
	Machines []MachineView
	// Target is the image version the Pool's Revisions render ("" when no
	// ImageRelease fits); TargetNote says why it is not the newest of the
	// Pool's channel (an upgrade path through an intermediate release, or
	// no supported path), "" when it is.
	Target     string
	TargetNote string
	Schedule   Schedule
	// MaxUnavailable is the resolved rollout.maxUnavailable (≥ 1).
	MaxUnavailable int32
	// ScheduleErr is why the Pool's windows could not be read; the Pool
	// then never opens.
	ScheduleErr error
}

// Plan computes the Pool's rollout status at now. It is pure: the same
// view gives the same status.
func Plan(v *PoolView, now time.Time) *roostv1.RolloutStatus {
	p := v.Pool
	prev := p.GetStatus().GetRollout()
	st := &roostv1.RolloutStatus{TargetVersion: v.Target, Total: int32(len(v.Machines)), PreviousVersion: prev.GetPreviousVersion()}
	if v.Target != prev.GetTargetVersion() && prev.GetTargetVersion() != "" {
		st.PreviousVersion = prev.GetTargetVersion()
	}
	if st.PreviousVersion == "" {
		st.PreviousVersion = majorityBooted(v.Machines, v.Target)
	}
	acked := map[string]bool{}
	for _, m := range prev.GetAcknowledgedMachines() {
		acked[m] = true
	}
	failed := map[string]string{}
	for _, m := range prev.GetFailedMachines() {
		failed[m] = "failed earlier"
	}
	// Machines still to move: reboots of provisioned Machines (gated by
	// the rules) and first installs (not gated: see Admit).
	reboots, firstInstalls := 0, 0
	var settleFrom time.Time
	for _, m := range v.Machines {
		if m.Ready && m.BootedVersion == v.Target && m.Booted == m.Desired {
			st.Updated++
		}
		if down(m, now) {
			st.Unavailable++
		}
		if m.Desired != 0 && m.Desired != m.Booted && !m.DesiredFailed {
			if m.Provisioned {
				reboots++
			} else {
				firstInstalls++
			}
		}
		if m.ReadySince.After(settleFrom) && m.Provisioned {
			settleFrom = m.ReadySince
		}
		if acked[m.Name] {
			continue
		}
		switch {
		case m.DesiredFailed:
			failed[m.Name] = fmt.Sprintf("Revision %d failed: %s", m.Desired, m.DesiredFailReason)
		case leaseExpired(m, now):
			// It never came up on the new Revision within readyTimeout.
			// (One that booted it but is not healthy is judged by the
			// agent's boot assessment: it falls back, and the Revision
			// fails.)
			failed[m.Name] = fmt.Sprintf("did not boot Revision %d within its Lease (readyTimeout)", m.Lease.GetRevision())
		}
	}
	for name := range failed {
		st.FailedMachines = append(st.FailedMachines, name)
	}
	sort.Strings(st.FailedMachines)
	if settle := p.GetSpec().GetRollout().GetSettle().AsDuration(); settle > 0 && !settleFrom.IsZero() && now.Before(settleFrom.Add(settle)) {
		st.SettleUntil = timestamppb.New(settleFrom.Add(settle))
	}
	open := v.ScheduleErr == nil && (v.Schedule == nil || v.Schedule.OpenAt(now))
	if !open && v.Schedule != nil && v.ScheduleErr == nil {
		if t, ok := v.Schedule.NextStart(now); ok {
			st.NextWindowStart = timestamppb.New(t)
		}
	}
	budget := p.GetSpec().GetRollout().GetFailureBudget()
	total := len(v.Machines)
	// installs says how many Machines await their first install, and that
	// gate (what holds the reboots) does not hold them; "" when none.
	installs := func(gate string) string {
		if firstInstalls == 0 {
			return ""
		}
		s := fmt.Sprintf("%d awaiting first install", firstInstalls)
		if gate != "" {
			s += " (not gated by " + gate + ")"
		}
		return s + "; "
	}
	toReboot := fmt.Sprintf("%d of %d Machines to reboot", reboots, total)
	if firstInstalls > 0 {
		toReboot = fmt.Sprintf("%d of %d to reboot", reboots, total)
	}
	windowGate := ""
	switch {
	case v.ScheduleErr != nil:
		windowGate = "maintenance windows unreadable: " + v.ScheduleErr.Error()
	case !open:
		windowGate = "no maintenance window of the pool is open"
		if st.NextWindowStart != nil {
			windowGate += "; the next opens at " + st.NextWindowStart.AsTime().UTC().Format(time.RFC3339)
		}
	}
	switch {
	case prev.GetPhase() == state.RolloutHalted:
		st.Phase, st.Reason = state.RolloutHalted, prev.GetReason()
	case int32(len(st.FailedMachines)) > budget:
		var parts []string
		for _, n := range st.FailedMachines {
			parts = append(parts, n+" ("+failed[n]+")")
		}
		st.Phase = state.RolloutHalted
		st.Reason = fmt.Sprintf("%d Machine(s) failed, more than the failure budget %d: %s; fix the cause, then roostctl rollout resume %s (failed Machines are not retried) or rollout undo %s",
			len(st.FailedMachines), budget, strings.Join(parts, "; "), p.GetMetadata().GetName(), p.GetMetadata().GetName())
	case p.GetSpec().GetRollout().GetPaused():
		// Paused shows even with nothing to do, so an operator's pause is
		// visible until resumed (as a paused Deployment).
		st.Phase, st.Reason = state.RolloutPaused, "paused by an operator (roostctl rollout resume "+p.GetMetadata().GetName()+")"
		switch {
		case reboots+firstInstalls == 0 && v.Target == "":
			st.Reason += "; no ImageRelease fits the pool"
		case reboots+firstInstalls == 0:
			st.Reason += "; nothing to roll out"
		case firstInstalls > 0:
			st.Reason = installs("the pause") + st.Reason
		}
	case reboots+firstInstalls == 0:
		st.Phase = state.RolloutIdle
		if v.Target == "" {
			st.Reason = "no ImageRelease fits the pool"
		}
		if v.TargetNote != "" {
			st.Reason = v.TargetNote
		}
	case reboots == 0:
		// Only first installs are left: they may start now, whatever the
		// windows or the settle delay say (within maxUnavailable).
		gate := ""
		switch {
		case windowGate != "":
			gate = "windows"
		case st.SettleUntil != nil:
			gate = "the settle delay"
		}
		st.Phase = state.RolloutProgressing
		st.Reason = fmt.Sprintf("%d of %d Machines awaiting first install", firstInstalls, total)
		if gate != "" {
			st.Reason += " (not gated by " + gate + ")"
		}
		st.Reason += fmt.Sprintf("; %d unavailable of %d allowed", st.Unavailable, v.MaxUnavailable)
		if v.ScheduleErr != nil {
			st.Reason += "; " + windowGate
		}
	case windowGate != "":
		st.Phase = state.RolloutWaiting
		st.Reason = windowGate
		if firstInstalls > 0 {
			st.Reason = installs("windows") + toReboot + ": " + windowGate
		}
	case st.SettleUntil != nil:
		st.Phase, st.Reason = state.RolloutSettling, "settling after the last reboot until "+st.SettleUntil.AsTime().UTC().Format(time.RFC3339)
		if firstInstalls > 0 {
			st.Reason = installs("the settle delay") + toReboot + ": " + st.Reason
		}
	default:
		st.Phase = state.RolloutProgressing
		st.Reason = fmt.Sprintf("%s%s; %d unavailable of %d allowed", installs(""), toReboot, st.Unavailable, v.MaxUnavailable)
		if v.TargetNote != "" {
			st.Reason += "; " + v.TargetNote
		}
	}
	return st
}

// leaseExpired says whether m's Lease to reboot (not to drain) expired
// before m booted its Revision: it never came up within readyTimeout.
func leaseExpired(m MachineView, now time.Time) bool {
	return m.Lease != nil && !m.Lease.GetExpiresAt().AsTime().After(now) && m.Lease.GetPhase() != state.LeaseDraining &&
		m.Booted != m.Lease.GetRevision()
}

// down says whether m counts against maxUnavailable: it holds an
// unexpired Lease, or it is not Ready after having been provisioned.
func down(m MachineView, now time.Time) bool {
	if m.Lease != nil && m.Lease.GetExpiresAt().AsTime().After(now) {
		return true
	}
	return m.Provisioned && !m.Ready
}

// majorityBooted is the image version most Machines booted, other than
// target ("" when none).
func majorityBooted(ms []MachineView, target string) string {
	count := map[string]int{}
	best, n := "", 0
	for _, m := range ms {
		if m.BootedVersion == "" || m.BootedVersion == target {
			continue
		}
		count[m.BootedVersion]++
		if c := count[m.BootedVersion]; c > n || (c == n && m.BootedVersion < best) {
			best, n = m.BootedVersion, c
		}
	}
	return best
}

// Admit says whether Machine name of the Pool may start a reboot now
// (take a Lease), and if not, why. A Frozen Pool (hub/remediation's
// safety controller) admits no reboot, only first installs (a Pool frozen
// for its Cluster's API is refused by the drain instead). status is Plan's result for the same
// view and instant.
func Admit(v *PoolView, status *roostv1.RolloutStatus, name string, now time.Time) (bool, string) {
	var self *MachineView
	var others []string
	for i := range v.Machines {
		m := &v.Machines[i]
		if m.Name == name {
			self = m
			continue
		}
		if down(*m, now) {
			others = append(others, m.Name)
		}
	}
	pool := v.Pool.GetMetadata().GetName()
	if self == nil {
		return false, fmt.Sprintf("Machine %s is not in pool %s", name, pool)
	}
	if !self.Provisioned {
		return true, "first install"
	}
	// Frozen because the Cluster's API is unreachable: the drain before
	// the Lease (which needs that API) refuses each worker and records why
	// on its Machine (Drained=False, ClusterUnreachable).
	if c := state.FindCondition(v.Pool.GetStatus().GetConditions(), state.PoolFrozen); c.GetStatus() == "True" && c.GetReason() != state.ReasonClusterUnreachable {
		return false, fmt.Sprintf("pool %s is Frozen (%s): %s", pool, c.GetReason(), c.GetMessage())
	}
	switch status.GetPhase() {
	case state.RolloutHalted, state.RolloutPaused, state.RolloutWaiting, state.RolloutSettling:
		return false, fmt.Sprintf("pool %s is %s: %s", pool, status.GetPhase(), status.GetReason())
	}
	if n := len(others); int32(n) >= v.MaxUnavailable {
		sort.Strings(others)
		if n > 5 {
			others = append(others[:5], "…")
		}
		return false, fmt.Sprintf("pool %s allows %d unavailable Machine(s) and %d are (%s)", pool, v.MaxUnavailable, n, strings.Join(others, ", "))
	}
	return true, ""
}
