package api

import (
	"context"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/blobs"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// peerAnswerTimeout bounds the wait for a peer's first FetchBlob chunk.
const peerAnswerTimeout = 30 * time.Second

// peerSource fetches blobs from one other member with FetchBlob.
type peerSource struct {
	s       *Server
	id, api string
}

func (p peerSource) String() string { return "hub member " + p.id }

// Open implements blobs.Source.
func (p peerSource) Open(ctx context.Context, digest string, offset int64) (int64, io.ReadCloser, error) {
	conn, err := p.s.peerConn(p.api)
	if err != nil {
		return 0, nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	// A member that does not answer at all must not hold up the others.
	stall := time.AfterFunc(peerAnswerTimeout, cancel)
	stream, err := roostv1.NewMemberServiceClient(conn).FetchBlob(sctx, &roostv1.FetchArtifactRequest{Sha256: digest, Offset: offset})
	var first *roostv1.ArtifactChunk
	if err == nil {
		first, err = stream.Recv()
	}
	if !stall.Stop() && err != nil {
		cancel()
		return 0, nil, fmt.Errorf("no answer within %s", peerAnswerTimeout)
	}
	if err != nil {
		cancel()
		if apierror.Code(err) == codes.NotFound {
			return 0, nil, fmt.Errorf("%w here", blobs.ErrNotFound)
		}
		return 0, nil, fmt.Errorf("%s", apierror.FromError(err).Message)
	}
	return first.GetSize(), &chunkReader{buf: first.GetData(), recv: stream.Recv, cancel: cancel}, nil
}

// chunkReader reads the data of an ArtifactChunk stream.
type chunkReader struct {
	buf    []byte
	recv   func() (*roostv1.ArtifactChunk, error)
	err    error
	cancel context.CancelFunc
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		c, err := r.recv()
		if err != nil {
			r.err = err
			continue
		}
		r.buf = c.GetData()
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *chunkReader) Close() error { r.cancel(); return nil }

// peerSources are the other members that have an API address, by id.
func (s *Server) peerSources() []blobs.Source {
	var out []blobs.Source
	for _, m := range s.fsm.Members() {
		if m.GetId() == s.memberID() || m.GetApiAddress() == "" {
			continue
		}
		out = append(out, peerSource{s: s, id: m.GetId(), api: m.GetApiAddress()})
	}
	return out
}

// fillBlob makes sure this member stores blob digest completely, fetching
// it from the other members when it does not (see blobs.Store.Fill).
func (s *Server) fillBlob(ctx context.Context, digest string) error {
	if complete, _, err := s.blobs.Stat(digest); err != nil || complete {
		return err
	}
	s.log.Info("fetching artifact from peer members", "sha256", digest)
	size, err := s.blobs.Fill(ctx, digest, s.peerSources())
	if err != nil {
		s.log.Info("artifact not fetched from peers", "sha256", digest, "err", err)
		return err
	}
	s.log.Info("artifact fetched from a peer member", "sha256", digest, "size", size)
	return nil
}

// FillBlob makes sure this member stores blob digest completely, fetching
// it from the other members when it does not: for the leader's BMC
// controller, which serves an enrollment ISO pushed to another member.
func (s *Server) FillBlob(ctx context.Context, digest string) error { return s.fillBlob(ctx, digest) }
