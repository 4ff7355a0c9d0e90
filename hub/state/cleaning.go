package state

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// ServerCleaningFailed is the state of a Server whose agent could not wipe
// it (apply rules 11): out of the pool until a cleaning succeeds.
const ServerCleaningFailed = "CleaningFailed"

// ConditionCleaned is the hub's condition on a Server about its cleaning:
// True (reason Cleaned) once the agent wiped it, False while it is being
// cleaned (Cleaning) or after a failure (CleaningFailed).
const ConditionCleaned = "Cleaned"

// Cleaning modes (MachineClass spec.cleaning.mode).
const (
	CleaningMetadata = "metadata"
	CleaningDiscard  = "discard"
	CleaningZero     = "zero"
)

// CleaningModes lists the modes in documentation order.
var CleaningModes = []string{CleaningMetadata, CleaningDiscard, CleaningZero}

// cleaningPolicy is the cleaning a Machine of class mc asks for (nil or
// no mode: metadata, no data disks).
func cleaningPolicy(mc *roostv1.MachineClass) (mode string, dataDisks bool) {
	c := mc.GetSpec().GetCleaning()
	mode = c.GetMode()
	if mode == "" {
		mode = CleaningMetadata
	}
	return mode, c.GetDataDisks()
}

// classOf is the MachineClass a Machine uses: its Pool's, or its own for a
// standalone Machine; nil when it has none (or it is gone).
func (a *applier) classOf(m *roostv1.Machine) (*roostv1.MachineClass, *apierror.Error) {
	name := m.GetSpec().GetMachineClass()
	if p := m.GetSpec().GetPool(); p != "" {
		pool, aerr := a.getPool(p)
		if aerr != nil {
			return nil, aerr
		}
		name = pool.GetSpec().GetMachineClass()
	}
	if name == "" {
		return nil, nil
	}
	raw, err := a.txn.First("MachineClass", indexID, name)
	if err != nil {
		return nil, internal(err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*roostv1.Object).GetMachineClass(), nil
}

// startCleaning puts s (a clone the caller writes) in Cleaning with a new
// attempt of the given policy, and records the CleaningStarted Event;
// attempts continues the count of a retry.
func (a *applier) startCleaning(s *roostv1.Server, mode string, dataDisks, decommission bool, attempts int32, reason string, now *timestamppb.Timestamp) *apierror.Error {
	st := s.Status
	st.State = ServerCleaning
	st.StateReason = reason
	st.Cleaning = &roostv1.ServerCleaning{Mode: mode, DataDisks: dataDisks, Index: a.index, Attempts: attempts + 1,
		Decommission: decommission, StartedAt: now}
	what := "metadata (partition tables and file system signatures)"
	switch mode {
	case CleaningDiscard:
		what = "discard (the whole disk)"
	case CleaningZero:
		what = "zero (the whole disk)"
	}
	disks := "its install disk"
	if dataDisks {
		disks = "its install disk and data disks"
	}
	msg := fmt.Sprintf("the agent wipes %s: %s (attempt %d)", disks, what, attempts+1)
	st.Conditions = setCondition(st.Conditions, ConditionCleaned, "False", "Cleaning", msg, now)
	return a.recordEvent(kindServer, s.GetMetadata().GetName(), EventNormal, "CleaningStarted", msg, EventSourceHub)
}

// cleanServer is SERVER_ACTION_CLEAN: a new cleaning of an unclaimed
// Server, by the current spec.cleaning of the class of the Machine that
// released it (the last cleaning's mode when that class is gone), keeping
// a pending decommission.
func (a *applier) cleanServer(s *roostv1.Server, now *timestamppb.Timestamp) *apierror.Error {
	name, st := s.GetMetadata().GetName(), s.Status
	switch st.GetState() {
	case ServerCleaningFailed, ServerCleaning, ServerAvailable:
	case ServerClaimed:
		return apierror.FailedPrecondition("Server %s is Claimed; release its Machine first (roostctl pool unassign or delete machine): a release cleans it", name)
	default:
		return apierror.FailedPrecondition("Server %s is %s; only an Available, Cleaning or CleaningFailed Server can be cleaned", name, orUnknown(st.GetState()))
	}
	last := st.GetCleaning()
	mode, data := last.GetMode(), last.GetDataDisks()
	if mode == "" {
		mode = CleaningMetadata
	}
	if mc := last.GetMachineClass(); mc != "" {
		raw, err := a.txn.First("MachineClass", indexID, mc)
		if err != nil {
			return internal(err)
		}
		if raw != nil { // the class's current policy: a fixed class applies
			mode, data = cleaningPolicy(raw.(*roostv1.Object).GetMachineClass())
		}
	}
	attempts := last.GetAttempts()
	if st.GetState() == ServerAvailable {
		attempts = 0
	}
	decommission := last.GetDecommission() && st.GetState() != ServerAvailable
	if aerr := a.startCleaning(s, mode, data, decommission, attempts,
		fmt.Sprintf("cleaning again (attempt %d)", attempts+1), now); aerr != nil {
		return aerr
	}
	st.Cleaning.MachineClass = last.GetMachineClass()
	if decommission {
		st.Cleaning.DecommissionReason = last.GetDecommissionReason()
	}
	return nil
}

// decommissionUnclaimed decommissions an unclaimed Server under apply
// rules 11: an Available Server is cleaned first (Cleaning, then
// Decommissioned); one that cannot be cleaned (CleaningFailed, never
// installed, or a second decommission while it is cleaned) is
// Decommissioned at once, its reason saying so. It reports whether s was
// Decommissioned.
func (a *applier) decommissionUnclaimed(s *roostv1.Server, reason string, now *timestamppb.Timestamp) (bool, *apierror.Error) {
	st := s.Status
	switch {
	case st.GetState() == ServerAvailable && st.GetReachability() != Unreachable:
		mode, data := CleaningMetadata, false
		if c := st.GetCleaning(); c.GetMode() != "" {
			mode, data = c.GetMode(), c.GetDataDisks()
		}
		if aerr := a.startCleaning(s, mode, data, true, 0, reason+"; the agent wipes it first", now); aerr != nil {
			return false, aerr
		}
		st.Cleaning.DecommissionReason = reason
		return false, nil
	case st.GetState() == ServerCleaning && !st.GetCleaning().GetDecommission():
		st.Cleaning.Decommission = true
		st.Cleaning.DecommissionReason = reason
		st.StateReason = reason + "; Decommissioned once its cleaning succeeds"
		return false, nil
	case st.GetState() == ServerCleaningFailed:
		reason += "; its disks were not wiped (the last cleaning failed: " + st.GetCleaning().GetError() + ")"
	case st.GetState() == ServerCleaning:
		reason += "; decommissioned again before its cleaning finished: its disks may not be wiped"
	case st.GetState() == ServerAvailable:
		reason += "; it is Unreachable, so its disks were not wiped"
	}
	st.State = ServerDecommissioned
	st.StateReason = reason
	return true, nil
}

// recordCleaning applies an agent's cleaning result to s (a clone the
// caller writes), and records the Cleaned or CleaningFailed Event. A
// result for another attempt, or a Server not Cleaning, changes nothing:
// it answers an attempt that was superseded.
func (a *applier) recordCleaning(s *roostv1.Server, r *roostv1.CleaningResult, now *timestamppb.Timestamp) *apierror.Error {
	st := s.Status
	if st.GetState() != ServerCleaning || st.GetCleaning().GetIndex() != r.GetIndex() {
		return nil
	}
	name := s.GetMetadata().GetName()
	c := st.Cleaning
	c.FinishedAt = now
	c.Disks = r.GetDisks()
	if r.GetSucceeded() {
		c.Error = ""
		summary := "nothing to wipe"
		if len(c.Disks) > 0 {
			summary = strings.Join(c.Disks, "; ")
		}
		st.Conditions = setCondition(st.Conditions, ConditionCleaned, "True", "Cleaned", summary, now)
		// The wipe removed every Revision: the agent runs from RAM.
		st.BootedRevision, st.ImageVersion = 0, ""
		if c.GetDecommission() {
			st.State = ServerDecommissioned
			st.StateReason = c.GetDecommissionReason()
			s.Spec.Pool = ""
			st.Reachability = ""
			a.powerOffDecommissioned(s, fmt.Sprintf("decommission-%d", a.index), now)
		} else {
			st.State = ServerAvailable
			st.StateReason = "cleaned: " + summary
		}
		return a.recordEvent(kindServer, name, EventNormal, "Cleaned", summary, EventSourceHub)
	}
	c.Error = r.GetError()
	if c.Error == "" {
		c.Error = "the agent gave no reason"
	}
	st.State = ServerCleaningFailed
	st.StateReason = fmt.Sprintf("cleaning attempt %d failed: %s", c.GetAttempts(), c.Error)
	st.Conditions = setCondition(st.Conditions, ConditionCleaned, "False", "CleaningFailed", st.StateReason, now)
	return a.recordEvent(kindServer, name, EventWarning, "CleaningFailed", st.StateReason, EventSourceHub)
}

// CleaningInstruction is what the agent of s is asked to do: the cleaning
// of its current attempt while it is Cleaning, else nil.
func CleaningInstruction(s *roostv1.Server) *roostv1.CleaningInstruction {
	if s.GetStatus().GetState() != ServerCleaning {
		return nil
	}
	c := s.GetStatus().GetCleaning()
	return &roostv1.CleaningInstruction{Index: c.GetIndex(), Mode: c.GetMode(), DataDisks: c.GetDataDisks()}
}

// cloneServer is a writable copy of s with spec and status set.
func cloneServer(old *roostv1.Server) *roostv1.Server {
	s := proto.Clone(old).(*roostv1.Server)
	if s.Spec == nil {
		s.Spec = &roostv1.ServerSpec{}
	}
	if s.Status == nil {
		s.Status = &roostv1.ServerStatus{}
	}
	return s
}
