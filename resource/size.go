package resource

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// MaxObjectBytes is the largest object (the size of its protobuf encoding)
// the hub stores: 256 KiB, Kubernetes' limit for annotations.
const MaxObjectBytes = 256 << 10

// CheckSize returns a violation (its Field empty, for the caller to set)
// when o is larger than MaxObjectBytes, with hint as its advice; nil
// otherwise. The hub checks at Apply and roostctl before sending.
func CheckSize(o *roostv1.Object, hint string) *apierror.Violation {
	n := proto.Size(o)
	if n <= MaxObjectBytes {
		return nil
	}
	return &apierror.Violation{Message: fmt.Sprintf("object is %d bytes, more than the limit of %d", n, MaxObjectBytes), Hint: hint}
}

// SizeHint is CheckSize's advice for an object from a manifest.
const SizeHint = "keep large data (certificates, scripts) small or out of annotations and lists"
