package blobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// DefaultFillTimeout bounds one Fill's fetch from its sources.
const DefaultFillTimeout = time.Hour

// Source is a place Fill copies blobs from: another hub member's store.
type Source interface {
	// String names the source in errors, e.g. the member's id.
	String() string
	// Open returns the total size of blob digest and a reader of its
	// bytes from offset on; the reader may end early (Fill resumes from
	// the next source). For an offset past the end it returns the size
	// and an empty reader (Fill then drops its partial upload). An error wrapping ErrNotFound means the source
	// does not hold the blob completely.
	Open(ctx context.Context, digest string, offset int64) (size int64, r io.ReadCloser, err error)
}

// fillCall is one fetch in flight; its waiters share the result.
type fillCall struct {
	done chan struct{}
	size int64
	err  error
}

// SetFillTimeout changes how long one fetch of Fill may take (default
// DefaultFillTimeout).
func (s *Store) SetFillTimeout(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fillTimeout = d
}

// Fill makes sure blob digest is stored completely and returns its size.
// A blob already complete is not fetched. Otherwise the missing bytes are
// copied from the first source that holds it, in order, resuming the
// partial upload already stored (from an earlier fill or an interrupted
// push); the content is verified against digest before it appears, as
// with Append. A source that breaks off leaves its bytes for the next one;
// content that does not match is discarded and the next source starts
// over.
//
// Concurrent Fills of one digest share one fetch. The fetch is not bound
// to ctx (only to the fill timeout), so a caller that gives up (ctx done,
// returning ctx's error) leaves it running for the next caller. Errors:
// ErrInvalidDigest; ErrNotFound when no source has it (the message says
// what each source answered); ErrBusy while an Append of digest runs.
func (s *Store) Fill(ctx context.Context, digest string, sources []Source) (int64, error) {
	if err := ValidateDigest(digest); err != nil {
		return 0, err
	}
	if complete, size, err := s.Stat(digest); err != nil || complete {
		return size, err
	}
	s.mu.Lock()
	c, ok := s.fills[digest]
	if !ok {
		c = &fillCall{done: make(chan struct{})}
		s.fills[digest] = c
		timeout := s.fillTimeout
		go func() {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
			defer cancel()
			c.size, c.err = s.fill(fctx, digest, sources)
			s.mu.Lock()
			delete(s.fills, digest)
			s.mu.Unlock()
			close(c.done)
		}()
	}
	s.mu.Unlock()
	select {
	case <-c.done:
		return c.size, c.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// fill fetches digest from sources (see Fill).
func (s *Store) fill(ctx context.Context, digest string, sources []Source) (int64, error) {
	if !s.lock(digest) {
		return 0, fmt.Errorf("%w: sha256 %s; retry when it ends", ErrBusy, digest)
	}
	defer s.unlock(digest)
	var answers []string
	for _, src := range sources {
		// A second round only after a partial upload longer than the blob
		// was discarded.
		for round := 0; round < 2; round++ {
			complete, have, err := s.Stat(digest)
			if err != nil {
				return 0, err
			}
			if complete {
				return have, nil
			}
			size, r, err := src.Open(ctx, digest, have)
			if err != nil {
				answers = append(answers, fmt.Sprintf("%s: %v", src, err))
				break
			}
			if size < have {
				r.Close()
				if err := os.Remove(s.partialPath(digest)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return 0, err
				}
				continue
			}
			stored, err := s.appendLocked(digest, size, have, r)
			r.Close()
			if err == nil && stored == size {
				return size, nil
			}
			switch {
			case err != nil:
				answers = append(answers, fmt.Sprintf("%s: %v", src, err))
			default:
				answers = append(answers, fmt.Sprintf("%s: sent %d of %d bytes", src, stored-have, size-have))
			}
			break
		}
	}
	if len(sources) == 0 {
		answers = append(answers, "no other hub member to ask")
	}
	return 0, fmt.Errorf("%w: sha256 %s (%s)", ErrNotFound, digest, strings.Join(answers, "; "))
}
