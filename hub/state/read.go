package state

import (
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
	var out []*roostv1.Object
	for raw := it.Next(); raw != nil; raw = it.Next() {
		o := raw.(*roostv1.Object)
		r, _ := resource.Unwrap(o)
		if sel.Matches(labels.Set(r.GetMetadata().GetLabels())) {
			out = append(out, proto.Clone(o).(*roostv1.Object))
		}
	}
	return out, lastIndex(txn), nil
}

// LastIndex returns the last applied Raft log index (0 for a new FSM).
func (f *FSM) LastIndex() uint64 {
	return lastIndex(f.db.Load().Txn(false))
}
