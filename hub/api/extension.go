package api

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/blobs"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Extensions (systemd-sysext images) are pushed like releases: the .raw
// goes into the blob store with PushArtifact, then an Apply whose objects
// are all Extensions records them (roostctl extension push). The member
// that receives the Apply checks that it stores every image completely,
// copying missing ones from its peers, as PutImageRelease does; the
// leader's FSM checks the rest (immutability, signature once a release
// key is trusted, the MachineClasses that follow them: see
// hub/state/extensions.go) and its warnings come back as WarningHeader
// values. Get, List, Watch and Delete are the generic ones (kind
// Extension).

// applyExtensions handles what Apply does differently for Extensions, and
// says whether it handled the request (done): an Apply whose objects are
// all Extensions is a push (pushExtensions); one that mixes them with
// other kinds is refused (InvalidArgument); a MachineClass that names
// extensions is refused while a member's roost-hub does not know them
// (FailedPrecondition). Anything else is left to Apply.
func (s *Server) applyExtensions(ctx context.Context, req *roostv1.ApplyRequest) (resp *roostv1.ApplyResponse, done bool, err error) {
	n := 0
	for _, o := range req.GetObjects() {
		if o.GetExtension() != nil {
			n++
		}
	}
	switch {
	case n > 0 && n == len(req.GetObjects()):
		resp, err := s.pushExtensions(ctx, req)
		return resp, true, err
	case n > 0:
		var vs []apierror.Violation
		for i, o := range req.GetObjects() {
			if o.GetExtension() != nil {
				vs = append(vs, apierror.Violation{Field: fmt.Sprintf("objects[%d].kind", i),
					Message: "Extensions are pushed on their own, not applied with other objects",
					Hint:    "push them with 'roostctl extension push NAME-VERSION.raw'"})
			}
		}
		return nil, true, apierror.Invalid("invalid objects", vs...)
	}
	for i, o := range req.GetObjects() {
		if len(o.GetMachineClass().GetSpec().GetExtensions()) == 0 {
			continue
		}
		if err := s.checkExtensionRules(fmt.Sprintf("objects[%d].spec.extensions", i)); err != nil {
			return nil, true, err
		}
	}
	return nil, false, nil
}

// checkExtensionRules fails with FailedPrecondition (field) while the hub
// applies rules older than state.RulesExtensions: a member runs a
// roost-hub that does not know Extensions.
func (s *Server) checkExtensionRules(field string) error {
	members := s.fsm.Members()
	if v := state.EffectiveRules(members); v < state.RulesExtensions {
		var old []string
		for _, m := range members {
			if m.GetRulesVersion() < state.RulesExtensions {
				old = append(old, fmt.Sprintf("%s (%s)", m.GetId(), orUnknown(m.GetHubVersion())))
			}
		}
		return apierror.FailedPreconditionFields("a hub member does not know Extensions yet",
			apierror.Violation{Field: field, Message: fmt.Sprintf("the hub applies rules version %d, and Extensions need %d: member %s runs an older roost-hub",
				v, state.RulesExtensions, strings.Join(old, ", ")), Hint: "upgrade roost-hub on every member first ('roostctl hub members')"})
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "version unknown"
	}
	return s
}

// pushExtensions records the Extensions of req (every object is one):
// each is named after its name and version when metadata.name is empty,
// validated (InvalidArgument, fields "objects[I]...."), its image must be
// stored completely on this member (FailedPrecondition otherwise, see
// checkImageStored), and the leader applies them all or nothing (dry runs
// too). Errors: those, and the FSM's (FailedPrecondition: immutable,
// untrusted signature, a class that follows it cannot use it).
func (s *Server) pushExtensions(ctx context.Context, req *roostv1.ApplyRequest) (*roostv1.ApplyResponse, error) {
	objs := make([]*roostv1.Object, len(req.GetObjects()))
	var vs []apierror.Violation
	for i, o := range req.GetObjects() {
		x := proto.Clone(o.GetExtension()).(*roostv1.Extension)
		if x.Metadata == nil {
			x.Metadata = &roostv1.ObjectMeta{}
		}
		if x.Metadata.Name == "" {
			x.Metadata.Name = resource.ExtensionObjectName(x.GetSpec().GetName(), x.GetSpec().GetVersion())
		}
		objs[i] = resource.Wrap(x)
		prefix := fmt.Sprintf("objects[%d]", i)
		if v := resource.CheckSize(objs[i], "an extension ships at most a few thousand paths: split a larger one"); v != nil {
			v.Field = prefix
			vs = append(vs, *v)
			continue
		}
		for _, v := range resource.Validate(objs[i]) {
			v.Field = prefix + "." + v.Field
			vs = append(vs, v)
		}
	}
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid Extension", vs...)
	}
	if !isForwarded(ctx) {
		for i, o := range objs {
			if err := s.checkImageStored(ctx, fmt.Sprintf("objects[%d].spec.image.sha256", i), o.GetExtension()); err != nil {
				return nil, err
			}
		}
	}
	fwd := &roostv1.ApplyRequest{Objects: objs, DryRun: req.GetDryRun()}
	return onLeader(ctx, s, func() (*roostv1.ApplyResponse, error) {
		if err := s.checkExtensionRules("objects"); err != nil {
			return nil, err
		}
		res, err := s.proposeRequest(ctx, fwd, &roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{
			Objects: objs, Uids: newUIDs(len(objs)), DryRun: req.GetDryRun(),
		}}})
		if err != nil {
			return nil, err
		}
		for _, w := range res.Warnings {
			setWarning(ctx, w)
		}
		return &roostv1.ApplyResponse{Results: res.Results, Index: res.Index}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.ApplyResponse, error) {
		var hdr metadata.MD
		resp, err := roostv1.NewHubServiceClient(c).Apply(fctx, fwd, grpc.Header(&hdr))
		for _, w := range hdr.Get(WarningHeader) {
			setWarning(ctx, w)
		}
		return resp, err
	})
}

// checkImageStored fails with FailedPrecondition when this member does not
// store x's image completely (after trying to copy it from the other
// members) or stores it with another size; field names the digest in the
// request. It marks the image used (blobs.Store.Touch), so the blob
// garbage collection spares it until the Extension reaches every member.
func (s *Server) checkImageStored(ctx context.Context, field string, x *roostv1.Extension) error {
	if err := s.checkBlobs(); err != nil {
		return err
	}
	img := x.GetSpec().GetImage()
	if err := s.fillBlob(ctx, img.GetSha256()); err != nil && !errors.Is(err, blobs.ErrNotFound) {
		return blobError(err, field, img.GetSha256())
	}
	complete := true
	size, err := s.blobs.Touch(img.GetSha256())
	if errors.Is(err, blobs.ErrNotFound) {
		complete, size, err = s.blobs.Stat(img.GetSha256())
	}
	if err != nil {
		return blobError(err, field, img.GetSha256())
	}
	name := fmt.Sprintf("extension %s %s", x.GetSpec().GetName(), x.GetSpec().GetVersion())
	if !complete {
		return apierror.FailedPrecondition("the image of %s (sha256 %s) is stored on no hub member (hub member %s has %d of %d bytes): "+
			"push it first ('roostctl extension push' uploads it)", name, img.GetSha256(), s.memberID(), size, img.GetSize())
	}
	if size != img.GetSize() {
		return apierror.FailedPrecondition("the image of %s (sha256 %s) is stored with %d bytes, but the extension says %d", name, img.GetSha256(), size, img.GetSize())
	}
	return nil
}
