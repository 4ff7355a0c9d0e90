package boot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mounter mounts and unmounts file systems.
type Mounter interface {
	// Mount mounts the block device dev (a path such as /dev/sda1) of
	// file system type fstype ("vfat", "ext4") on dir, making dir first.
	Mount(dev, dir, fstype string) error
	// Unmount unmounts the file system mounted on dir.
	Unmount(dir string) error
	// Shutdown shuts down the file system mounted on dir
	// (FS_IOC_SHUTDOWN, journal flushed first): it never writes to its
	// device again, and its users get EIO. Cleaning uses it before wiping
	// a disk whose file system processes may still hold.
	Shutdown(dir string) error
	// DetachAll lazily unmounts (MNT_DETACH) every mount of the file
	// system mounted on dir (bind mounts included) with what is mounted
	// below them, and returns the mount points.
	DetachAll(dir string) ([]string, error)
}

// OSMounter is the real Mounter: mount(2) and umount(2) through
// golang.org/x/sys/unix. It mounts with nosuid and nodev; vfat with
// umask=0077, so only root reads the ESP (it holds Ignition configs).
type OSMounter struct{}

var _ Mounter = OSMounter{}

// Mount makes dir (0700) and mounts dev on it.
func (OSMounter) Mount(dev, dir, fstype string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("mount %s: %w", dev, err)
	}
	data := ""
	if fstype == "vfat" {
		data = "umask=0077"
	}
	if err := unix.Mount(dev, dir, fstype, unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		return fmt.Errorf("mount %s (%s) on %s: %w", dev, fstype, dir, err)
	}
	return nil
}

// Unmount unmounts dir.
func (OSMounter) Unmount(dir string) error {
	if err := unix.Unmount(dir, 0); err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// fsIocShutdown is FS_IOC_SHUTDOWN (_IOR('X', 125, __u32)) and
// fsGoingFlagsLogflush its flag that flushes the journal first
// (include/uapi/linux/fs.h).
const (
	fsIocShutdown        = 0x8004587d
	fsGoingFlagsLogflush = 0x1
)

// Shutdown implements Mounter.
func (OSMounter) Shutdown(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("shut down %s: %w", dir, err)
	}
	defer f.Close()
	flag := uint32(fsGoingFlagsLogflush)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocShutdown, uintptr(unsafe.Pointer(&flag))); e != 0 {
		return fmt.Errorf("shut down the file system on %s (FS_IOC_SHUTDOWN): %w", dir, e)
	}
	return nil
}

// DetachAll implements Mounter: the mounts of /proc/self/mountinfo with
// dir's device number, deepest first.
func (OSMounter) DetachAll(dir string) ([]string, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return nil, fmt.Errorf("detach %s: %w", dir, err)
	}
	want := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("detach %s: %w", dir, err)
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[2] == want {
			points = append(points, unescapeMountPath(f[4]))
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var done []string
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return done, fmt.Errorf("detach %s: %w", p, err)
		}
		done = append(done, p)
	}
	return done, nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// FindPartition returns the device path (/dev/sdb1) of the partition
// whose GPT partition name is name (e.g. install.ESPName): the target of
// /dev/disk/by-partlabel/<name>, or, when udev has not made that link
// yet, the DEVNAME of the /sys/class/block/*/uevent that says
// PARTNAME=<name>. It fails when no partition has the name, or when the
// fallback scan finds several.
func FindPartition(name string) (string, error) {
	return findPartition("/dev", "/sys", name)
}

func findPartition(devRoot, sysRoot, name string) (string, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") {
		return "", fmt.Errorf("find partition %q: bad name", name)
	}
	link := filepath.Join(devRoot, "disk", "by-partlabel", name)
	if p, err := filepath.EvalSymlinks(link); err == nil {
		return p, nil
	}
	uevents, err := filepath.Glob(filepath.Join(sysRoot, "class", "block", "*", "uevent"))
	if err != nil {
		return "", fmt.Errorf("find partition %s: %w", name, err)
	}
	var found []string
	for _, u := range uevents {
		b, err := os.ReadFile(u)
		if err != nil {
			continue
		}
		var dev, part string
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "DEVNAME="); ok {
				dev = v
			} else if v, ok := strings.CutPrefix(line, "PARTNAME="); ok {
				part = v
			}
		}
		if part == name && dev != "" {
			found = append(found, filepath.Join(devRoot, dev))
		}
	}
	sort.Strings(found)
	switch len(found) {
	case 0:
		return "", fmt.Errorf("find partition %s: no %s and no block device with PARTNAME=%s", name, link, name)
	case 1:
		return found[0], nil
	default:
		return "", fmt.Errorf("find partition %s: several block devices carry that name: %s", name, strings.Join(found, ", "))
	}
}
