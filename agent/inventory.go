package agent

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/jaypipes/ghw"
	"github.com/jaypipes/ghw/pkg/block"
	"github.com/jaypipes/ghw/pkg/cpu"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// InventorySource gathers a Server's hardware inventory.
type InventorySource interface {
	Inventory(ctx context.Context) (*roostv1.Inventory, error)
}

// HostInventory reads this machine's inventory: CPU, disks and system
// (SMBIOS) through jaypipes/ghw, memory from /proc/meminfo, NICs and the
// firmware type from sysfs under SysRoot (default /sys). Parts that cannot
// be read are left empty and logged; only a machine with neither CPU nor
// memory information is an error.
type HostInventory struct {
	SysRoot  string // default /sys
	ProcRoot string // default /proc
	Logger   *slog.Logger
}

func (h HostInventory) sys() string {
	if h.SysRoot == "" {
		return "/sys"
	}
	return h.SysRoot
}

func (h HostInventory) proc() string {
	if h.ProcRoot == "" {
		return "/proc"
	}
	return h.ProcRoot
}

func (h HostInventory) log() *slog.Logger {
	if h.Logger == nil {
		return slog.Default()
	}
	return h.Logger
}

func (h HostInventory) Inventory(context.Context) (*roostv1.Inventory, error) {
	inv := &roostv1.Inventory{Arch: runtime.GOARCH, Firmware: "BIOS", Cpu: &roostv1.CPUInfo{}, System: &roostv1.SystemInfo{}}
	opts := []any{ghw.WithDisableWarnings(), ghw.WithDisableTools()}
	if c, err := ghw.CPU(opts...); err == nil {
		inv.Cpu = cpuFromGHW(c.Processors, c.TotalCores, c.TotalHardwareThreads)
	} else {
		h.log().Warn("inventory: CPU", "err", err)
	}
	if inv.Cpu.Threads == 0 {
		inv.Cpu.Threads = int32(runtime.NumCPU())
	}
	if b, err := os.ReadFile(filepath.Join(h.proc(), "meminfo")); err == nil {
		inv.MemoryBytes = ParseMeminfoTotal(string(b))
	} else {
		h.log().Warn("inventory: memory", "err", err)
	}
	if bl, err := ghw.Block(opts...); err == nil {
		inv.Disks = disksFromGHW(bl.Disks)
	} else {
		h.log().Warn("inventory: disks", "err", err)
	}
	if p, err := ghw.Product(opts...); err == nil {
		inv.System = &roostv1.SystemInfo{Vendor: dmiValue(p.Vendor), Product: dmiValue(p.Name), Serial: dmiValue(p.SerialNumber)}
	} else {
		h.log().Warn("inventory: system", "err", err)
	}
	if nics, err := readNICs(h.sys()); err == nil {
		inv.Nics = nicsToProto(nics)
	} else {
		h.log().Warn("inventory: NICs", "err", err)
	}
	if exists(filepath.Join(h.sys(), "firmware/efi")) {
		inv.Firmware = "UEFI"
	}
	sanitize(inv)
	if inv.Cpu.Threads == 0 && inv.MemoryBytes == 0 {
		return inv, fmt.Errorf("inventory: neither CPU nor memory could be read")
	}
	return inv, nil
}

func cpuFromGHW(procs []*cpu.Processor, cores, threads uint32) *roostv1.CPUInfo {
	c := &roostv1.CPUInfo{Sockets: int32(len(procs)), Cores: int32(cores), Threads: int32(threads)}
	for _, p := range procs {
		if p != nil && p.Model != "" {
			c.Model = strings.TrimSpace(p.Model)
			break
		}
	}
	return c
}

