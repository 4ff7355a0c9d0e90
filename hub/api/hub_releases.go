package api

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/blobs"
	"github.com/roostfleet/roost/hub/state"
	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// ImageReleaseName is the name of the ImageRelease of version: "v" and the
// lower-cased version, with every character that is not a letter or a
// digit replaced by "-" ("2026.11.0" → "v2026-11-0"); see release.Name.
func ImageReleaseName(version string) string { return release.Name(version) }

// PutImageRelease validates an ImageRelease and creates or updates it
// through the same Raft command as Apply. The member that receives the call
// checks that it stores every artifact completely, copying missing ones
// from the other members; the leader, when the call is forwarded to it,
// trusts that check. Once at least one release key is trusted
// (TrustReleaseKey), the leader also checks that a trusted key signed the
// manifest; while none is, it records the release unchecked and says so in
// a WarningHeader. A release that is recorded already keeps its channels
// (PromoteImageRelease changes them; the channels of the request count
// only for a new release) and must be sent again unchanged but for its
// labels and annotations: the FSM checks both (state.RulesImageReleases).
// Errors: InvalidArgument (field violations under "release."),
// FailedPrecondition (an artifact no member stores, named by its digest; a
// release no trusted key signed; another release under the same version),
// Unavailable (no leader).
func (s *Server) PutImageRelease(ctx context.Context, req *roostv1.PutImageReleaseRequest) (*roostv1.PutImageReleaseResponse, error) {
	if req.GetRelease() == nil {
		return nil, apierror.Invalid("no release", apierror.Violation{Field: "release", Message: "is required"})
	}
	ir := proto.Clone(req.GetRelease()).(*roostv1.ImageRelease)
	if ir.Metadata == nil {
		ir.Metadata = &roostv1.ObjectMeta{}
	}
	if ir.Metadata.Name == "" && ir.GetSpec().GetVersion() != "" {
		ir.Metadata.Name = ImageReleaseName(ir.GetSpec().GetVersion())
	}
	obj := &roostv1.Object{Kind: &roostv1.Object_ImageRelease{ImageRelease: ir}}
	vs := validateImageRelease(ir)
	for _, v := range resource.Validate(obj) {
		v.Field = "release." + v.Field
		vs = append(vs, v)
	}
	if v := resource.CheckSize(obj, "the manifest should be a small JSON document"); v != nil {
		v.Field = "release"
		vs = append(vs, *v)
	}
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid ImageRelease", vs...)
	}
	if !isForwarded(ctx) {
		if err := s.checkArtifactsStored(ctx, ir.GetSpec()); err != nil {
			return nil, err
		}
	}
	fwd := &roostv1.PutImageReleaseRequest{Release: ir}
	return onLeader(ctx, s, func() (*roostv1.PutImageReleaseResponse, error) {
		// The FSM keeps a release immutable and keeps its channels
		// (state.RulesImageReleases); while a member implements older
		// rules, the leader checks the release before proposing and puts
		// the stored channels back, as those rules need.
		if state.EffectiveRules(s.fsm.Members()) < state.RulesImageReleases {
			if o, err := s.fsm.Get("ImageRelease", ir.Metadata.Name); err == nil {
				old := o.GetImageRelease()
				if aerr := state.CheckImageReleasePut(ir, old); aerr != nil {
					return nil, aerr
				}
				if ir.Spec == nil {
					ir.Spec = &roostv1.ImageReleaseSpec{}
				}
				ir.Spec.Channels = old.GetSpec().GetChannels()
			}
		}
		warning, err := s.checkReleaseSignature(ir.GetSpec())
		if err != nil {
			return nil, err
		}
		setWarning(ctx, warning)
		res, err := s.proposeRequest(ctx, req, &roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{
			Objects: []*roostv1.Object{obj}, Uids: newUIDs(1),
		}}})
		if err != nil {
			return nil, err
		}
		stored, err := s.fsm.Get("ImageRelease", ir.Metadata.Name)
		if err != nil {
			return nil, err
		}
		var action string
		if len(res.Results) > 0 {
			action = res.Results[0].GetAction()
		}
		return &roostv1.PutImageReleaseResponse{Release: stored.GetImageRelease(), Action: action, Index: res.Index}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.PutImageReleaseResponse, error) {
		var hdr metadata.MD
		resp, err := roostv1.NewHubServiceClient(c).PutImageRelease(fctx, fwd, grpc.Header(&hdr))
		for _, w := range hdr.Get(WarningHeader) {
			setWarning(ctx, w) // pass the leader's warnings on
		}
		return resp, err
	})
}

