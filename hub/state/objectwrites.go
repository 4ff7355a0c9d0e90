package state

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// put stores r (a fresh clone, never a stored message) and records a watch
// event.
func (a *applier) put(r resource.Resource, created bool) *apierror.Error {
	obj := resource.Wrap(r)
	if err := a.txn.Insert(resource.KindOf(r).Name, obj); err != nil {
		return internal(err)
	}
	typ := roostv1.WatchEvent_TYPE_MODIFIED
	if created {
		typ = roostv1.WatchEvent_TYPE_ADDED
	}
	a.events = append(a.events, newEvent(typ, resource.KindOf(r).Name, obj, a.index))
	return nil
}

// touch updates the hub-set metadata of a changed object.
func (a *applier) touch(md *roostv1.ObjectMeta, specChanged bool) {
	md.ModifyIndex = a.index
	if specChanged {
		md.Generation++
	}
}

// newMeta is the metadata of an object the FSM creates.
func (a *applier) newMeta(name, uid string, now *timestamppb.Timestamp) *roostv1.ObjectMeta {
	return &roostv1.ObjectMeta{Name: name, Uid: uid, Generation: 1, CreateIndex: a.index, ModifyIndex: a.index, CreationTimestamp: now}
}
