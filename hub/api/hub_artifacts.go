package api

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
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

// ArtifactChunkSize is the size in bytes of the data of each ArtifactChunk
// FetchArtifact sends (the last one may be shorter): 1 MiB.
const ArtifactChunkSize = 1 << 20

// Artifacts (PushArtifact, StatArtifact, FetchArtifact) live in the
// content-addressed store of the member that received them (hub/blobs);
// Raft does not replicate them. A member that misses a blob when an agent
// fetches it (FetchArtifact) or a release names it (PutImageRelease)
// copies it from the other members by digest (MemberService.FetchBlob,
// resumed and sha256-verified like an upload) and then serves it; only
// when no member holds it does the call fail (NotFound, or
// FailedPrecondition for PutImageRelease). StatArtifact answers for this
// member alone.

// PushArtifact receives one blob: the first message names the digest, the
// total size in bytes and the offset to resume from (StatArtifact's size),
// and every message may carry data. The response gives the bytes stored
// when the stream ended (the size once the blob is complete). An upload
// that ends early is kept and can be resumed. Errors: InvalidArgument (bad
// digest, offset not the stored size, data past size), DataLoss (the
// content does not hash to the digest; the upload was discarded), Aborted
// (another upload of the same digest is running on this member),
// FailedPrecondition (the member has no blob store).
func (s *Server) PushArtifact(stream grpc.ClientStreamingServer[roostv1.PushArtifactRequest, roostv1.PushArtifactResponse]) error {
	if err := s.checkBlobs(); err != nil {
		return err
	}
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return apierror.Invalid("empty PushArtifact stream", apierror.Violation{Field: "sha256", Message: "the first message must name sha256, size and offset"})
	}
	if err != nil {
		return err
	}
	digest := first.GetSha256()
	if err := blobs.ValidateDigest(digest); err != nil {
		return blobError(err, "sha256", digest)
	}
	r := &pushReader{stream: stream, buf: first.GetData()}
	stored, err := s.blobs.Append(digest, first.GetSize(), first.GetOffset(), r)
	if err != nil {
		if r.recvErr != nil && errors.Is(err, r.recvErr) {
			// The client went away or broke the stream: the bytes it sent
			// are kept for a resume.
			s.log.Info("artifact upload interrupted", "sha256", digest, "stored", stored, "size", first.GetSize(), "err", err)
			return err
		}
		return blobError(err, "sha256", digest)
	}
	if stored == first.GetSize() {
		s.log.Info("artifact stored", "sha256", digest, "size", stored)
	}
	return stream.SendAndClose(&roostv1.PushArtifactResponse{Sha256: digest, Size: stored})
}

// pushReader reads the data of a PushArtifact stream after the first
// message. It keeps the stream's receive error (io.EOF at the end).
type pushReader struct {
	stream  grpc.ClientStreamingServer[roostv1.PushArtifactRequest, roostv1.PushArtifactResponse]
	buf     []byte
	recvErr error
}

