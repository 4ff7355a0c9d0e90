package agent

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// nic is one entry of /sys/class/net as the agent reads it.
type nic struct {
	Name           string
	MAC            string // current address, normalized; "" when none
	AddrAssignType int    // 0 permanent, 1 random, 2 stolen, 3 set; -1 unknown
	Driver         string
	PCIAddress     string
	SpeedMbps      int64
	LinkUp         bool
	Virtual        bool   // no "device" link
	Kind           string // "bond", "bridge", "vlan" or "" (for virtual NICs)
}

// pciAddressPattern matches a PCI device name in sysfs ("0000:3b:00.0").
var pciAddressPattern = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// readNICs lists root/class/net. Unreadable attributes are left empty: the
// kernel refuses some reads (speed of a down link) and that is normal.
func readNICs(root string) ([]nic, error) {
	dir := filepath.Join(root, "class/net")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []nic
	for _, e := range entries {
		name := e.Name()
		if name == "lo" || strings.HasPrefix(name, ".") {
			continue
		}
		p := filepath.Join(dir, name)
		attr := func(a string) string {
			b, err := os.ReadFile(filepath.Join(p, a))
			if err != nil {
				return ""
			}
			return string(b)
		}
		n := parseNIC(name, attr("address"), attr("addr_assign_type"), attr("speed"), attr("operstate"), attr("carrier"))
		if dev, err := filepath.EvalSymlinks(filepath.Join(p, "device")); err == nil {
			n.Virtual = false
			n.PCIAddress = PCIAddressOf(dev)
			if drv, err := os.Readlink(filepath.Join(p, "device", "driver")); err == nil {
				n.Driver = filepath.Base(drv)
			}
		} else {
			n.Virtual = true
			switch {
			case exists(filepath.Join(p, "bonding")):
				n.Kind = "bond"
			case exists(filepath.Join(p, "bridge")):
				n.Kind = "bridge"
			default:
				n.Kind = ueventDevtype(attr("uevent"))
			}
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b nic) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// parseNIC builds a nic from the text of its sysfs attributes; it accepts
// any input without panicking.
func parseNIC(name, address, assignType, speed, operstate, carrier string) nic {
	n := nic{Name: name, MAC: NormalizeMAC(address), AddrAssignType: -1}
	if v, err := strconv.Atoi(strings.TrimSpace(assignType)); err == nil && v >= 0 && v <= 3 {
		n.AddrAssignType = v
	}
	if v, err := strconv.ParseInt(strings.TrimSpace(speed), 10, 64); err == nil && v > 0 {
		n.SpeedMbps = v
	}
	switch strings.TrimSpace(operstate) {
	case "up":
		n.LinkUp = true
	case "unknown": // drivers that do not report operstate: trust the carrier
		n.LinkUp = strings.TrimSpace(carrier) == "1"
	}
	return n
}

// PCIAddressOf returns the PCI address in a resolved sysfs device path
// (the last path element that looks like one), or "".
func PCIAddressOf(devPath string) string {
	parts := strings.Split(devPath, "/")
	for i := len(parts) - 1; i >= 0; i-- {
		if pciAddressPattern.MatchString(parts[i]) {
			return parts[i]
		}
	}
	return ""
}

// ueventDevtype returns "vlan" for a uevent file saying DEVTYPE=vlan, else "".
func ueventDevtype(uevent string) string {
	for _, line := range strings.Split(uevent, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && k == "DEVTYPE" && v == "vlan" {
			return "vlan"
		}
	}
	return ""
}
