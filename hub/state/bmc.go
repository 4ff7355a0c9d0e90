package state

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// ServerRegistered is the state of a Server an operator recorded with its
// BMC before it ever enrolled (roostctl server register); its first
// enrollment makes it Enrolling like any new Server.
const ServerRegistered = "Registered"

// Condition types the BMC controller owns on Servers.
const (
	// ConditionBMCReachable: the BMC answered (True), or why not (False,
	// reason from bmc.Reason: Unauthorized, Timeout, ServerError, …).
	ConditionBMCReachable = "BMCReachable"
	// ConditionBMCOperation: the outcome of the last BMC operation
	// (reason Succeeded, or the failure's reason), with its action.
	ConditionBMCOperation = "BMCOperation"
)

// BMC operation actions (BMCOperation.action).
const (
	BMCPowerOn    = "PowerOn"
	BMCPowerOff   = "PowerOff"
	BMCPowerCycle = "PowerCycle"
	BMCBootOnce   = "BootOnce"
	BMCProvision  = "Provision"
)

// registerServer records a new Server in state Registered with its BMC,
// MACs and pool, or sets the BMC of an existing Server (its MACs and pool
// stay: they come from its enrollment).
func (a *applier) registerServer(c *roostv1.RegisterServer) ([]*roostv1.ApplyResult, *apierror.Error) {
	if a.rules < RulesBMC {
		return nil, a.unknownCommand()
	}
	now, aerr := a.now()
	if aerr != nil {
		return nil, aerr
	}
	if vs := resource.ValidateBMC("bmc", c.GetBmc(), true); len(vs) > 0 {
		return nil, apierror.Invalid("invalid BMC", vs...)
	}
	name := c.GetName()
	if msgs := resource.NameErrors(name); len(msgs) > 0 {
		return nil, apierror.Invalid("invalid server name", apierror.Violation{Field: "name", Message: msgs[0]})
	}
	old, aerr := a.getServer(name)
	if aerr != nil {
		return nil, aerr
	}
	if old != nil && old.GetStatus().GetState() != ServerRegistered {
		if len(c.GetMacs()) > 0 || c.GetPool() != "" {
			return nil, apierror.FailedPrecondition("Server %s exists (state %s): its MAC addresses and pool come from its enrollment; register it with --bmc and credentials only", name, old.GetStatus().GetState())
		}
		s := proto.Clone(old).(*roostv1.Server)
		if s.Spec == nil {
			s.Spec = &roostv1.ServerSpec{}
		}
		if s.Status == nil {
			s.Status = &roostv1.ServerStatus{}
		}
		s.Spec.Bmc = proto.Clone(c.GetBmc()).(*roostv1.BMC)
		if s.Status.Bmc == nil {
			s.Status.Bmc = &roostv1.BMCStatus{}
		}
		s.Status.Bmc.CredentialsSet = true
		if proto.Equal(s, old) {
			return []*roostv1.ApplyResult{{Kind: kindServer, Name: name, Action: ActionUnchanged}}, nil
		}
		a.touch(s.Metadata, true)
		if aerr := a.put(s, false); aerr != nil {
			return nil, aerr
		}
		return []*roostv1.ApplyResult{{Kind: kindServer, Name: name, Action: ActionConfigured}}, nil
	}
	if old == nil && c.GetUid() == "" {
		return nil, apierror.Invalid("a new Server needs a UID in the command", apierror.Violation{Field: "uid", Message: "is required"})
	}
	macs := slices.Clone(c.GetMacs())
	for i, m := range macs {
		macs[i] = strings.ToLower(m)
	}
	slices.Sort(macs)
	macs = slices.Compact(macs)
	for _, m := range macs {
		if other := a.serverWithMAC(m, name); other != nil {
			return nil, apierror.FailedPrecondition("MAC address %s belongs to Server %s already", m, other.GetMetadata().GetName())
		}
	}
	if p := c.GetPool(); p != "" {
		pool, aerr := a.getPool(p)
		if aerr != nil {
			return nil, aerr
		}
		if pool == nil {
			return nil, apierror.NotFound("Pool", p)
		}
	}
	s := &roostv1.Server{ApiVersion: resource.APIVersion, Kind: kindServer,
		Spec: &roostv1.ServerSpec{Bmc: proto.Clone(c.GetBmc()).(*roostv1.BMC), PermanentMacs: macs, Pool: c.GetPool()},
		Status: &roostv1.ServerStatus{State: ServerRegistered, StateReason: "registered with its BMC; not enrolled yet (roostctl server provision " + name + ")",
			Bmc: &roostv1.BMCStatus{CredentialsSet: true}}}
	if old == nil {
		s.Metadata = a.newMeta(name, c.GetUid(), now)
		if aerr := a.put(s, true); aerr != nil {
			return nil, aerr
		}
		return []*roostv1.ApplyResult{{Kind: kindServer, Name: name, Action: ActionCreated}}, nil
	}
	// Registered again before it enrolled: the new record replaces the
	// old one; what the BMC controller observed stays.
	s.Metadata = proto.Clone(old.GetMetadata()).(*roostv1.ObjectMeta)
	s.Status.Conditions = old.GetStatus().GetConditions()
	if ob := old.GetStatus().GetBmc(); ob != nil {
		s.Status.Bmc = proto.Clone(ob).(*roostv1.BMCStatus)
		s.Status.Bmc.CredentialsSet = true
	}
	if proto.Equal(s, old) {
		return []*roostv1.ApplyResult{{Kind: kindServer, Name: name, Action: ActionUnchanged}}, nil
	}
	a.touch(s.Metadata, !proto.Equal(s.Spec, old.Spec))
	if aerr := a.put(s, false); aerr != nil {
		return nil, aerr
	}
	return []*roostv1.ApplyResult{{Kind: kindServer, Name: name, Action: ActionConfigured}}, nil
}