func disksFromGHW(disks []*block.Disk) []*roostv1.DiskInfo {
	var out []*roostv1.DiskInfo
	for _, d := range disks {
		if d == nil || d.DriveType == block.DriveTypeVirtual || d.DriveType == block.DriveTypeODD || d.SizeBytes == 0 {
			continue
		}
		if strings.HasPrefix(d.Name, "loop") || strings.HasPrefix(d.Name, "ram") || strings.HasPrefix(d.Name, "zram") {
			continue
		}
		out = append(out, &roostv1.DiskInfo{
			Name:       d.Name,
			SizeBytes:  int64(d.SizeBytes),
			Serial:     dmiValue(d.SerialNumber),
			Wwn:        dmiValue(d.WWN),
			Rotational: d.DriveType == block.DriveTypeHDD,
			Removable:  d.IsRemovable,
			Model:      dmiValue(d.Model),
		})
	}
	slices.SortFunc(out, func(a, b *roostv1.DiskInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// nicsToProto keeps physical NICs and the virtual ones a network profile
// makes (bonds, bridges, VLANs); veths, tunnels and the like come and go
// with workloads and are not inventory.
func nicsToProto(nics []nic) []*roostv1.NICInfo {
	var out []*roostv1.NICInfo
	for _, n := range nics {
		if n.Virtual && n.Kind == "" {
			continue
		}
		out = append(out, &roostv1.NICInfo{
			Name: n.Name, Mac: n.MAC, Driver: n.Driver, SpeedMbps: n.SpeedMbps,
			PciAddress: n.PCIAddress, LinkUp: n.LinkUp, Virtual: n.Virtual,
		})
	}
	return out
}

// dmiValue maps the placeholders firmware and ghw use for "no value" to "".
func dmiValue(s string) string {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "", "unknown", "none", "not specified", "to be filled by o.e.m.", "default string", "0", "system serial number", "system product name", "system manufacturer":
		return ""
	}
	return s
}

// ParseMeminfoTotal returns MemTotal of /proc/meminfo text in bytes, 0 when
// absent or malformed.
func ParseMeminfoTotal(s string) int64 {
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(k) != "MemTotal" {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			return 0
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 {
			return 0
		}
		mult := int64(1)
		if len(f) > 1 && strings.EqualFold(f[1], "kB") {
			mult = 1024
		}
		if n > (1<<62)/mult {
			return 0
		}
		return n * mult
	}
	return 0
}

// FormatInventory renders an inventory as stable text, for logs, golden
// tests and the simulator's fakes.
func FormatInventory(inv *roostv1.Inventory) string {
	var b strings.Builder
	c := inv.GetCpu()
	fmt.Fprintf(&b, "arch=%s firmware=%s\n", inv.GetArch(), inv.GetFirmware())
	fmt.Fprintf(&b, "cpu model=%q sockets=%d cores=%d threads=%d\n", c.GetModel(), c.GetSockets(), c.GetCores(), c.GetThreads())
	fmt.Fprintf(&b, "memory bytes=%d\n", inv.GetMemoryBytes())
	s := inv.GetSystem()
	fmt.Fprintf(&b, "system vendor=%q product=%q serial=%q\n", s.GetVendor(), s.GetProduct(), s.GetSerial())
	for _, d := range inv.GetDisks() {
		fmt.Fprintf(&b, "disk %s size=%d serial=%q wwn=%q model=%q rotational=%t removable=%t\n", d.GetName(), d.GetSizeBytes(), d.GetSerial(), d.GetWwn(), d.GetModel(), d.GetRotational(), d.GetRemovable())
	}
	for _, n := range inv.GetNics() {
		fmt.Fprintf(&b, "nic %s mac=%s driver=%s speed=%d pci=%s up=%t virtual=%t\n", n.GetName(), n.GetMac(), n.GetDriver(), n.GetSpeedMbps(), n.GetPciAddress(), n.GetLinkUp(), n.GetVirtual())
	}
	return b.String()
}

// Limits the hub accepts (hub/api's validation): strings of at most
// maxString bytes of valid UTF-8, at most maxItems disks and NICs.
const (
	maxString = 256
	maxItems  = 256
)

// clean makes s valid UTF-8 of at most maxString bytes.
func clean(s string) string {
	s = strings.ToValidUTF8(s, "?")
	for len(s) > maxString {
		r := []rune(s)
		s = string(r[:len(r)-1])
	}
	return s
}

// sanitize keeps an inventory within what the hub accepts, whatever the
// firmware and drivers reported.
func sanitize(inv *roostv1.Inventory) {
	inv.Cpu.Model = clean(inv.Cpu.Model)
	inv.System.Vendor, inv.System.Product, inv.System.Serial = clean(inv.System.Vendor), clean(inv.System.Product), clean(inv.System.Serial)
	if len(inv.Disks) > maxItems {
		inv.Disks = inv.Disks[:maxItems]
	}
	for _, d := range inv.Disks {
		d.Name, d.Serial, d.Wwn, d.Model = clean(d.Name), clean(d.Serial), clean(d.Wwn), clean(d.Model)
	}
	if len(inv.Nics) > maxItems {
		inv.Nics = inv.Nics[:maxItems]
	}
	for _, n := range inv.Nics {
		n.Name, n.Driver, n.PciAddress = clean(n.Name), clean(n.Driver), clean(n.PciAddress)
	}
}
