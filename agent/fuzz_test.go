package agent

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Parsing sysfs and procfs text must never panic, whatever the kernel (or
// a broken driver) writes there. The seed corpus runs with go test.

func FuzzParseNIC(f *testing.F) {
	f.Add("aa:bb:cc:dd:ee:ff\n", "0\n", "10000\n", "up\n", "1\n")
	f.Add("", "", "-1", "unknown", "0")
	f.Add("AA:BB:CC:DD:EE:FF:00:11", "9", "99999999999999999999", "dormant", "")
	f.Add("\xff\xfe", "-1", "1e9", "up", "1")
	f.Fuzz(func(t *testing.T, address, assign, speed, operstate, carrier string) {
		n := parseNIC("x", address, assign, speed, operstate, carrier)
		if n.MAC != "" && NormalizeMAC(n.MAC) != n.MAC {
			t.Fatalf("MAC %q not normalized", n.MAC)
		}
		if n.SpeedMbps < 0 || n.AddrAssignType < -1 || n.AddrAssignType > 3 {
			t.Fatalf("out of range: %+v", n)
		}
		_ = usableMAC(n.MAC)
	})
}

func FuzzParseMeminfo(f *testing.F) {
	f.Add("MemTotal:       16314372 kB\nMemFree:         1234 kB\n")
	f.Add("MemTotal:")
	f.Add("MemTotal: 9223372036854775807 kB")
	f.Add(":::\n\x00")
	f.Fuzz(func(t *testing.T, s string) {
		if n := ParseMeminfoTotal(s); n < 0 {
			t.Fatalf("negative memory %d", n)
		}
	})
}

func FuzzNormalize(f *testing.F) {
	f.Add("03000200-0400-0500-0006-000700080009")
	f.Add("aa:bb:cc:dd:ee:ff")
	f.Add("/sys/devices/pci0000:00/0000:3b:00.0/net/eno1")
	f.Add("DEVTYPE=vlan\nINTERFACE=eth0.10\n")
	f.Add("é\xff")
	f.Fuzz(func(t *testing.T, s string) {
		if u := NormalizeUUID(s); u != "" && (len(u) != 36 || u != strings.ToLower(u)) {
			t.Fatalf("NormalizeUUID(%q) = %q", s, u)
		}
		if m := NormalizeMAC(s); m != "" {
			_ = usableMAC(m)
		}
		_ = PCIAddressOf(s)
		_ = ueventDevtype(s)
		_ = dmiValue(s)
		if c := clean(s + s); len(c) > maxString || !utf8.ValidString(c) {
			t.Fatalf("clean(%q) = %q", s+s, c)
		}
	})
}