// serverWithMAC is a Server other than except whose spec lists mac, or nil.
func (a *applier) serverWithMAC(mac, except string) *roostv1.Server {
	it, err := a.txn.Get(kindServer, indexID)
	if err != nil {
		return nil
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		s := raw.(*roostv1.Object).GetServer()
		if s.GetMetadata().GetName() != except && slices.Contains(s.GetSpec().GetPermanentMacs(), mac) {
			return s
		}
	}
	return nil
}

// registeredMatch is the Server an operator registered under a name of
// their choosing that an enrolling identity (uuid, fingerprint fp, macs)
// is: a Registered one whose recorded MACs include one of macs or whose
// BMC reported uuid, or one with a BMC that enrolled before with the same
// UUID and MACs; nil when none. Under rules older than RulesBMC, nil.
func (a *applier) registeredMatch(uuid, fp string, macs []string) (*roostv1.Server, *apierror.Error) {
	if a.rules < RulesBMC {
		return nil, nil
	}
	it, err := a.txn.Get(kindServer, indexBMC, true)
	if err != nil {
		return nil, internal(err)
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		s := raw.(*roostv1.Object).GetServer()
		if s.GetStatus().GetState() != ServerRegistered {
			if s.GetSpec().GetMacFingerprint() == fp && s.GetSpec().GetSystemUuid() == uuid {
				return s, nil // enrolled before under its registered name
			}
			continue
		}
		if uuid != "" && s.GetStatus().GetBmc().GetSystemUuid() == uuid {
			return s, nil
		}
		for _, m := range macs {
			if slices.Contains(s.GetSpec().GetPermanentMacs(), m) {
				return s, nil
			}
		}
	}
	return nil, nil
}

// powerOffDecommissioned records a power-off through s's BMC (from
// RulesBMC on; nothing without spec.bmc or id) for a Server just
// Decommissioned: out of service. id names the operation (the API's for a
// decommission that needs no cleaning, one derived from the Raft index
// when the cleaning's result decommissions it).
func (a *applier) powerOffDecommissioned(s *roostv1.Server, id string, now *timestamppb.Timestamp) {
	if a.rules < RulesBMC || s.GetSpec().GetBmc() == nil || id == "" {
		return
	}
	st := s.Status
	if st.Bmc == nil {
		st.Bmc = &roostv1.BMCStatus{}
	}
	st.Bmc.Operation = &roostv1.BMCOperation{Id: id, Action: BMCPowerOff, RequestedAt: now}
}