// releaseArtifacts pairs the manifest's artifact names with the spec's.
func releaseArtifacts(spec *roostv1.ImageReleaseSpec) []struct {
	name, field string
	a           *roostv1.Artifact
} {
	return []struct {
		name, field string
		a           *roostv1.Artifact
	}{
		{"kernel", "kernel", spec.GetKernel()},
		{"initrd", "initrd", spec.GetInitrd()},
		{"bootloader", "bootLoader", spec.GetBootLoader()},
	}
}

// validateImageRelease checks what resource.Validate does not know about an
// ImageRelease: its name, version, artifacts, signature and manifest.
func validateImageRelease(ir *roostv1.ImageRelease) []apierror.Violation {
	var vs []apierror.Violation
	add := func(field, msg, hint string) {
		vs = append(vs, apierror.Violation{Field: "release." + field, Message: msg, Hint: hint})
	}
	spec := ir.GetSpec()
	version := spec.GetVersion()
	if version == "" {
		add("spec.version", "is required", `set the release's version, e.g. "2026.11.0"`)
	} else if err := release.ValidateVersion(version); err != nil {
		add("spec.version", "invalid version "+err.Error(), "make the release again with a valid version in the image definition (roost-image release)")
	} else if want := ImageReleaseName(version); ir.GetMetadata().GetName() != want {
		add("metadata.name", fmt.Sprintf("%q does not match version %q", ir.GetMetadata().GetName(), version),
			fmt.Sprintf("name it %q, or leave the name empty", want))
	}
	for i, c := range spec.GetChannels() {
		if msgs := validation.IsDNS1123Label(c); len(msgs) > 0 {
			add(fmt.Sprintf("spec.channels[%d]", i), fmt.Sprintf("invalid channel %q: %s", c, strings.Join(msgs, "; ")), `use a name such as "stable"`)
		}
	}
	for _, ra := range releaseArtifacts(spec) {
		if ra.a == nil {
			if ra.name != "bootloader" {
				add("spec."+ra.field, "is required", "")
			}
			continue
		}
		if err := blobs.ValidateDigest(ra.a.GetSha256()); err != nil {
			add("spec."+ra.field+".sha256", err.Error(), "give the lower-case hex sha256 of the file")
		}
		if ra.a.GetSize() < 0 {
			add("spec."+ra.field+".size", fmt.Sprintf("must be ≥ 0 bytes, got %d", ra.a.GetSize()), "")
		}
	}
	if sig, err := base64.StdEncoding.DecodeString(spec.GetSignature()); spec.GetSignature() == "" {
		add("spec.signature", "is required", "sign the release (roost-image release --manifest DEF --key KEY) and send the content of "+release.SignatureFile)
	} else if err != nil || len(sig) != ed25519.SignatureSize {
		add("spec.signature", fmt.Sprintf("not a base64 ed25519 signature (%d bytes decoded, want %d)", len(sig), ed25519.SignatureSize),
			"send the content of "+release.SignatureFile)
	}
	if len(spec.GetManifest()) == 0 {
		add("spec.manifest", "is required", "send "+release.ManifestFile+" verbatim")
		return vs
	}
	var m release.Manifest
	if err := json.Unmarshal(spec.GetManifest(), &m); err != nil {
		add("spec.manifest", fmt.Sprintf("not JSON: %v", err), "send "+release.ManifestFile+" verbatim")
		return vs
	}
	if m.Kind != release.ReleaseKind {
		add("spec.manifest", fmt.Sprintf("kind %q, want %q", m.Kind, release.ReleaseKind), "send "+release.ManifestFile+" verbatim")
	}
	if version != "" && m.Version != version {
		add("spec.version", fmt.Sprintf("%q, but the manifest says %q", version, m.Version), "take the version from the manifest")
	}
	if !slices.Equal(spec.GetUpgradesFrom(), m.UpgradesFrom) {
		add("spec.upgradesFrom", fmt.Sprintf("%q, but the signed manifest says %q", spec.GetUpgradesFrom(), m.UpgradesFrom), "take upgradesFrom from the manifest")
	}
	if n := resource.JoinedLen(m.Cmdline); n > resource.ReleaseCmdlineBudget {
		add("spec.manifest", fmt.Sprintf("cmdline takes %d bytes joined, more than the %d a release has of the kernel command line (the kernel keeps %d; MachineClasses, the hub and the boot loader need the rest)",
			n, resource.ReleaseCmdlineBudget, resource.KernelCommandLineSize),
			"shorten cmdline in the image definition and make the release again (roost-image release)")
	}
	for _, ra := range releaseArtifacts(spec) {
		ma, ok := m.Artifact(ra.name)
		switch {
		case !ok && ra.a == nil:
		case !ok:
			add("spec."+ra.field, fmt.Sprintf("the manifest lists no %s artifact", ra.name), "take the artifacts from the manifest")
		case ra.a == nil:
			add("spec."+ra.field, fmt.Sprintf("is missing, but the manifest lists %s sha256 %s", ra.name, ma.SHA256), "take the artifacts from the manifest")
		case ma.SHA256 != ra.a.GetSha256() || ma.Size != ra.a.GetSize():
			add("spec."+ra.field, fmt.Sprintf("sha256 %s (%d bytes), but the manifest says sha256 %s (%d bytes)", ra.a.GetSha256(), ra.a.GetSize(), ma.SHA256, ma.Size),
				"take the artifacts from the manifest")
		}
	}
	return vs
}

