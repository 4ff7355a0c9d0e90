package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// IdentitySource tells who this Server is: its SMBIOS system UUID and the
// permanent MAC addresses of its physical NICs. The hub names the Server
// from it (the UUID, or a MAC fingerprint for bogus UUIDs).
type IdentitySource interface {
	Identity(ctx context.Context) (*roostv1.ServerIdentity, error)
}

// SysfsIdentity reads the identity from sysfs under Root (normally "/sys"):
//
//   - Root/class/dmi/id/product_uuid, lower-cased; empty when unreadable or
//     malformed (it needs root);
//   - for every Root/class/net/NAME with a "device" link (a physical NIC):
//     its address when addr_assign_type is 0 (permanent), else the
//     permanent address from PermAddr (ethtool's, e.g. for bond slaves).
//
// MACs are lower-case, colon-separated, de-duplicated and sorted; all-zero,
// broadcast and multicast addresses are dropped.
type SysfsIdentity struct {
	Root string
	// PermAddr returns a NIC's permanent address as the driver knows it
	// (ethtool -P); nil, or an error, means unknown. DefaultPermAddr asks
	// the kernel.
	PermAddr func(name string) (string, error)
}

func (s SysfsIdentity) root() string {
	if s.Root == "" {
		return "/sys"
	}
	return s.Root
}

func (s SysfsIdentity) Identity(context.Context) (*roostv1.ServerIdentity, error) {
	id := &roostv1.ServerIdentity{}
	if b, err := os.ReadFile(filepath.Join(s.root(), "class/dmi/id/product_uuid")); err == nil {
		id.SystemUuid = NormalizeUUID(string(b))
	}
	nics, err := readNICs(s.root())
	if err != nil {
		return id, nil // no NICs found is not fatal: the UUID may do
	}
	var macs []string
	for _, n := range nics {
		if n.Virtual {
			continue
		}
		mac := ""
		if n.AddrAssignType == 0 {
			mac = n.MAC
		}
		if mac == "" && s.PermAddr != nil {
			if pa, err := s.PermAddr(n.Name); err == nil {
				mac = NormalizeMAC(pa)
			}
		}
		if usableMAC(mac) {
			macs = append(macs, mac)
		}
	}
	slices.Sort(macs)
	id.PermanentMacs = slices.Compact(macs)
	return id, nil
}

// NormalizeUUID returns s trimmed and lower-cased when it is a UUID in its
// 8-4-4-4-12 hex text form, else "".
func NormalizeUUID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) != 36 {
		return ""
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return ""
			}
		default:
			if !isHex(c) {
				return ""
			}
		}
	}
	return s
}

func isHex(c rune) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

// NormalizeMAC returns a 6-byte MAC address as lower-case "aa:bb:cc:dd:ee:ff",
// or "" when s is not one.
func NormalizeMAC(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) != 17 {
		return ""
	}
	for i, c := range s {
		if i%3 == 2 {
			if c != ':' {
				return ""
			}
		} else if !isHex(c) {
			return ""
		}
	}
	return s
}

// usableMAC drops the addresses that identify nothing: empty, all zero,
// broadcast and multicast (low bit of the first octet).
func usableMAC(mac string) bool {
	if mac == "" || mac == "00:00:00:00:00:00" || mac == "ff:ff:ff:ff:ff:ff" {
		return false
	}
	first := mac[:2]
	var b byte
	for _, c := range first {
		b <<= 4
		if c >= 'a' {
			b |= byte(c-'a') + 10
		} else {
			b |= byte(c - '0')
		}
	}
	return b&1 == 0
}
