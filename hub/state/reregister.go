package state

import (
	"fmt"

	"google.golang.org/grpc/codes"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// ReasonReregistered is the reason of the Approved=False condition of a
// Server recorded again by ReregisterServer.
const ReasonReregistered = "Reregistered"

// reregisterServer records Server c.name again for an agent that holds a
// certificate for it while the state has no such Server (after a restore
// of an older snapshot, or a delete): like a fresh enrollment, from the
// identity and inventory the agent reports, but with no token, so without
// a pool or token labels and held for an operator's approval. It fails
// with AlreadyExists when the Server exists, PermissionDenied when the
// identity gives another name, InvalidArgument without a usable identity,
// a UID or a time, and as an unknown command under rules older than
// RulesReregister.
func (a *applier) reregisterServer(c *roostv1.ReregisterServer) ([]*roostv1.ApplyResult, *apierror.Error) {
	if a.rules < RulesReregister {
		return nil, a.unknownCommand()
	}
	now, aerr := a.now()
	if aerr != nil {
		return nil, aerr
	}
	name := c.GetName()
	base, uuid, fp, macs := baseServerName(c.GetIdentity())
	switch {
	case uuid == "" && len(macs) == 0:
		return nil, apierror.Invalid("the server has no usable system UUID and no permanent MAC addresses",
			apierror.Violation{Field: "identity", Message: "needs a usable systemUuid or at least one permanent MAC"})
	case c.GetUid() == "":
		return nil, apierror.Invalid("a new Server needs a UID in the command", apierror.Violation{Field: "uid", Message: "is required"})
	case name != base && (uuid == "" || name != duplicateName(uuid, fp)):
		return nil, apierror.PermissionDenied("the certificate is for server %s, but the identity reported is that of %s", name, base)
	}
	old, aerr := a.getServer(name)
	if aerr != nil {
		return nil, aerr
	}
	if old != nil {
		return nil, &apierror.Error{Code: codes.AlreadyExists, Message: fmt.Sprintf("server %s is enrolled: nothing to re-register", name)}
	}
	s := &roostv1.Server{ApiVersion: resource.APIVersion, Kind: kindServer, Metadata: a.newMeta(name, c.GetUid(), now),
		Spec: &roostv1.ServerSpec{SystemUuid: normalizedUUID(c.GetIdentity().GetSystemUuid()), MacFingerprint: fp, PermanentMacs: macs},
		Status: &roostv1.ServerStatus{
			State: ServerEnrolling, AgentVersion: c.GetAgentVersion(), Inventory: c.GetInventory(),
			EnrolledAt: now, Reachability: Reachable, LastSeen: now,
		}}
	s.Metadata.Labels = DerivedLabels(c.GetInventory())
	s.Status.Conditions = setCondition(nil, ConditionApproved, "False", ReasonReregistered,
		fmt.Sprintf("the hub had no record of this Server (a restored snapshot older than its enrollment, or a delete); its agent came back "+
			"with the certificate the hub gave it: approve it (roostctl server approve %s) or deny it", name), now)
	if aerr := a.put(s, true); aerr != nil {
		return nil, aerr
	}
	return []*roostv1.ApplyResult{{Kind: kindServer, Name: name, Action: ActionCreated}}, nil
}
