package state

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// uuidRE is the RFC 4122 text form, any case.
var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// placeholderUUIDs are SMBIOS system UUIDs that firmware vendors ship on
// many machines at once; they identify nothing.
var placeholderUUIDs = map[string]bool{
	"00000000-0000-0000-0000-000000000000": true,
	"ffffffff-ffff-ffff-ffff-ffffffffffff": true,
	"03000200-0400-0500-0006-000700080009": true, // common on Supermicro/AMI boards
	"00020003-0004-0005-0006-000700080009": true, // byte-swapped form of the above
}

// UsableUUID returns the lower-case system UUID when it identifies a
// machine: well-formed and not zero, all-F or a known placeholder.
func UsableUUID(uuid string) (string, bool) {
	u := strings.ToLower(strings.TrimSpace(uuid))
	if !uuidRE.MatchString(u) || placeholderUUIDs[u] {
		return "", false
	}
	if strings.Trim(u, "0-") == "" || strings.Trim(u, "f-") == "" {
		return "", false
	}
	return u, true
}

// MACFingerprint returns the sorted, lower-cased, de-duplicated MACs and
// the hex sha256 of them joined by ",".
func MACFingerprint(macs []string) ([]string, string) {
	seen := map[string]bool{}
	var out []string
	for _, m := range macs {
		m = strings.ToLower(strings.TrimSpace(m))
		if m == "" || seen[m] {
			continue
		}
		seen[m] = true
		out = append(out, m)
	}
	sort.Strings(out)
	sum := sha256.Sum256([]byte(strings.Join(out, ",")))
	return out, hex.EncodeToString(sum[:])
}

// Derived label keys, computed by the hub from a Server's inventory. They
// are usable in MachineClass server selectors (e.g. "roost.io/cpus>=16",
// "roost.io/memory-gib>=64") and cannot be set by operators.
const (
	LabelArch         = "roost.io/arch"        // Go/Kubernetes architecture, e.g. "amd64"
	LabelCPUs         = "roost.io/cpus"        // logical CPUs (hardware threads)
	LabelCPUCores     = "roost.io/cpu-cores"   // physical cores
	LabelCPUSockets   = "roost.io/cpu-sockets" // sockets
	LabelMemoryGiB    = "roost.io/memory-gib"  // memory in GiB, rounded to the nearest
	LabelFirmware     = "roost.io/firmware"    // "uefi" or "bios"
	LabelDisks        = "roost.io/disks"       // non-removable disks
	LabelDiskGiB      = "roost.io/disk-gib"    // total size of non-removable disks, GiB
	LabelLargestDisk  = "roost.io/largest-disk-gib"
	LabelSSDs         = "roost.io/ssds"           // non-rotational, non-removable disks
	LabelNICs         = "roost.io/nics"           // physical NICs
	LabelMaxNICSpeed  = "roost.io/nic-speed-mbps" // fastest physical NIC, Mbit/s
	LabelVendor       = "roost.io/system-vendor"
	LabelProduct      = "roost.io/system-product"
	derivedLabelGiB   = 1 << 30
	maxLabelValueSize = 63
)

// DerivedLabelKeys lists every derived label key.
var DerivedLabelKeys = []string{LabelArch, LabelCPUs, LabelCPUCores, LabelCPUSockets, LabelMemoryGiB, LabelFirmware,
	LabelDisks, LabelDiskGiB, LabelLargestDisk, LabelSSDs, LabelNICs, LabelMaxNICSpeed, LabelVendor, LabelProduct}

// IsDerivedLabel reports whether key is one the hub computes.
func IsDerivedLabel(key string) bool {
	for _, k := range DerivedLabelKeys {
		if k == key {
			return true
		}
	}
	return false
}

// DerivedLabels computes the derived labels of an inventory. The result
// depends only on inv (the FSM calls it). Labels whose source is unknown
// are left out.
func DerivedLabels(inv *roostv1.Inventory) map[string]string {
	out := map[string]string{}
	if inv == nil {
		return out
	}
	set := func(k, v string) {
		if v = labelValue(v); v != "" {
			out[k] = v
		}
	}
	num := func(k string, n int64) {
		if n > 0 {
			out[k] = strconv.FormatInt(n, 10)
		}
	}
	set(LabelArch, inv.GetArch())
	cpu := inv.GetCpu()
	cpus := int64(cpu.GetThreads())
	if cpus <= 0 {
		cpus = int64(cpu.GetCores())
	}
	num(LabelCPUs, cpus)
	num(LabelCPUCores, int64(cpu.GetCores()))
	num(LabelCPUSockets, int64(cpu.GetSockets()))
	if m := inv.GetMemoryBytes(); m > 0 {
		out[LabelMemoryGiB] = strconv.FormatInt(int64(math.Round(float64(m)/derivedLabelGiB)), 10)
	}
	set(LabelFirmware, strings.ToLower(inv.GetFirmware()))
	var disks, ssds, total, largest int64
	for _, d := range inv.GetDisks() {
		if d.GetRemovable() {
			continue
		}
		disks++
		if !d.GetRotational() {
			ssds++
		}
		if s := d.GetSizeBytes(); s > 0 {
			total += s / derivedLabelGiB
			largest = max(largest, s/derivedLabelGiB)
		}
	}
	if len(inv.GetDisks()) > 0 {
		out[LabelDisks] = strconv.FormatInt(disks, 10)
		out[LabelSSDs] = strconv.FormatInt(ssds, 10)
	}
	num(LabelDiskGiB, total)
	num(LabelLargestDisk, largest)
	var nics, speed int64
	for _, n := range inv.GetNics() {
		if n.GetVirtual() {
			continue
		}
		nics++
		speed = max(speed, n.GetSpeedMbps())
	}
	if len(inv.GetNics()) > 0 {
		out[LabelNICs] = strconv.FormatInt(nics, 10)
	}
	num(LabelMaxNICSpeed, speed)
	set(LabelVendor, inv.GetSystem().GetVendor())
	set(LabelProduct, inv.GetSystem().GetProduct())
	return out
}

// labelValue turns free text into a Kubernetes label value: characters
// other than [A-Za-z0-9._-] become '-', runs collapse, the ends are
// alphanumeric, at most 63 characters.
func labelValue(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		ok := r < 128 && (r == '.' || r == '_' || r == '-' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
		if !ok || r == '-' {
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = true
			continue
		}
		dash = false
		b.WriteRune(r)
	}
	v := b.String()
	if len(v) > maxLabelValueSize {
		v = v[:maxLabelValueSize]
	}
	return strings.TrimFunc(v, func(r rune) bool { return r == '-' || r == '.' || r == '_' })
}

// baseServerName returns the name a Server with identity id gets when no
// other Server claims its UUID, and the fingerprint of its MACs.
func baseServerName(id *roostv1.ServerIdentity) (name, uuid, fingerprint string, macs []string) {
	macs, fingerprint = MACFingerprint(id.GetPermanentMacs())
	if u, ok := UsableUUID(id.GetSystemUuid()); ok {
		return u, u, fingerprint, macs
	}
	return "mac-" + fingerprint[:20], "", fingerprint, macs
}

// duplicateName is the name of a Server that claims uuid with other MACs
// than the Server already named uuid.
func duplicateName(uuid, fingerprint string) string {
	return fmt.Sprintf("%s-%s", uuid, fingerprint[:8])
}
