package resource

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// writeOnly are the fields the hub accepts in an apply but never returns
// from a read: secrets, such as a Cluster's spec.kubeconfig (its
// status.credentialsSet says whether one is stored).
var writeOnly = map[protoreflect.FullName]bool{
	"roost.v1.ClusterSpec.kubeconfig": true,
	// A Server's BMC account (status.bmc.credentialsSet says it is set).
	"roost.v1.BMC.username": true,
	"roost.v1.BMC.password": true,
}

// IsWriteOnly says whether fd is a write-only field.
func IsWriteOnly(fd protoreflect.FieldDescriptor) bool { return writeOnly[fd.FullName()] }

// StripWriteOnly returns obj without its write-only fields: obj itself when
// it holds none, else a copy with them cleared. Reads (get, watch, -o
// json|yaml) pass objects through it, so that a secret never leaves the
// hub even if it were stored in an object.
func StripWriteOnly(obj *roostv1.Object) *roostv1.Object {
	if obj == nil || !hasWriteOnly(obj.ProtoReflect()) {
		return obj
	}
	cp := proto.Clone(obj).(*roostv1.Object)
	clearWriteOnly(cp.ProtoReflect())
	return cp
}

// StripWriteOnlyAll applies StripWriteOnly to every object; the slice is
// a new one only when an object changed.
func StripWriteOnlyAll(objs []*roostv1.Object) []*roostv1.Object {
	var out []*roostv1.Object
	for i, o := range objs {
		s := StripWriteOnly(o)
		if s != o && out == nil {
			out = append(make([]*roostv1.Object, 0, len(objs)), objs[:i]...)
		}
		if out != nil {
			out = append(out, s)
		}
	}
	if out == nil {
		return objs
	}
	return out
}

// hasWriteOnly says whether m or a message inside it has a write-only
// field set.
func hasWriteOnly(m protoreflect.Message) bool {
	found := false
	walkMessages(m, func(fd protoreflect.FieldDescriptor, m protoreflect.Message) {
		if writeOnly[fd.FullName()] {
			found = true
		}
	})
	return found
}

func clearWriteOnly(m protoreflect.Message) {
	walkMessages(m, func(fd protoreflect.FieldDescriptor, m protoreflect.Message) {
		if writeOnly[fd.FullName()] {
			m.Clear(fd)
		}
	})
}

// walkMessages calls fn for every set field of m and of the messages
// inside it (in lists and maps too). fn may clear the field it is given.
func walkMessages(m protoreflect.Message, fn func(protoreflect.FieldDescriptor, protoreflect.Message)) {
	var fds []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		fds = append(fds, fd)
		return true
	})
	for _, fd := range fds {
		switch v := m.Get(fd); {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				walkMessages(v.List().Get(i).Message(), fn)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				walkMessages(mv.Message(), fn)
				return true
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			walkMessages(v.Message(), fn)
		}
		fn(fd, m)
	}
}
