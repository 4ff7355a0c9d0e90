package install

import (
	"bytes"
	"context"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/backend"
	"github.com/diskfs/go-diskfs/disk"
)

// Disks is the operating-system side of install.
type Disks interface {
	// Open opens the whole disk dev (e.g. "/dev/sda") for reading and
	// writing. A block device is opened exclusively (O_EXCL); close it
	// before MkfsExt4. Writing a partition table through it makes the
	// kernel re-read the table.
	Open(ctx context.Context, dev string) (*disk.Disk, error)
	// MkfsExt4 makes an ext4 file system labelled label in the bytes
	// [offset, offset+size) of dev.
	MkfsExt4(ctx context.Context, dev string, offset, size int64, label string) error
	// Sync makes what was written through dev visible through its
	// partition devices: it flushes dev to the disk and drops the
	// partitions' cached blocks (the kernel caches each block device
	// separately, so a mount of a partition could read stale blocks).
	Sync(ctx context.Context, dev string, partitions ...string) error
	// OpenForWipe opens the whole disk dev for writing, not exclusively:
	// a partition of it may still be held by a file system that was shut
	// down (cleaning). See Wipe.
	OpenForWipe(ctx context.Context, dev string) (*os.File, error)
}

// OSDisks opens real block devices and runs the mkfs.ext4 of the running
// image.
type OSDisks struct{}

// Open implements Disks.
func (OSDisks) Open(_ context.Context, dev string) (*disk.Disk, error) {
	return diskfs.Open(dev, diskfs.WithOpenMode(diskfs.ReadWriteExclusive))
}

// MkfsExt4 implements Disks.
func (OSDisks) MkfsExt4(ctx context.Context, dev string, offset, size int64, label string) error {
	return mkfsExt4(ctx, dev, offset, size, label)
}

// OpenForWipe implements Disks. A block device whose read-only flag is
// set (BLKROGET: a write-protected medium, a disk the hypervisor gives
// read-only) is refused with EROFS, whatever open(2) would say.
func (OSDisks) OpenForWipe(_ context.Context, dev string) (*os.File, error) {
	if f, err := os.Open(dev); err == nil {
		st, serr := f.Stat()
		ro, rerr := unix.IoctlGetInt(int(f.Fd()), unix.BLKROGET)
		f.Close()
		if serr == nil && st.Mode()&os.ModeDevice != 0 && rerr == nil && ro != 0 {
			return nil, &os.PathError{Op: "open", Path: dev, Err: unix.EROFS}
		}
	}
	return os.OpenFile(dev, os.O_RDWR, 0)
}

// Sync implements Disks: fsync and BLKFLSBUF (flush and invalidate the
// buffer cache, see blockdev(8) --flushbufs) on dev, then BLKFLSBUF on
// each partition.
func (OSDisks) Sync(_ context.Context, dev string, partitions ...string) error {
	for _, p := range append([]string{dev}, partitions...) {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("sync %s: %w", p, err)
		}
		err = f.Sync()
		if err == nil {
			err = unix.IoctlSetInt(int(f.Fd()), unix.BLKFLSBUF, 0)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("sync %s: %w", p, err)
		}
	}
	return nil
}

// mkfsExt4 runs mkfs.ext4 on path at a byte offset. It works the same on a
// whole-disk block device and on an image file, without a loop device or
// partition device nodes. Discard is off: it must never reach outside the
// partition.
func mkfsExt4(ctx context.Context, path string, offset, size int64, label string) error {
	if offset%4096 != 0 || size < 4096 {
		return fmt.Errorf("mkfs.ext4 %s: offset %d must be 4 KiB aligned and size %d at least 4 KiB", path, offset, size)
	}
	tool, err := lookTool("mkfs.ext4")
	if err != nil {
		return err
	}
	args := []string{"-F", "-q", "-t", "ext4", "-L", label,
		"-E", fmt.Sprintf("offset=%d,nodiscard,lazy_itable_init=1", offset),
		path, fmt.Sprintf("%dk", size/1024)}
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", tool, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// lookTool finds an administration tool in PATH or the sbin folders, which
// are often missing from a non-root PATH.
func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH or /usr/sbin, /sbin (install e2fsprogs)", name)
}

// FakeDisks is a Disks backed by image files in Dir: device "/dev/NAME"
// (or "NAME") is the file Dir/NAME.img. It runs the real mkfs.ext4 on the
// file, refuses MkfsExt4 while the disk is open (as O_EXCL would), logs
// every operation, and String renders each disk's layout and the log.
type FakeDisks struct {
	Dir string
	// SectorSize is the logical sector size of every disk: 512 (default)
	// or 4096 ("4Kn" disks).
	SectorSize int

	// ReadOnly names disks ("NAME") that refuse writing, as a disk with
	// its read-only flag set (a write-protected medium) does.
	ReadOnly map[string]bool

	mu   sync.Mutex
	open map[string]int
	log  []string
}

