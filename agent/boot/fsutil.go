package boot

import (
	"golang.org/x/sys/unix"

	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// tmpPrefix starts the name of every temporary file Stage writes; Prune
// removes leftovers of an interrupted Stage. systemd-boot ignores them in
// loader/entries: they do not end in ".conf".
const tmpPrefix = ".roost-tmp-"

// writeAtomic writes the bytes from r to path: a temporary file in the
// same directory, fsynced, checked by check (when not nil; it gets the
// number of bytes written), renamed over path, and the directory fsynced.
// On error no temporary file is left behind.
func writeAtomic(path string, r io.Reader, perm os.FileMode, check func(n int64) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tmpPrefix+filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	n, err := io.Copy(f, r)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && check != nil {
		err = check(n)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so a rename or removal in it reaches the
// disk. File systems that cannot fsync a directory (EINVAL) are let be.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	// On FAT a renamed file's directory entry gets its start cluster and
	// size only when the file's inode is written back: fsync of the
	// directory is not enough, and a power cut before writeback leaves an
	// empty entry (found in QEMU: a blessed entry lost its content). So
	// flush the whole file system, which is small (the ESP).
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("sync the file system of %s: %w", dir, err)
	}
	return nil
}

// mkdirs makes dir and its parents (0700) and fsyncs the parent of every
// directory it made.
func mkdirs(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if err := mkdirs(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

// isTemp reports whether name is a temporary file of writeAtomic.
func isTemp(name string) bool { return strings.HasPrefix(name, tmpPrefix) }
