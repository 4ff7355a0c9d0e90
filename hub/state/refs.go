package state

import (
	"fmt"
	"strings"

	"github.com/hashicorp/go-memdb"

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

// freeHint says how to free kind/name of users (as usersOf lists them)
// before deleting it: release a Pool's Machines, or take the name out of
// the Pools (and standalone Machines) that refer to it.
func freeHint(kind, name string, users []string) string {
	machines, pools := false, false
	for _, u := range users {
		machines = machines || strings.HasPrefix(u, kindMachine+" ")
		pools = pools || strings.HasPrefix(u, kindPool+" ")
	}
	switch {
	case kind == kindPool && machines:
		return fmt.Sprintf("release its servers first ('roostctl pool unassign %s SERVER...'; with replicas, set spec.replicas to 0)", name)
	case pools && machines:
		return "take it out of those Pools' and Machines' specs (roostctl apply), or delete them first"
	case pools:
		return "take it out of those Pools' specs (roostctl apply), or delete those Pools first"
	case machines:
		return "delete or release those Machines first"
	}
	return "delete or change them first"
}
