// Package fetch downloads image artifacts from the hub's content-addressed
// store (AgentService.FetchArtifact) into a local cache, by sha256.
//
// Layout under the cache directory:
//
//	sha256/<hex>            complete, verified artifacts
//	sha256/<hex>.partial    a download in progress, resumed from its size
//
// A download resumes where the partial file ends, retries transient
// failures (hub unavailable, stream broken, deadline, overload) with
// jittered exponential backoff until its context ends, and checks the size
// and sha256 before the file appears under its final name. The package
// speaks to the hub only through proto/ (the agent must not import hub/).
package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Errors returned by Fetch; test with errors.Is.
var (
	// ErrInvalidArtifact is returned for an artifact without a valid
	// sha256 (64 lower-case hex characters) or with a negative size.
	ErrInvalidArtifact = errors.New("invalid artifact")
	// ErrDigestMismatch is returned when the downloaded content does not
	// hash to the artifact's sha256 or has another size; the partial file
	// has been deleted.
	ErrDigestMismatch = errors.New("downloaded artifact does not match its digest")
)

// Defaults of Fetcher's backoff.
const (
	DefaultBaseDelay = 500 * time.Millisecond
	DefaultMaxDelay  = 30 * time.Second
)

// Fetcher downloads artifacts with one hub client. The zero value of each
// option field means its default.
type Fetcher struct {
	// Client is the AgentService client of the hub (an agent's mTLS
	// connection).
	Client roostv1.AgentServiceClient
	// VerifyExisting re-hashes an artifact already in the cache before
	// trusting it; by default only its size is checked.
	VerifyExisting bool
	// MaxFailures, when positive, ends Fetch with the last failure after
	// that many attempts in a row that received nothing: the client's hub
	// may be gone for good (a member killed), and the caller can retry on
	// a client of another member. Zero retries until ctx ends.
	MaxFailures int
	// BaseDelay is the first retry delay (default DefaultBaseDelay); it
	// doubles per failed attempt up to MaxDelay (default DefaultMaxDelay),
	// each delay jittered to between half and all of it. It restarts from
	// BaseDelay after an attempt that received data.
	BaseDelay, MaxDelay time.Duration
}

// Fetch downloads artifact a into dir with client; see Fetcher.Fetch.
func Fetch(ctx context.Context, client roostv1.AgentServiceClient, a *roostv1.Artifact, dir string, progress func(done, total int64)) (string, error) {
	return (&Fetcher{Client: client}).Fetch(ctx, a, dir, progress)
}

// Fetch makes artifact a available as dir/sha256/<hex> and returns that
// path. When the file exists with the right size (and, with
// VerifyExisting, content) it returns at once; otherwise it downloads into
// dir/sha256/<hex>.partial, resuming from the partial file's size, and
// renames it into place once its size and sha256 match. progress, when not
// nil, is called with the bytes held so far and the total (both in bytes)
// after every chunk.
//
// Transient failures (gRPC Unavailable, DeadlineExceeded, ResourceExhausted,
// Aborted, a stream that breaks or ends early) are retried until ctx ends,
// when ctx's error is returned (wrapping the last failure), or until
// MaxFailures attempts in a row received nothing. Errors:
// ErrInvalidArtifact, ErrDigestMismatch (naming the expected and the
// received digest), gRPC NotFound and InvalidArgument from the hub as they
// are (status.Code works on them), and local file errors. Fetch is not
// safe for concurrent calls with the same artifact and dir.
func (f *Fetcher) Fetch(ctx context.Context, a *roostv1.Artifact, dir string, progress func(done, total int64)) (string, error) {
	digest, size := a.GetSha256(), a.GetSize()
	if err := validate(digest, size); err != nil {
		return "", err
	}
	if progress == nil {
		progress = func(int64, int64) {}
	}
	cache := filepath.Join(dir, "sha256")
	final := filepath.Join(cache, digest)
	partial := final + ".partial"
	if ok, err := f.present(final, digest, size); err != nil || ok {
		if ok {
			progress(size, size)
			return final, nil
		}
		return "", err
	}
	if err := os.MkdirAll(cache, 0o700); err != nil {
		return "", fmt.Errorf("artifact cache: %w", err)
	}

	delay := f.base()
	failures := 0
	for {
		received, err := f.attempt(ctx, digest, size, partial, progress)
		if err == nil {
			break
		}
		if received > 0 {
			failures = 0
		}
		failures++
		if errors.Is(err, ErrDigestMismatch) {
			if rerr := os.Remove(partial); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				return "", errors.Join(err, rerr)
			}
			return "", err
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("fetch artifact sha256 %s: %w (last failure: %v)", digest, ctx.Err(), err)
		}
		if !transient(err) {
			return "", err
		}
		if f.MaxFailures > 0 && failures >= f.MaxFailures {
			return "", fmt.Errorf("fetch artifact sha256 %s: %d attempts in a row failed, the last: %w", digest, failures, err)
		}
		if received > 0 {
			delay = f.base()
		}
		wait := delay/2 + rand.N(delay/2+1)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", fmt.Errorf("fetch artifact sha256 %s: %w (last failure: %v)", digest, ctx.Err(), err)
		case <-t.C:
		}
		delay = min(2*delay, f.max())
	}
	if err := commit(partial, final, digest, size); err != nil {
		return "", err
	}
	return final, nil
}

