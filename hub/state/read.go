package state

import (
	"slices"
	"strings"

	"github.com/hashicorp/go-memdb"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Get returns a copy of the object of kind (a kind name or alias, e.g.
// "Pool", "pools", "pl") named name. Errors: apierror Invalid (field
// "kind") for an unknown kind, apierror.NotFound when there is no such
// object.
func (f *FSM) Get(kind, name string) (*roostv1.Object, error) {
	k, aerr := lookupKind(kind)
	if aerr != nil {
		return nil, aerr
	}
	raw, err := f.db.Load().Txn(false).First(k.Name, indexID, name)
	if err != nil {
		return nil, internal(err)
	}
	if raw == nil {
		return nil, apierror.NotFound(k.Name, name)
	}
	return proto.Clone(raw.(*roostv1.Object)).(*roostv1.Object), nil
}

// List returns copies of the objects of kind (a kind name or alias) whose
// labels match selector (Kubernetes label selector syntax, e.g.
// "env=prod,tier!=db" or "tier in (a,b)"; empty matches everything),
// sorted by name, and the last applied Raft index of the state it read.
// Errors: apierror Invalid with field "kind" for an unknown kind, or field
// "labelSelector" for a selector that does not parse.
func (f *FSM) List(kind string, selector string) ([]*roostv1.Object, uint64, error) {
	k, aerr := lookupKind(kind)
	if aerr != nil {
		return nil, 0, aerr
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, 0, apierror.Invalid("invalid label selector",
			apierror.Violation{Field: "labelSelector", Message: err.Error()})
	}
	txn := f.db.Load().Txn(false)
	it, err := txn.Get(k.Name, indexID)
	if err != nil {
		return nil, 0, internal(err)
	}
	return matching(it, sel), lastIndex(txn), nil
}

// EventsFor is List of the Events about object kind/name (kind in any
// form: "pool", "Pool"), sorted by name. Errors as List's, with field
// "involvedObject.kind" for an unknown kind.
func (f *FSM) EventsFor(kind, name, selector string) ([]*roostv1.Object, uint64, error) {
	k, err := resource.Lookup(kind)
	if err != nil {
		return nil, 0, apierror.Invalid(err.Error(), apierror.Violation{Field: "involvedObject.kind", Message: err.Error()})
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, 0, apierror.Invalid("invalid label selector",
			apierror.Violation{Field: "labelSelector", Message: err.Error()})
	}
	txn := f.db.Load().Txn(false)
	it, err := txn.Get(kindEvent, indexInvolved, refKey(k.Name, name))
	if err != nil {
		return nil, 0, internal(err)
	}
	out := matching(it, sel)
	slices.SortFunc(out, func(a, b *roostv1.Object) int { return strings.Compare(resource.NameOf(a), resource.NameOf(b)) })
	return out, lastIndex(txn), nil
}

// matching returns copies of it's objects whose labels match sel.
func matching(it memdb.ResultIterator, sel labels.Selector) []*roostv1.Object {
	var out []*roostv1.Object
	for raw := it.Next(); raw != nil; raw = it.Next() {
		o := raw.(*roostv1.Object)
		r, _ := resource.Unwrap(o)
		if sel.Matches(labels.Set(r.GetMetadata().GetLabels())) {
			out = append(out, proto.Clone(o).(*roostv1.Object))
		}
	}
	return out
}

// LastIndex returns the last applied Raft log index (0 for a new FSM).
func (f *FSM) LastIndex() uint64 {
	return lastIndex(f.db.Load().Txn(false))
}

// EachServer calls fn with every stored Server in name order, without
// copying: fn must not modify or keep the message. It is for hot paths
// (liveness) that cannot afford to clone a whole fleet.
func (f *FSM) EachServer(fn func(*roostv1.Server)) {
	it, err := f.db.Load().Txn(false).Get("Server", indexID)
	if err != nil {
		return
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		fn(raw.(*roostv1.Object).GetServer())
	}
}

// ServerState returns the lifecycle state (status.state) of Server name
// without copying the object, for per-heartbeat checks; ok is false when
// no such Server exists.
func (f *FSM) ServerState(name string) (state string, ok bool) {
	raw, err := f.db.Load().Txn(false).First("Server", indexID, name)
	if err != nil || raw == nil {
		return "", false
	}
	return raw.(*roostv1.Object).GetServer().GetStatus().GetState(), true
}

// Count returns the number of objects of a kind (CamelCase name), or 0 for
// an unknown kind.
func (f *FSM) Count(kind string) int {
	it, err := f.db.Load().Txn(false).Get(kind, indexID)
	if err != nil {
		return 0
	}
	n := 0
	for raw := it.Next(); raw != nil; raw = it.Next() {
		n++
	}
	return n
}
