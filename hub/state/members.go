package state

import (
	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// putMember creates or replaces a hub member by id.
func (a *applier) putMember(c *roostv1.PutMember) *apierror.Error {
	m := c.GetMember()
	if m.GetId() == "" {
		return apierror.Invalid("invalid member", apierror.Violation{Field: "member.id", Message: "is required"})
	}
	if err := a.txn.Insert(tableMembers, m); err != nil {
		return internal(err)
	}
	return nil
}

// deleteMember removes a hub member; NotFound when there is none with the id.
func (a *applier) deleteMember(c *roostv1.DeleteMember) *apierror.Error {
	raw, err := a.txn.First(tableMembers, indexID, c.GetId())
	if err != nil {
		return internal(err)
	}
	if raw == nil {
		return apierror.NotFound("HubMember", c.GetId())
	}
	if err := a.txn.Delete(tableMembers, raw); err != nil {
		return internal(err)
	}
	return nil
}

// Members returns copies of the recorded hub members, sorted by id.
func (f *FSM) Members() []*roostv1.HubMember {
	var out []*roostv1.HubMember
	it, err := f.db.Load().Txn(false).Get(tableMembers, indexID)
	if err != nil {
		return nil
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, proto.Clone(raw.(*roostv1.HubMember)).(*roostv1.HubMember))
	}
	return out
}
