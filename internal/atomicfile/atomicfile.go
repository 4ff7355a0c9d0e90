// Package atomicfile writes whole files atomically: readers see the old
// content or the new, never a mix, and after a crash the file holds one of
// the two. It wraps github.com/google/renameio/v2 (temporary file in the
// target's directory, fsync, rename) and adds what renameio leaves out:
// exact permissions whatever the umask, and an fsync of the directory so
// the rename itself is durable.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/google/renameio/v2"
)

// WriteFile writes data to path atomically with permissions perm (exactly:
// the umask does not apply; an existing file's permissions are replaced).
// The temporary file ("."+base name+random digits) is created in path's
// directory, which must exist, fsynced and renamed over path; then the
// directory is fsynced. On error path is unchanged and no temporary file
// is left behind, except when only the directory fsync failed: then the
// new content is in place but may not survive a crash. File systems that
// cannot fsync a directory (EINVAL, ENOTSUP) are not an error.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	t, err := renameio.NewPendingFile(path, renameio.WithTempDir(filepath.Dir(path)), renameio.WithStaticPermissions(perm))
	if err != nil {
		return err
	}
	defer t.Cleanup()
	if _, err := t.Write(data); err != nil {
		return err
	}
	if err := t.CloseAtomicallyReplace(); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs directory dir, so that a rename, creation or removal in
// it reaches the disk. File systems that cannot fsync a directory (EINVAL,
// ENOTSUP) are let be.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