// requestBMCOperation records op as the Server's pending BMC operation
// (replacing one not yet carried out) for SERVER_ACTION_POWER, _BOOT_ONCE
// and _PROVISION.
func (a *applier) requestBMCOperation(s *roostv1.Server, c *roostv1.ModifyServer) *apierror.Error {
	if a.rules < RulesBMC {
		return apierror.Invalid(fmt.Sprintf("unknown server action %v", c.GetAction()), apierror.Violation{Field: "action", Message: "needs every hub member at apply rules 13"})
	}
	now, aerr := a.now()
	if aerr != nil {
		return aerr
	}
	name := s.GetMetadata().GetName()
	if s.GetSpec().GetBmc() == nil {
		return apierror.FailedPrecondition("Server %s has no BMC: register one first (roostctl server register %s --bmc URL --bmc-username USER --bmc-password-file FILE)", name, name)
	}
	if s.GetStatus().GetState() == ServerDecommissioned && c.GetAction() != roostv1.ServerAction_SERVER_ACTION_POWER {
		return apierror.FailedPrecondition("Server %s is decommissioned", name)
	}
	op := &roostv1.BMCOperation{Id: c.GetOperationId(), RequestedAt: now}
	if op.Id == "" {
		return apierror.Invalid("a BMC operation needs an ID in the command", apierror.Violation{Field: "operationId", Message: "is required"})
	}
	switch c.GetAction() {
	case roostv1.ServerAction_SERVER_ACTION_POWER:
		switch c.GetPower() {
		case "on":
			op.Action = BMCPowerOn
		case "off":
			op.Action = BMCPowerOff
		case "cycle":
			op.Action = BMCPowerCycle
		default:
			return apierror.Invalid("invalid power action", apierror.Violation{Field: "power", Message: fmt.Sprintf("%q: want on, off or cycle", c.GetPower())})
		}
	case roostv1.ServerAction_SERVER_ACTION_BOOT_ONCE:
		switch c.GetBootDevice() {
		case "cd", "pxe", "disk":
		default:
			return apierror.Invalid("invalid boot device", apierror.Violation{Field: "bootDevice", Message: fmt.Sprintf("%q: want cd, pxe or disk", c.GetBootDevice())})
		}
		op.Action, op.BootDevice = BMCBootOnce, c.GetBootDevice()
	case roostv1.ServerAction_SERVER_ACTION_PROVISION:
		if !resource.ValidDigest(c.GetMediaDigest()) {
			return apierror.Invalid("invalid media digest", apierror.Violation{Field: "mediaDigest", Message: "want the 64 lower-case hex digits of a sha256 digest (an ISO pushed to the hub)"})
		}
		switch st := s.GetStatus().GetState(); st {
		case ServerRegistered, ServerAvailable, ServerEnrolling, ServerPendingApproval:
		default:
			return apierror.FailedPrecondition("Server %s is %s: only a Registered or unclaimed Server is provisioned from the enrollment image", name, st)
		}
		op.Action, op.MediaDigest = BMCProvision, c.GetMediaDigest()
	}
	if s.Status.Bmc == nil {
		s.Status.Bmc = &roostv1.BMCStatus{}
	}
	s.Status.Bmc.Operation = op
	return nil
}

// updateServerBMC records the BMC controller's observations and results.
func (a *applier) updateServerBMC(c *roostv1.UpdateServerBMC) *apierror.Error {
	if a.rules < RulesBMC {
		return a.unknownCommand()
	}
	now, aerr := a.now()
	if aerr != nil {
		return aerr
	}
	old, aerr := a.getServer(c.GetServer())
	if aerr != nil {
		return aerr
	}
	if old == nil {
		return apierror.NotFound(kindServer, c.GetServer())
	}
	s := proto.Clone(old).(*roostv1.Server)
	if s.Status == nil {
		s.Status = &roostv1.ServerStatus{}
	}
	if s.Status.Bmc == nil {
		s.Status.Bmc = &roostv1.BMCStatus{CredentialsSet: s.GetSpec().GetBmc() != nil}
	}
	b := s.Status.Bmc
	if c.GetPowerState() != "" {
		b.PowerState = c.GetPowerState()
	}
	if c.GetSystemUuid() != "" {
		b.SystemUuid = strings.ToLower(c.GetSystemUuid())
	}
	if f := c.GetRecoveryFencingToken(); f != 0 {
		b.RecoveryFencingToken = f
	}
	if c.GetSetMedia() {
		b.MediaDigest = c.GetMediaDigest()
	}
	if id := c.GetDoneOperation(); id != "" && b.GetOperation().GetId() == id {
		b.Operation = nil
	}
	for _, cond := range c.GetSet() {
		switch cond.GetType() {
		case ConditionBMCReachable, ConditionBMCOperation:
		default:
			return apierror.Invalid("not a BMC condition", apierror.Violation{Field: "set", Message: cond.GetType() + ": want BMCReachable or BMCOperation"})
		}
		s.Status.Conditions = setCondition(s.Status.Conditions, cond.GetType(), cond.GetStatus(), cond.GetReason(), cond.GetMessage(), now)
	}
	if proto.Equal(s, old) {
		return nil
	}
	a.touch(s.Metadata, false)
	return a.put(s, false)
}
