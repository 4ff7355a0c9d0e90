package boot

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Mounter mounts and unmounts file systems.
type Mounter interface {
	// Mount mounts the block device dev (a path such as /dev/sda1) of
	// file system type fstype ("vfat", "ext4") on dir, making dir first.
	Mount(dev, dir, fstype string) error
	// Unmount unmounts the file system mounted on dir.
	Unmount(dir string) error
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
