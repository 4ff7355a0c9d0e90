// Package blobs is a hub member's content-addressed blob store: image
// artifacts (kernels, initrds, boot loaders) kept on the member's disk by
// the lower-case hex sha256 of their content.
//
// Layout under the store's directory (DATA_DIR/blobs on a hub member):
//
//	sha256/<hex>            complete blobs, verified before they appear
//	uploads/<hex>.partial   uploads in progress, resumed from their size
//
// Uploads are resumable: Append adds bytes at an offset that must equal
// the bytes received so far (Stat says how many), and once the declared
// size is reached the content is hashed, fsynced and renamed into sha256/
// atomically, so a blob visible under sha256/ is always complete and
// verified. Content that does not hash to its digest is discarded.
//
// The store is local to one member and is not replicated by Raft: a blob
// lives on the member that received it until another member needs it and
// copies it (Fill fetches missing blobs from peers by digest, resuming and
// verifying like an upload). Store is safe for concurrent use; one upload
// or fill per digest runs at a time.
//
// Nothing is removed except by Collect: the member calls it periodically
// with the digests its releases still name, and it removes the other
// complete blobs once they are older than a grace period (by modification
// time, which Touch and a repeated Append refresh) and partial uploads
// left untouched for longer than another.
package blobs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Errors returned by Store; test with errors.Is.
var (
	// ErrInvalidDigest is returned for a digest that is not 64 lower-case
	// hex characters.
	ErrInvalidDigest = errors.New("invalid sha256 digest")
	// ErrNotFound is returned by Open for a blob that is not stored
	// completely.
	ErrNotFound = errors.New("blob not found")
	// ErrDigestMismatch is returned by Append when a completed upload does
	// not hash to its digest; the partial upload has been discarded.
	ErrDigestMismatch = errors.New("content does not match its sha256 digest")
	// ErrOffset is returned by Append when offset is not the number of
	// bytes stored so far (or size is negative or smaller than offset).
	ErrOffset = errors.New("upload offset does not match the stored size")
	// ErrTooLarge is returned by Append when the data runs past the
	// declared size; the bytes of that call are dropped.
	ErrTooLarge = errors.New("data runs past the declared size")
	// ErrBusy is returned by Append while another upload of the same digest
	// is in progress; retry once it ends.
	ErrBusy = errors.New("another upload of this blob is in progress")
)

// Store is a blob store rooted at one directory.
type Store struct {
	dir string

	mu    sync.Mutex
	busy  map[string]bool      // digests with an Append or a fill running
	fills map[string]*fillCall // Fill calls in flight, by digest
	// fillTimeout bounds one fetch from the sources (see Fill).
	fillTimeout time.Duration
	// sweeping is the digest whose files Collect is removing ("" when
	// none); lock and Touch wait on swept until it changes.
	sweeping string
	swept    *sync.Cond
	// collectMu runs one Collect at a time.
	collectMu sync.Mutex
}

// Open opens (creating if needed, mode 0700) the store rooted at dir.
func Open(dir string) (*Store, error) {
	for _, d := range []string{filepath.Join(dir, "sha256"), filepath.Join(dir, "uploads")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("blob store: %w", err)
		}
	}
	s := &Store{dir: dir, busy: map[string]bool{}, fills: map[string]*fillCall{}, fillTimeout: DefaultFillTimeout}
	s.swept = sync.NewCond(&s.mu)
	return s, nil
}

// Dir returns the store's root directory.
func (s *Store) Dir() string { return s.dir }

// ValidateDigest checks that digest is a sha256 digest as the store names
// blobs: 64 lower-case hex characters, without a "sha256:" prefix. The
// error wraps ErrInvalidDigest and says what is wrong.
func ValidateDigest(digest string) error {
	if len(digest) != 2*sha256.Size {
		return fmt.Errorf("%w %q: want 64 lower-case hex characters, got %d characters", ErrInvalidDigest, digest, len(digest))
	}
	for i := 0; i < len(digest); i++ {
		c := digest[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("%w %q: character %d (%q) is not lower-case hex (0-9, a-f)", ErrInvalidDigest, digest, i, c)
		}
	}
	return nil
}

func (s *Store) blobPath(digest string) string {
	return filepath.Join(s.dir, "sha256", digest)
}

func (s *Store) partialPath(digest string) string {
	return filepath.Join(s.dir, "uploads", digest+".partial")
}

// Stat says whether the blob is stored completely (size is then its size
// in bytes) or, if not, how many bytes of an upload were received so far
// (0 when none). Errors: ErrInvalidDigest, or an I/O error.
func (s *Store) Stat(digest string) (complete bool, size int64, err error) {
	if err := ValidateDigest(digest); err != nil {
		return false, 0, err
	}
	if st, err := os.Stat(s.blobPath(digest)); err == nil {
		return true, st.Size(), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, 0, err
	}
	st, err := os.Stat(s.partialPath(digest))
	if errors.Is(err, os.ErrNotExist) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	return false, st.Size(), nil
}