func (f *Fetcher) base() time.Duration {
	if f.BaseDelay > 0 {
		return f.BaseDelay
	}
	return DefaultBaseDelay
}

func (f *Fetcher) max() time.Duration {
	if f.MaxDelay > 0 {
		return f.MaxDelay
	}
	return DefaultMaxDelay
}

func validate(digest string, size int64) error {
	if len(digest) != 2*sha256.Size {
		return fmt.Errorf("%w: sha256 %q: want 64 lower-case hex characters", ErrInvalidArtifact, digest)
	}
	for i := 0; i < len(digest); i++ {
		if c := digest[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("%w: sha256 %q: want 64 lower-case hex characters", ErrInvalidArtifact, digest)
		}
	}
	if size < 0 {
		return fmt.Errorf("%w: sha256 %s: size %d bytes is negative", ErrInvalidArtifact, digest, size)
	}
	return nil
}

// present says whether final holds the artifact; a file that does not is
// removed.
func (f *Fetcher) present(final, digest string, size int64) (bool, error) {
	st, err := os.Stat(final)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ok := st.Mode().IsRegular() && st.Size() == size
	if ok && f.VerifyExisting {
		got, _, err := hashFile(final)
		if err != nil {
			return false, err
		}
		ok = got == digest
	}
	if !ok {
		if err := os.Remove(final); err != nil {
			return false, fmt.Errorf("remove corrupt cached artifact: %w", err)
		}
	}
	return ok, nil
}

// errShort marks a stream that ended before the artifact's size.
var errShort = errors.New("the hub ended the download early")

// attempt runs one FetchArtifact call from the end of partial. It returns
// the bytes received in this call; nil means the partial file holds size
// bytes.
func (f *Fetcher) attempt(ctx context.Context, digest string, size int64, partial string, progress func(done, total int64)) (int64, error) {
	file, err := os.OpenFile(partial, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return 0, err
	}
	off := st.Size()
	if off > size {
		// Longer than the artifact: it cannot be a prefix; start over.
		if err := file.Truncate(0); err != nil {
			return 0, err
		}
		off = 0
	}
	if _, err := file.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	progress(off, size)
	if off == size {
		return 0, nil
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := f.Client.FetchArtifact(sctx, &roostv1.FetchArtifactRequest{Sha256: digest, Offset: off})
	if err != nil {
		return 0, err
	}
	var received int64
	first := true
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			_ = file.Sync() // keep what arrived for the resume; err says what failed
			return received, err
		}
		if first {
			first = false
			if chunk.GetSize() != size {
				return received, fmt.Errorf("%w: sha256 %s: the hub holds %d bytes, the artifact says %d", ErrDigestMismatch, digest, chunk.GetSize(), size)
			}
		}
		data := chunk.GetData()
		if off+int64(len(data)) > size {
			return received, fmt.Errorf("%w: sha256 %s: the hub sent more than %d bytes", ErrDigestMismatch, digest, size)
		}
		if _, err := file.Write(data); err != nil {
			return received, err
		}
		off += int64(len(data))
		received += int64(len(data))
		progress(off, size)
	}
	if err := file.Sync(); err != nil {
		return received, err
	}
	if off < size {
		return received, fmt.Errorf("fetch artifact sha256 %s: %w at %d of %d bytes", digest, errShort, off, size)
	}
	return received, nil
}

// transient says whether a failed attempt is worth retrying.
func transient(err error) bool {
	if errors.Is(err, errShort) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
			return true
		}
	}
	return false
}

// commit verifies partial and renames it to final; on a mismatch it
// deletes partial.
func commit(partial, final, digest string, size int64) error {
	got, n, err := hashFile(partial)
	if err != nil {
		return err
	}
	if got != digest || n != size {
		if rerr := os.Remove(partial); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = rerr
		}
		return errors.Join(fmt.Errorf("%w: want sha256 %s (%d bytes), got sha256 %s (%d bytes); the download was deleted",
			ErrDigestMismatch, digest, size, got, n), err)
	}
	if err := os.Rename(partial, final); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(final))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func hashFile(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
