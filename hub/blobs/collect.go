package blobs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultPartialGrace is how long a partial upload may stay untouched
// (no bytes appended) before Collect may remove it: 24 hours.
const DefaultPartialGrace = 24 * time.Hour

// CollectOptions say what Collect removes.
type CollectOptions struct {
	// Keep reports whether complete blob digest is still needed (for
	// example, named by an ImageRelease); kept blobs are never removed. It
	// is required when BlobsBefore is set, and must not call the Store.
	Keep func(digest string) bool
	// BlobsBefore: a complete blob that Keep does not keep is removed when
	// it was last modified (stored, or marked with Touch) before this
	// time. The zero time removes no complete blob.
	BlobsBefore time.Time
	// PartialsBefore: a partial upload is removed when its last bytes
	// were written before this time, whatever Keep says. The zero time
	// removes no partial upload.
	PartialsBefore time.Time
}

// CollectStats are what one Collect removed.
type CollectStats struct {
	// Blobs and BlobBytes count the complete blobs removed and their
	// sizes in bytes.
	Blobs     int
	BlobBytes int64
	// Partials and PartialBytes count the partial uploads removed and the
	// bytes they held.
	Partials     int
	PartialBytes int64
	// Busy counts the candidates skipped because an upload or fill of
	// their digest was running; a later Collect looks at them again.
	Busy int
}

// Collect garbage-collects the store as opts say (see CollectOptions) and
// returns what it removed. Files whose names are not those of a blob or a
// partial upload are left alone.
//
// Collect is safe against concurrent Append, Fill, Open and Touch: a
// digest with an upload or fill running is skipped (counted in Busy), an
// Append or Fill that starts while Collect removes a file of its digest
// waits for the removal to finish (and then finds the file gone: a fill
// fetches from offset 0, an Append at a later offset fails with
// ErrOffset), and a blob's
// modification time is checked again just before it is removed, so a
// Touch that happens first spares it. A reader that opened a blob before
// it was removed keeps reading it (the inode lives until it is closed).
// Concurrent Collects run one at a time.
//
// Collect goes on past a file it cannot remove or stat; the error joins
// those failures (the stats still count what was removed). It fails
// before removing anything when BlobsBefore is set without Keep, or when
// a directory of the store cannot be read.
func (s *Store) Collect(opts CollectOptions) (CollectStats, error) {
	var st CollectStats
	if !opts.BlobsBefore.IsZero() && opts.Keep == nil {
		return st, errors.New("blob store: collect: BlobsBefore is set without a Keep function")
	}
	s.collectMu.Lock()
	defer s.collectMu.Unlock()
	var errs []error
	if !opts.BlobsBefore.IsZero() {
		blob := func(name string) string {
			if opts.Keep(name) {
				return ""
			}
			return name
		}
		if err := s.sweepDir("sha256", blob, s.blobPath, opts.BlobsBefore, &st.Blobs, &st.BlobBytes, &st.Busy, &errs); err != nil {
			return st, err
		}
	}
	if !opts.PartialsBefore.IsZero() {
		partial := func(name string) string {
			digest, _ := strings.CutSuffix(name, ".partial")
			if digest == name {
				return ""
			}
			return digest
		}
		if err := s.sweepDir("uploads", partial, s.partialPath, opts.PartialsBefore, &st.Partials, &st.PartialBytes, &st.Busy, &errs); err != nil {
			return st, errors.Join(append(errs, err)...)
		}
	}
	return st, errors.Join(errs...)
}

// sweepDir removes the files of the store's subdirectory dir last
// modified before before: candidate maps a file name to its digest ("" to
// leave the file alone; names that are not digests are left alone too),
// path gives a digest's file. It adds what it removed to *n (files) and
// *bytes, the digests busy with an upload or fill to *busy, and the
// failures on single files to *errs; it fails only when dir cannot be
// read.
func (s *Store) sweepDir(dir string, candidate func(name string) string, path func(digest string) string, before time.Time,
	n *int, bytes *int64, busy *int, errs *[]error) error {
	entries, err := os.ReadDir(filepath.Join(s.dir, dir))
	if err != nil {
		return fmt.Errorf("blob store: collect: %w", err)
	}
	for _, e := range entries {
		digest := candidate(e.Name())
		if digest == "" || !e.Type().IsRegular() || ValidateDigest(digest) != nil {
			continue
		}
		// A cheap look first; sweep looks again under the lock.
		if info, err := e.Info(); err != nil || !info.ModTime().Before(before) {
			continue
		}
		size, removed, err := s.sweep(digest, path(digest), before)
		switch {
		case err != nil:
			*errs = append(*errs, err)
		case removed:
			*n++
			*bytes += size
		case size < 0:
			*busy++
		}
	}
	return nil
}

// sweep removes path (the blob or partial upload of digest) if it was
// last modified before cutoff and no upload or fill of digest runs. It
// returns the removed file's size; size -1 (and removed false) means the
// digest was busy. A file already gone is not an error.
func (s *Store) sweep(digest, path string, cutoff time.Time) (size int64, removed bool, err error) {
	s.mu.Lock()
	if s.busy[digest] || s.fills[digest] != nil {
		s.mu.Unlock()
		return -1, false, nil
	}
	// Append, Fill and Touch of digest wait until sweeping is cleared.
	s.sweeping = digest
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.sweeping = ""
		s.swept.Broadcast()
		s.mu.Unlock()
	}()
	info, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("blob store: collect: %w", err)
	}
	if !info.Mode().IsRegular() || !info.ModTime().Before(cutoff) {
		return 0, false, nil
	}
	if err := os.Remove(path); errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	} else if err != nil {
		return 0, false, fmt.Errorf("blob store: collect: %w", err)
	}
	return info.Size(), true, nil
}

// waitSweepLocked waits, with s.mu held, until Collect is not removing
// digest's files.
func (s *Store) waitSweepLocked(digest string) {
	for s.sweeping == digest {
		s.swept.Wait()
	}
}

// Touch marks complete blob digest as used now: it sets the blob's
// modification time to the current time, so that a Collect whose
// BlobsBefore is earlier spares it even if Keep does not know it yet (a
// blob checked just before the release naming it is recorded). It
// returns the blob's size in bytes. Errors: ErrInvalidDigest, ErrNotFound
// (not stored completely, e.g. just collected), or an I/O error.
func (s *Store) Touch(digest string) (int64, error) {
	if err := ValidateDigest(digest); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Holding s.mu keeps Collect from starting to sweep digest while the
	// time is set; the call is one metadata update.
	s.waitSweepLocked(digest)
	return touch(s.blobPath(digest), digest)
}

// touch sets path's times to now and returns its size.
func touch(path, digest string) (int64, error) {
	now := time.Now()
	if err := os.Chtimes(path, now, now); errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("%w: sha256 %s", ErrNotFound, digest)
	} else if err != nil {
		return 0, err
	}
	info, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("%w: sha256 %s", ErrNotFound, digest)
	}
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}
