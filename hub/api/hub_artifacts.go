package api

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/blobs"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
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
