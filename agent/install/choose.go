package install

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// DefaultMinSize is the smallest disk chosen when the hints set no min_size.
const DefaultMinSize = 8 << 30

// Choose returns the install disk among disks. Every hint that is set must
// match: serial (exact), WWN (case-insensitive, "0x", "naa." and "eui."
// prefixes ignored), size range (min_size defaults to 8Gi) and rotational.
// Removable disks are skipped unless a serial or WWN hint names them. Of the
// disks left, the smallest wins, ties broken by name. The error names every
// disk and why it was rejected.
func Choose(disks []*roostv1.DiskInfo, hints *roostv1.InstallDiskHints) (*roostv1.DiskInfo, error) {
	if hints == nil {
		hints = &roostv1.InstallDiskHints{}
	}
	minSize, maxSize := int64(DefaultMinSize), int64(math.MaxInt64)
	if s := strings.TrimSpace(hints.GetMinSize()); s != "" {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return nil, fmt.Errorf("install disk hints: min_size %q: %v", s, err)
		}
		minSize = q.Value()
	}
	if s := strings.TrimSpace(hints.GetMaxSize()); s != "" {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return nil, fmt.Errorf("install disk hints: max_size %q: %v", s, err)
		}
		maxSize = q.Value()
	}
	if minSize > maxSize {
		return nil, fmt.Errorf("install disk hints: min_size %s is larger than max_size %s", hints.GetMinSize(), hints.GetMaxSize())
	}
	named := hints.GetSerial() != "" || hints.GetWwn() != ""

	sorted := append([]*roostv1.DiskInfo(nil), disks...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].GetSizeBytes() != sorted[j].GetSizeBytes() {
			return sorted[i].GetSizeBytes() < sorted[j].GetSizeBytes()
		}
		return sorted[i].GetName() < sorted[j].GetName()
	})
	var rejected []string
	for _, d := range sorted {
		if d == nil {
			continue
		}
		if why := reject(d, hints, named, minSize, maxSize); why != "" {
			rejected = append(rejected, d.GetName()+": "+why)
			continue
		}
		return d, nil
	}
	if len(rejected) == 0 {
		return nil, errors.New("no install disk: the server reported no disks")
	}
	sort.Strings(rejected)
	return nil, fmt.Errorf("no install disk matches (%s): %s", describeHints(hints, minSize, maxSize), strings.Join(rejected, "; "))
}

// DevicePath is the device node of an inventory disk, e.g. "/dev/sda".
func DevicePath(d *roostv1.DiskInfo) string { return "/dev/" + d.GetName() }

// reject says why d does not match, or "" when it does.
func reject(d *roostv1.DiskInfo, h *roostv1.InstallDiskHints, named bool, minSize, maxSize int64) string {
	if s := strings.TrimSpace(h.GetSerial()); s != "" && strings.TrimSpace(d.GetSerial()) != s {
		return fmt.Sprintf("serial %q is not %q", d.GetSerial(), s)
	}
	if w := h.GetWwn(); w != "" && normWWN(d.GetWwn()) != normWWN(w) {
		return fmt.Sprintf("WWN %q is not %q", d.GetWwn(), w)
	}
	if d.GetRemovable() && !named {
		return "removable"
	}
	if d.GetSizeBytes() < minSize {
		return fmt.Sprintf("%s < %s minimum", FormatSize(d.GetSizeBytes()), FormatSize(minSize))
	}
	if d.GetSizeBytes() > maxSize {
		return fmt.Sprintf("%s > %s maximum", FormatSize(d.GetSizeBytes()), FormatSize(maxSize))
	}
	if h.Rotational != nil && d.GetRotational() != h.GetRotational() {
		if d.GetRotational() {
			return "rotational, want solid-state"
		}
		return "solid-state, want rotational"
	}
	return ""
}

func describeHints(h *roostv1.InstallDiskHints, minSize, maxSize int64) string {
	var parts []string
	if h.GetSerial() != "" {
		parts = append(parts, fmt.Sprintf("serial %q", h.GetSerial()))
	}
	if h.GetWwn() != "" {
		parts = append(parts, fmt.Sprintf("WWN %q", h.GetWwn()))
	}
	if maxSize == math.MaxInt64 {
		parts = append(parts, "size ≥ "+FormatSize(minSize))
	} else {
		parts = append(parts, "size "+FormatSize(minSize)+"–"+FormatSize(maxSize))
	}
	if h.Rotational != nil {
		if h.GetRotational() {
			parts = append(parts, "rotational")
		} else {
			parts = append(parts, "solid-state")
		}
	}
	if h.GetSerial() == "" && h.GetWwn() == "" {
		parts = append(parts, "not removable")
	}
	return strings.Join(parts, ", ")
}

func normWWN(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	for _, p := range []string{"0x", "naa.", "eui."} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}

// FormatSize renders n bytes with a binary suffix: "8Gi" when exact,
// otherwise truncated to the first non-zero decimal of at most three
// ("3.5Gi", "8.001Gi"), so it never reads larger than n and never equal to a
// round size it is not; bytes otherwise.
func FormatSize(n int64) string {
	units := []struct {
		suffix string
		shift  uint
	}{{"Ei", 60}, {"Pi", 50}, {"Ti", 40}, {"Gi", 30}, {"Mi", 20}, {"Ki", 10}}
	for _, u := range units {
		if n >= 1<<u.shift {
			if n%(1<<u.shift) == 0 {
				return fmt.Sprintf("%d%s", n>>u.shift, u.suffix)
			}
			whole, rem := n>>u.shift, n&(1<<u.shift-1)
			for digits, scale := 1, int64(10); digits <= 3; digits, scale = digits+1, scale*10 {
				if frac := int64(float64(rem) / float64(int64(1)<<u.shift) * float64(scale)); frac > 0 {
					return fmt.Sprintf("%d.%0*d%s", whole, digits, frac, u.suffix)
				}
			}
			return fmt.Sprintf("%d bytes", n)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
