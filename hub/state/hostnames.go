package state

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// MachineHostname is the host name a Machine's Revision gives its Server
// (and the name of its Kubernetes Node): spec.hostname, else the
// Machine's name.
func MachineHostname(m *roostv1.Machine) string {
	if h := m.GetSpec().GetHostname(); h != "" {
		return h
	}
	return m.GetMetadata().GetName()
}

// newMachineHostname is MachineHostname of the Machine nm creates.
func newMachineHostname(nm *roostv1.NewMachine) string {
	if h := nm.GetHostname(); h != "" {
		return h
	}
	return nm.GetName()
}

// poolHostnames indexes the host names (MachineHostname, lower-cased as
// DNS compares them) of Pools' Machines for one command: pool, host name,
// the first Machine by name that uses it. A pool's entry is read from the
// applying transaction on first use; add keeps it current as the command
// creates Machines, so that a batch is checked in O(Machines).
type poolHostnames map[string]map[string]*roostv1.Machine

// holder returns the Machine of Pool pool whose host name is host, or nil.
func (h poolHostnames) holder(a *applier, pool, host string) (*roostv1.Machine, *apierror.Error) {
	byHost, ok := h[pool]
	if !ok {
		it, err := a.txn.Get(kindMachine, indexRefs, refKey(kindPool, pool))
		if err != nil {
			return nil, internal(err)
		}
		byHost = map[string]*roostv1.Machine{}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			if m := raw.(*roostv1.Object).GetMachine(); m.GetSpec().GetPool() == pool {
				if k := strings.ToLower(MachineHostname(m)); byHost[k] == nil {
					byHost[k] = m
				}
			}
		}
		h[pool] = byHost
	}
	return byHost[strings.ToLower(host)], nil
}

// add records new Machine m of a Pool whose entry holder has read.
func (h poolHostnames) add(m *roostv1.Machine) {
	if byHost := h[m.GetSpec().GetPool()]; byHost != nil {
		if k := strings.ToLower(MachineHostname(m)); byHost[k] == nil {
			byHost[k] = m
		}
	}
}

// hostnameTaken is the error of new Machine nm, whose host name host is
// already used by Machine holder of the same Pool: AlreadyExists, as the
// Servers of one pool (and their Kubernetes Nodes) cannot share a name.
func hostnameTaken(nm *roostv1.NewMachine, host string, holder *roostv1.Machine) *apierror.Error {
	what := fmt.Sprintf("spec.hostname: %q", host)
	if nm.GetHostname() == "" {
		what = fmt.Sprintf("host name %q (the name of the new Machine)", host)
	}
	msg := fmt.Sprintf("%s is already used by Machine %s in pool %s", what, holder.GetMetadata().GetName(), nm.GetPool())
	if holder.GetSpec().GetHostname() == "" {
		msg += " (as its name: it sets no spec.hostname)"
	}
	return &apierror.Error{Code: codes.AlreadyExists, Message: msg}
}
