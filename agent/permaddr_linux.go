package agent

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DefaultPermAddr asks the kernel for a NIC's permanent hardware address
// (ETHTOOL_GPERMADDR, what `ethtool -P` prints). It needs no privileges.
func DefaultPermAddr(name string) (string, error) {
	if len(name) >= unix.IFNAMSIZ {
		return "", fmt.Errorf("permaddr %s: name too long", name)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("permaddr %s: %w", name, err)
	}
	defer unix.Close(fd)
	// struct ethtool_perm_addr { __u32 cmd; __u32 size; __u8 data[]; }
	var req struct {
		cmd  uint32
		size uint32
		data [32]byte
	}
	req.cmd = unix.ETHTOOL_GPERMADDR
	req.size = uint32(len(req.data))
	// struct ifreq { char name[16]; union { void *data; ... } }
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data uintptr
		_    [16]byte
	}
	copy(ifr.name[:], name)
	ifr.data = uintptr(unsafe.Pointer(&req))
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
		return "", fmt.Errorf("permaddr %s: %w", name, errno)
	}
	if req.size != 6 {
		return "", fmt.Errorf("permaddr %s: %d-byte address", name, req.size)
	}
	d := req.data
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", d[0], d[1], d[2], d[3], d[4], d[5]), nil
}
