package state

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/go-memdb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// reference is one by-name link from an object to another object.
type reference struct {
	// Field is the path of the referring field inside the object, in
	// manifest (JSON) names, e.g. "spec.maintenanceWindows[1]".
	Field string
	// Kind is the CamelCase kind of the referenced object.
	Kind string
	// Name is the referenced object's name.
	Name string
}

// referencesOf lists the objects o refers to, in field order. Empty names
// are not references (an unset optional field). Only references that the
// state enforces are listed: the referenced object must exist when o is
// applied, and cannot be deleted while o refers to it.
func referencesOf(o *roostv1.Object) []reference {
	var refs []reference
	add := func(field, kind, name string) {
		if name != "" {
			refs = append(refs, reference{Field: field, Kind: kind, Name: name})
		}
	}
	switch v := o.GetKind().(type) {
	case *roostv1.Object_Pool:
		s := v.Pool.GetSpec()
		add("spec.cluster", "Cluster", s.GetCluster())
		add("spec.machineClass", "MachineClass", s.GetMachineClass())
		add("spec.networkProfile", "NetworkProfile", s.GetNetworkProfile())
		for i, w := range s.GetMaintenanceWindows() {
			add(fmt.Sprintf("spec.maintenanceWindows[%d]", i), "MaintenanceWindow", w)
		}
	case *roostv1.Object_Machine:
		add("spec.server", "Server", v.Machine.GetSpec().GetServer())
		add("spec.pool", "Pool", v.Machine.GetSpec().GetPool())
		add("spec.machineClass", "MachineClass", v.Machine.GetSpec().GetMachineClass())
		add("spec.networkProfile", "NetworkProfile", v.Machine.GetSpec().GetNetworkProfile())
	case *roostv1.Object_Revision:
		add("spec.server", "Server", v.Revision.GetSpec().GetServer())
		add("spec.imageRelease", "ImageRelease", v.Revision.GetSpec().GetImageRelease())
	case *roostv1.Object_Lease:
		add("spec.server", "Server", v.Lease.GetSpec().GetServer())
	}
	return refs
}

// exists reports whether txn holds an object of kind (a CamelCase kind
// name) named name.
func exists(txn *memdb.Txn, kind, name string) (bool, error) {
	raw, err := txn.First(kind, indexID, name)
	return raw != nil, err
}

// usersOf lists the objects that refer to kind/name, as `Pool "workers"`,
// ordered by kind (registry order) then name.
func usersOf(txn *memdb.Txn, kind, name string) ([]string, error) {
	var users []string
	for _, k := range resource.Kinds() {
		it, err := txn.Get(k.Name, indexRefs, refKey(kind, name))
		if err != nil {
			return nil, err
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			users = append(users, fmt.Sprintf("%s %q", k.Name, resource.NameOf(raw.(*roostv1.Object))))
		}
	}
	return users, nil
}

func joinUsers(users []string) string { return strings.Join(users, ", ") }

// poolPreAssigners lists, as usersOf does, what pre-assigns Servers to
// Pool pool (spec.pool), which deleting the Pool would leave pre-assigned
// to a Pool that no longer exists, claimable by none (rulesPoolReferences):
//
//   - servers: the Servers whose spec.pool names it and that no Machine
//     claims (a claimed Server's Machine is a user of the Pool already),
//     except Decommissioned ones: their agent is refused, and enrolling
//     again sets their pool anew;
//   - tokens: the EnrollmentTokens whose spec.pool names it that can still
//     enroll at the command's time (tokenCanEnroll); revoked, expired and
//     used-up ones cannot pre-assign anything any more.
//
// Both are in name order. The scans read only the transaction and the
// command's time, so every member finds the same.
func (a *applier) poolPreAssigners(pool string) (servers, tokens []string, aerr *apierror.Error) {
	it, err := a.txn.Get(kindServer, indexID)
	if err != nil {
		return nil, nil, internal(err)
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		s := raw.(*roostv1.Object).GetServer()
		if s.GetSpec().GetPool() != pool || s.GetStatus().GetState() == ServerDecommissioned {
			continue
		}
		name := s.GetMetadata().GetName()
		m, err := a.txn.First(kindMachine, indexRefs, refKey(kindServer, name))
		if err != nil {
			return nil, nil, internal(err)
		}
		if m == nil {
			servers = append(servers, fmt.Sprintf("%s %q", kindServer, name))
		}
	}
	it, err = a.txn.Get(kindToken, indexID)
	if err != nil {
		return nil, nil, internal(err)
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		t := raw.(*roostv1.Object).GetEnrollmentToken()
		if t.GetSpec().GetPool() != pool {
			continue
		}
		var now *timestamppb.Timestamp
		if t.GetSpec().GetExpiresAt() != nil {
			if now, aerr = a.now(); aerr != nil {
				return nil, nil, aerr
			}
		}
		if tokenCanEnroll(t, now) {
			tokens = append(tokens, fmt.Sprintf("%s %q", kindToken, t.GetMetadata().GetName()))
		}
	}
	return servers, tokens, nil
}

// tokenCanEnroll says whether t can still enroll a Server at now, as
// checkToken decides (its secret aside): it is Active (resource.TokenState:
// not revoked, expired or used up). now is needed only when t expires.
func tokenCanEnroll(t *roostv1.EnrollmentToken, now *timestamppb.Timestamp) bool {
	return resource.TokenState(t, now.AsTime()) == "Active"
}

// usersNamed returns the names of the users (as usersOf lists them) of
// kind.
func usersNamed(users []string, kind string) []string {
	var names []string
	for _, u := range users {
		if q, ok := strings.CutPrefix(u, kind+" "); ok {
			if n, err := strconv.Unquote(q); err == nil {
				names = append(names, n)
			}
		}
	}
	return names
}

// freeHint says how to free kind/name of users (as usersOf and
// poolPreAssigners list them) before deleting it: release a Pool's
// Machines, revoke the EnrollmentTokens and decommission the Servers
// pre-assigned to it, or take the name out of the Pools (and standalone
// Machines) that refer to it.
func freeHint(kind, name string, users []string) string {
	machines, pools := false, false
	for _, u := range users {
		machines = machines || strings.HasPrefix(u, kindMachine+" ")
		pools = pools || strings.HasPrefix(u, kindPool+" ")
	}
	if kind == kindPool {
		var hints []string
		if machines {
			hints = append(hints, fmt.Sprintf("release its servers first ('roostctl pool unassign %s SERVER...'; with replicas, set spec.replicas to 0)", name))
		}
		if tokens := usersNamed(users, kindToken); len(tokens) > 0 {
			hints = append(hints, fmt.Sprintf("revoke the enrollment tokens that pre-assign servers to it ('roostctl token revoke %s'; "+
				"create new ones without --pool, or with another pool, if you still need them)", strings.Join(tokens, " ")))
		}
		if servers := usersNamed(users, kindServer); len(servers) > 0 {
			hints = append(hints, fmt.Sprintf("decommission the servers pre-assigned to it, which clears their pool ('roostctl server decommission %s'; "+
				"they come back by enrolling again with a token made without --pool, or with another pool)", strings.Join(servers, " ")))
		}
		if len(hints) > 0 {
			return strings.Join(hints, "; ")
		}
	}
	switch {
	case pools && machines:
		return "take it out of those Pools' and Machines' specs (roostctl apply), or delete them first"
	case pools:
		return "take it out of those Pools' specs (roostctl apply), or delete those Pools first"
	case machines:
		return "delete or release those Machines first"
	}
	return "delete or change them first"
}