// Open opens a complete blob for reading and returns its size in bytes.
// The caller closes the file. Errors: ErrInvalidDigest, ErrNotFound (not
// stored, or only partially), or an I/O error.
func (s *Store) Open(digest string) (*os.File, int64, error) {
	if err := ValidateDigest(digest); err != nil {
		return nil, 0, err
	}
	f, err := os.Open(s.blobPath(digest))
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, fmt.Errorf("%w: sha256 %s", ErrNotFound, digest)
	}
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// Append adds the bytes read from r (until io.EOF) to the upload of digest,
// whose total size is size bytes; offset must equal the bytes stored so
// far (see Stat). It returns the bytes stored after the call. When the
// upload reaches size, the content is verified against digest, fsynced and
// made visible atomically; a blob already complete is not written again
// (r is not read): Append marks it used (see Touch) and returns its size.
//
// An error reading r keeps the bytes written before it (the upload can be
// resumed) and is returned as is. Other errors: ErrInvalidDigest, ErrOffset
// (offset is not the stored size, or size is negative or below offset),
// ErrTooLarge (r holds more than size-offset bytes; nothing of this call is
// kept), ErrDigestMismatch (the partial upload is discarded), ErrBusy
// (another Append of digest is running), or an I/O error.
func (s *Store) Append(digest string, size, offset int64, r io.Reader) (stored int64, err error) {
	if err := ValidateDigest(digest); err != nil {
		return 0, err
	}
	if size < 0 || offset < 0 || offset > size {
		return 0, fmt.Errorf("%w: offset %d and size %d: want 0 ≤ offset ≤ size", ErrOffset, offset, size)
	}
	if !s.lock(digest) {
		return 0, fmt.Errorf("%w: sha256 %s; retry when it ends", ErrBusy, digest)
	}
	defer s.unlock(digest)
	return s.appendLocked(digest, size, offset, r)
}

// appendLocked is Append for a caller that holds the digest's lock.
func (s *Store) appendLocked(digest string, size, offset int64, r io.Reader) (stored int64, err error) {
	complete, have, err := s.Stat(digest)
	if err != nil {
		return 0, err
	}
	if complete {
		// Pushed again: spare it from a Collect until its release is
		// recorded. Collect skips the digest while the lock is held.
		_, err := touch(s.blobPath(digest), digest)
		return have, err
	}
	if offset != have {
		return have, fmt.Errorf("%w: sha256 %s: offset %d, but %d bytes are stored; resume at %d", ErrOffset, digest, offset, have, have)
	}
	f, err := os.OpenFile(s.partialPath(digest), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return have, err
	}
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return have, err
	}
	n, rerr := io.Copy(f, io.LimitReader(r, size-offset))
	stored = offset + n
	if rerr == nil && stored == size {
		// Probe for data past size.
		var one [1]byte
		if m, perr := io.ReadFull(r, one[:]); m > 0 {
			if err := f.Truncate(offset); err != nil {
				return stored, err
			}
			return offset, fmt.Errorf("%w: sha256 %s: more than %d bytes", ErrTooLarge, digest, size)
		} else if perr != nil && !errors.Is(perr, io.EOF) && !errors.Is(perr, io.ErrUnexpectedEOF) {
			rerr = perr
		}
	}
	if err := f.Sync(); err != nil {
		return stored, err
	}
	if rerr != nil {
		return stored, rerr
	}
	if stored < size {
		return stored, nil
	}
	if err := f.Close(); err != nil {
		f = nil
		return stored, err
	}
	f = nil
	return stored, s.commit(digest, size)
}

// commit verifies the complete partial upload of digest and renames it
// into place, or discards it on a mismatch.
func (s *Store) commit(digest string, size int64) error {
	partial := s.partialPath(digest)
	f, err := os.Open(partial)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	f.Close()
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != digest || n != size {
		if rerr := os.Remove(partial); rerr != nil {
			return fmt.Errorf("%w: want sha256 %s, got %s (%d bytes); removing the partial upload: %v", ErrDigestMismatch, digest, got, n, rerr)
		}
		return fmt.Errorf("%w: want sha256 %s, got %s (%d bytes); the upload was discarded", ErrDigestMismatch, digest, got, n)
	}
	if err := os.Rename(partial, s.blobPath(digest)); err != nil {
		return err
	}
	return syncDir(filepath.Join(s.dir, "sha256"))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (s *Store) lock(digest string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waitSweepLocked(digest)
	if s.busy[digest] {
		return false
	}
	s.busy[digest] = true
	return true
}

func (s *Store) unlock(digest string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.busy, digest)
}