func (r *pushReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.recvErr != nil {
			return 0, r.recvErr
		}
		m, err := r.stream.Recv()
		if err != nil {
			r.recvErr = err
			continue
		}
		r.buf = m.GetData()
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// StatArtifact says whether a blob is stored completely on this member, or
// how many bytes of an upload it holds. A complete blob is marked used
// (blobs.Store.Touch): a client that skips its upload because of the
// answer records the release naming it within the blob garbage
// collection's grace. Errors: InvalidArgument (bad digest),
// FailedPrecondition (the member has no blob store).
func (s *Server) StatArtifact(_ context.Context, req *roostv1.StatArtifactRequest) (*roostv1.StatArtifactResponse, error) {
	if err := s.checkBlobs(); err != nil {
		return nil, err
	}
	if size, err := s.blobs.Touch(req.GetSha256()); err == nil {
		return &roostv1.StatArtifactResponse{Complete: true, Size: size}, nil
	}
	complete, size, err := s.blobs.Stat(req.GetSha256())
	if err != nil {
		return nil, blobError(err, "sha256", req.GetSha256())
	}
	return &roostv1.StatArtifactResponse{Complete: complete, Size: size}, nil
}

// FetchArtifact streams a blob from offset (bytes) in chunks of
// ArtifactChunkSize; the first chunk carries the total size, and an offset
// equal to the size yields one empty chunk. A blob this member misses is
// first copied from another member (see above). Errors: InvalidArgument
// (malformed digest, negative offset or an offset past the end), NotFound
// (no member stores the blob completely), Aborted (an upload of the blob
// to this member is running), FailedPrecondition (no blob store).
func (s *Server) FetchArtifact(req *roostv1.FetchArtifactRequest, stream grpc.ServerStreamingServer[roostv1.ArtifactChunk]) error {
	if err := s.checkBlobs(); err != nil {
		return err
	}
	digest := req.GetSha256()
	f, size, err := s.blobs.Open(digest)
	if errors.Is(err, blobs.ErrNotFound) {
		if ferr := s.fillBlob(stream.Context(), digest); ferr != nil {
			if errors.Is(ferr, blobs.ErrNotFound) {
				return &apierror.Error{Code: codes.NotFound, Message: fmt.Sprintf("artifact sha256 %s is stored on no hub member "+
					"(asked %s first; %s): push it with 'roostctl image push'", digest, s.memberID(), strings.TrimPrefix(ferr.Error(), blobs.ErrNotFound.Error()+": "))}
			}
			return blobError(ferr, "sha256", digest)
		}
		f, size, err = s.blobs.Open(digest)
	}
	if err != nil {
		return blobError(err, "sha256", digest)
	}
	defer f.Close()
	off := req.GetOffset()
	if off < 0 || off > size {
		return apierror.Invalid("offset out of range", apierror.Violation{Field: "offset",
			Message: fmt.Sprintf("offset %d is outside the blob of %d bytes", off, size), Hint: fmt.Sprintf("use 0 to %d", size)})
	}
	return sendBlob(f, digest, off, size, stream)
}

// sendBlob streams f (blob digest of size bytes) from off in chunks of
// ArtifactChunkSize; the first chunk carries the size.
func sendBlob(f io.ReadSeeker, digest string, off, size int64, stream grpc.ServerStreamingServer[roostv1.ArtifactChunk]) error {
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	first := true
	for {
		// A fresh buffer per chunk: gRPC may still hold the previous message.
		buf := make([]byte, min(int64(ArtifactChunkSize), size-off))
		n, rerr := io.ReadFull(f, buf)
		off += int64(n)
		if n > 0 || first {
			c := &roostv1.ArtifactChunk{Data: buf[:n]}
			if first {
				c.Size = size
				first = false
			}
			if err := stream.Send(c); err != nil {
				return err
			}
		}
		switch {
		case off >= size:
			return nil
		case rerr != nil:
			return fmt.Errorf("read blob sha256 %s at offset %d: %w", digest, off, rerr)
		}
	}
}

func (s *Server) checkBlobs() error {
	if s.blobs == nil {
		return apierror.FailedPrecondition("hub member %s has no artifact store configured", s.memberID())
	}
	return nil
}

func (s *Server) memberID() string {
	if s.node == nil {
		return "(unknown)"
	}
	return s.node.ID()
}

// blobError maps a hub/blobs error to an API error; field names the
// request field that holds digest.
func blobError(err error, field, digest string) error {
	switch {
	case errors.Is(err, blobs.ErrInvalidDigest):
		return apierror.Invalid("invalid digest", apierror.Violation{Field: field, Message: err.Error(),
			Hint: "give the lower-case hex sha256 of the content, without a \"sha256:\" prefix"})
	case errors.Is(err, blobs.ErrOffset):
		return apierror.Invalid("wrong upload offset", apierror.Violation{Field: "offset", Message: err.Error(),
			Hint: "ask StatArtifact for the stored size and resume there"})
	case errors.Is(err, blobs.ErrTooLarge):
		return apierror.Invalid("too much data", apierror.Violation{Field: "data", Message: err.Error(), Hint: "send exactly size bytes"})
	case errors.Is(err, blobs.ErrDigestMismatch):
		return &apierror.Error{Code: codes.DataLoss, Message: err.Error() + "; push the artifact again from offset 0"}
	case errors.Is(err, blobs.ErrBusy):
		return &apierror.Error{Code: codes.Aborted, Message: err.Error()}
	case errors.Is(err, blobs.ErrNotFound):
		return &apierror.Error{Code: codes.NotFound, Message: fmt.Sprintf("artifact sha256 %s is not stored on the hub member that answered: "+
			"push it with 'roostctl image push'", digest)}
	}
	return err
}

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

// checkArtifactsStored fails with FailedPrecondition naming the first
// artifact of spec this member does not store completely (after trying to
// copy it from the other members), or whose stored size differs from the
// spec's. It marks the artifacts used (blobs.Store.Touch), so the blob
// garbage collection spares them until the release reaches every member.
func (s *Server) checkArtifactsStored(ctx context.Context, spec *roostv1.ImageReleaseSpec) error {
	if err := s.checkBlobs(); err != nil {
		return err
	}
	for _, ra := range releaseArtifacts(spec) {
		if ra.a == nil {
			continue
		}
		if err := s.fillBlob(ctx, ra.a.GetSha256()); err != nil && !errors.Is(err, blobs.ErrNotFound) {
			return blobError(err, "release.spec."+ra.field+".sha256", ra.a.GetSha256())
		}
		complete := true
		size, err := s.blobs.Touch(ra.a.GetSha256())
		if errors.Is(err, blobs.ErrNotFound) {
			complete, size, err = s.blobs.Stat(ra.a.GetSha256())
		}
		if err != nil {
			return blobError(err, "release.spec."+ra.field+".sha256", ra.a.GetSha256())
		}
		if !complete {
			return apierror.FailedPrecondition("%s artifact sha256 %s is stored on no hub member (hub member %s has %d of %d bytes): push it first ('roostctl image push')",
				ra.name, ra.a.GetSha256(), s.memberID(), size, ra.a.GetSize())
		}
		if size != ra.a.GetSize() {
			return apierror.FailedPrecondition("%s artifact sha256 %s is stored with %d bytes, but the release says %d", ra.name, ra.a.GetSha256(), size, ra.a.GetSize())
		}
	}
	return nil
}