// NewFakeDisks returns a FakeDisks with a sparse image file of the given
// size for every name.
func NewFakeDisks(dir string, sizes map[string]int64) (*FakeDisks, error) {
	f := &FakeDisks{Dir: dir}
	for name, size := range sizes {
		if err := f.Add(name, size); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Add creates (or truncates) the sparse image file of disk name.
func (f *FakeDisks) Add(name string, size int64) error {
	file, err := os.OpenFile(f.Path(name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := file.Truncate(size); err != nil {
		file.Close()
		return err
	}
	return file.Close()
}

// Path is the image file of dev.
func (f *FakeDisks) Path(dev string) string {
	return filepath.Join(f.Dir, strings.TrimPrefix(dev, "/dev/")+".img")
}

func (f *FakeDisks) record(format string, args ...any) {
	f.log = append(f.log, fmt.Sprintf(format, args...))
}

func (f *FakeDisks) sectorSize() diskfs.OpenOpt {
	return diskfs.WithSectorSize(diskfs.SectorSize(f.SectorSize))
}

// Open implements Disks.
func (f *FakeDisks) Open(_ context.Context, dev string) (*disk.Disk, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := strings.TrimPrefix(dev, "/dev/")
	if f.open[name] > 0 {
		return nil, fmt.Errorf("open %s: device or resource busy", dev)
	}
	d, err := diskfs.Open(f.Path(dev), diskfs.WithOpenMode(diskfs.ReadWrite), f.sectorSize())
	if err != nil {
		return nil, err
	}
	if f.open == nil {
		f.open = map[string]int{}
	}
	f.open[name]++
	f.record("open %s", name)
	return &disk.Disk{Backend: &closeHook{Storage: d.Backend, done: func() {
		f.mu.Lock()
		f.open[name]--
		f.mu.Unlock()
	}}, Size: d.Size, LogicalBlocksize: d.LogicalBlocksize, PhysicalBlocksize: d.PhysicalBlocksize, Table: d.Table, DefaultBlocks: d.DefaultBlocks}, nil
}

// MkfsExt4 implements Disks.
func (f *FakeDisks) MkfsExt4(ctx context.Context, dev string, offset, size int64, label string) error {
	f.mu.Lock()
	name := strings.TrimPrefix(dev, "/dev/")
	busy := f.open[name] > 0
	f.record("mkfs.ext4 %s offset=%d size=%s label=%s", name, offset, FormatSize(size), label)
	f.mu.Unlock()
	if busy {
		return fmt.Errorf("mkfs.ext4 %s: device is open (it would be busy: O_EXCL)", dev)
	}
	return mkfsExt4(ctx, f.Path(dev), offset, size, label)
}

// SetReadOnly sets or clears ReadOnly for disk name while it is in use.
func (f *FakeDisks) SetReadOnly(name string, ro bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ReadOnly == nil {
		f.ReadOnly = map[string]bool{}
	}
	f.ReadOnly[name] = ro
}

// OpenForWipe implements Disks: the image file, read-write (EROFS for a
// ReadOnly disk).
func (f *FakeDisks) OpenForWipe(_ context.Context, dev string) (*os.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := strings.TrimPrefix(dev, "/dev/")
	f.record("open-for-wipe %s", name)
	if f.ReadOnly[name] {
		return nil, &os.PathError{Op: "open", Path: dev, Err: unix.EROFS}
	}
	return os.OpenFile(f.Path(dev), os.O_RDWR, 0)
}

// Sync implements Disks: image files need nothing; it is recorded.
func (f *FakeDisks) Sync(_ context.Context, dev string, partitions ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("sync %s %s", strings.TrimPrefix(dev, "/dev/"), strings.Join(partitions, " "))
	return nil
}

// Log returns the operations so far, one a line, and clears it.
func (f *FakeDisks) Log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.log
	f.log = nil
	return l
}

// String renders every disk's layout (Describe) and the operation log.
func (f *FakeDisks) String() string {
	names, _ := filepath.Glob(filepath.Join(f.Dir, "*.img"))
	sort.Strings(names)
	var b strings.Builder
	for _, p := range names {
		name := strings.TrimSuffix(filepath.Base(p), ".img")
		d, err := diskfs.Open(p, diskfs.WithOpenMode(diskfs.ReadOnly), f.sectorSize())
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", name, err)
			continue
		}
		b.WriteString(describe(name, d))
		d.Close()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.log) > 0 {
		b.WriteString("log:\n")
		for _, l := range f.log {
			b.WriteString("  " + l + "\n")
		}
	}
	return b.String()
}

// closeHook runs done once when the disk's backend is closed.
type closeHook struct {
	backend.Storage
	once sync.Once
	done func()
}

func (c *closeHook) Close() error {
	err := c.Storage.Close()
	c.once.Do(c.done)
	return err
}