// PromoteImageRelease adds a channel to the release of a version (or
// removes it); nothing else of a release ever changes. Pools following a
// channel take the newest release on it. Errors: InvalidArgument (no
// version, channel not a DNS label), NotFound.
func (s *Server) PromoteImageRelease(ctx context.Context, req *roostv1.PromoteImageReleaseRequest) (*roostv1.PromoteImageReleaseResponse, error) {
	vs := state.ValidateChannel("channel", req.GetChannel())
	if req.GetVersion() == "" {
		vs = append([]apierror.Violation{{Field: "version", Message: "is required", Hint: `give the release's version, e.g. "2026.11.0"`}}, vs...)
	}
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid promotion", vs...)
	}
	return onLeader(ctx, s, func() (*roostv1.PromoteImageReleaseResponse, error) {
		res, err := s.proposeRequest(ctx, req, &roostv1.Command{Command: &roostv1.Command_PromoteImageRelease{PromoteImageRelease: &roostv1.PromoteImageRelease{
			Version: req.GetVersion(), Channel: req.GetChannel(), Remove: req.GetRemove()}}})
		if err != nil {
			return nil, err
		}
		if len(res.Results) != 1 {
			return nil, fmt.Errorf("promote: %d results, want 1", len(res.Results))
		}
		o, err := s.fsm.Get("ImageRelease", res.Results[0].GetName())
		if err != nil {
			return nil, err
		}
		return &roostv1.PromoteImageReleaseResponse{Release: o.GetImageRelease(), Unchanged: res.Results[0].GetAction() == state.ActionUnchanged}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.PromoteImageReleaseResponse, error) {
		return roostv1.NewHubServiceClient(c).PromoteImageRelease(fctx, req)
	})
}
