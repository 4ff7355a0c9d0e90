package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := Backoff{Base: 200 * time.Millisecond, Max: 15 * time.Second, Rand: func() float64 { return 0.999999 }}
	var got []string
	for range 9 {
		got = append(got, b.Next().Round(time.Millisecond).String())
	}
	want := "200ms 400ms 800ms 1.6s 3.2s 6.4s 12.8s 15s 15s"
	if strings.Join(got, " ") != want {
		t.Errorf("upper bounds %v, want %s", got, want)
	}
	b.Rand = func() float64 { return 0 }
	if d := b.Next(); d != 0 {
		t.Errorf("full jitter: low end %v, want 0", d)
	}
	b.Reset()
	if b.Bound() != 200*time.Millisecond || b.Attempts() != 0 {
		t.Errorf("after Reset: bound %v attempts %d", b.Bound(), b.Attempts())
	}
	var zero Backoff
	for range 100 {
		if d := zero.Next(); d < 0 || d > BackoffMax {
			t.Fatalf("default backoff out of range: %v", d)
		}
	}
}

func TestFakeClock(t *testing.T) {
	c := NewFakeClock(time.Unix(1000, 0))
	a, b := c.After(time.Second), c.After(3*time.Second)
	c.Advance(2 * time.Second)
	select {
	case <-a:
	default:
		t.Fatal("1 s timer did not fire at 2 s")
	}
	select {
	case <-b:
		t.Fatal("3 s timer fired at 2 s")
	default:
	}
	if c.Pending() != 1 {
		t.Errorf("pending %d", c.Pending())
	}
	c.Advance(time.Second)
	<-b
}

// writeTree makes files under root from "path: content" pairs; content
// "-> target" makes a symlink.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "-> "); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fakeSys is a sysfs tree: a physical NIC with a permanent address, a bond
// slave whose current address is the bond's, a bond, a veth, a NIC with a
// garbage address, and lo.
func fakeSys(t *testing.T) string {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"class/dmi/id/product_uuid":                  " 4C4C4544-0042-3510-8052-B2C04F4E3732\n",
		"devices/pci0000:00/0000:00:03.0/net/eno1/x": "",
		"devices/pci0000:00/0000:3b:00.1/net/eno2/x": "",
		"bus/pci/drivers/ixgbe/x":                    "",
		"class/net/eno1/address":                     "AA:BB:CC:00:00:01\n",
		"class/net/eno1/addr_assign_type":            "0\n",
		"class/net/eno1/speed":                       "10000\n",
		"class/net/eno1/operstate":                   "up\n",
		"class/net/eno1/device":                      "-> ../../../devices/pci0000:00/0000:00:03.0",
		"devices/pci0000:00/0000:00:03.0/driver":     "-> ../../../bus/pci/drivers/ixgbe",
		"class/net/eno2/address":                     "aa:bb:cc:00:00:01\n",
		"class/net/eno2/addr_assign_type":            "3\n",
		"class/net/eno2/speed":                       "-1\n",
		"class/net/eno2/operstate":                   "down\n",
		"class/net/eno2/device":                      "-> ../../../devices/pci0000:00/0000:3b:00.1",
		"class/net/bond0/address":                    "aa:bb:cc:00:00:01\n",
		"class/net/bond0/addr_assign_type":           "3\n",
		"class/net/bond0/operstate":                  "up\n",
		"class/net/bond0/bonding/mode":               "802.3ad 4\n",
		"class/net/veth12/address":                   "02:00:00:00:00:09\n",
		"class/net/veth12/addr_assign_type":          "1\n",
		"class/net/lo/address":                       "00:00:00:00:00:00\n",
		"class/net/weird/address":                    "not a mac\n",
		"class/net/weird/addr_assign_type":           "banana",
		"class/net/weird/device":                     "-> ../../../devices/pci0000:00/0000:00:03.0",
		"firmware/efi/x":                             "",
	})
	return root
}

func TestSysfsIdentity(t *testing.T) {
	root := fakeSys(t)
	perm := func(name string) (string, error) {
		if name == "eno2" {
			return "AA:BB:CC:00:00:02", nil
		}
		return "", os.ErrNotExist
	}
	id, err := SysfsIdentity{Root: root, PermAddr: perm}.Identity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := FakeIdentity{UUID: id.GetSystemUuid(), MACs: id.GetPermanentMacs()}.String()
	want := "uuid=4c4c4544-0042-3510-8052-b2c04f4e3732 macs=aa:bb:cc:00:00:01,aa:bb:cc:00:00:02"
	if got != want {
		t.Errorf("identity:\n got %s\nwant %s", got, want)
	}
	// Unreadable UUID and no NICs: empty identity, no error.
	id, err = SysfsIdentity{Root: t.TempDir()}.Identity(context.Background())
	if err != nil || id.GetSystemUuid() != "" || len(id.GetPermanentMacs()) != 0 {
		t.Errorf("empty tree: %v %v", id, err)
	}
}

func TestHostInventoryFromFakeSysfs(t *testing.T) {
	root := fakeSys(t)
	proc := t.TempDir()
	writeTree(t, proc, map[string]string{"meminfo": "MemTotal:       16314372 kB\nMemFree: 1 kB\n"})
	inv, err := HostInventory{SysRoot: root, ProcRoot: proc}.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if inv.GetMemoryBytes() != 16314372*1024 || inv.GetFirmware() != "UEFI" || inv.GetCpu().GetThreads() < 1 {
		t.Errorf("memory %d firmware %s threads %d", inv.GetMemoryBytes(), inv.GetFirmware(), inv.GetCpu().GetThreads())
	}
	var nics []string
	for _, line := range strings.Split(FormatInventory(inv), "\n") {
		if strings.HasPrefix(line, "nic ") {
			nics = append(nics, line)
		}
	}
	want := []string{
		"nic bond0 mac=aa:bb:cc:00:00:01 driver= speed=0 pci= up=true virtual=true",
		"nic eno1 mac=aa:bb:cc:00:00:01 driver=ixgbe speed=10000 pci=0000:00:03.0 up=true virtual=false",
		"nic eno2 mac=aa:bb:cc:00:00:01 driver= speed=0 pci=0000:3b:00.1 up=false virtual=false",
		"nic weird mac= driver=ixgbe speed=0 pci=0000:00:03.0 up=false virtual=false",
	}
	if strings.Join(nics, "\n") != strings.Join(want, "\n") {
		t.Errorf("NICs:\n%s\nwant:\n%s", strings.Join(nics, "\n"), strings.Join(want, "\n"))
	}
	// No EFI directory: BIOS.
	inv, _ = HostInventory{SysRoot: t.TempDir(), ProcRoot: proc}.Inventory(context.Background())
	if inv.GetFirmware() != "BIOS" {
		t.Errorf("firmware %s, want BIOS", inv.GetFirmware())
	}
}

func TestSimulatedServersDistinct(t *testing.T) {
	seen := map[string]bool{}
	for i := range 2000 {
		id, inv := SimulatedServer(1, i)
		if NormalizeUUID(id.UUID) != id.UUID || seen[id.UUID] {
			t.Fatalf("server %d: bad or repeated UUID %s", i, id.UUID)
		}
		seen[id.UUID] = true
		for _, m := range id.MACs {
			if NormalizeMAC(m) != m || seen[m] {
				t.Fatalf("server %d: bad or repeated MAC %s", i, m)
			}
			seen[m] = true
		}
		if i == 0 && !strings.Contains(inv.String(), "cpu model=\"Simulated CPU @ 2.40GHz\" sockets=1 cores=16 threads=32") {
			t.Errorf("inventory text:\n%s", inv)
		}
	}
	a, _ := SimulatedServer(1, 5)
	b, _ := SimulatedServer(1, 5)
	if a.String() != b.String() {
		t.Error("simulated identity is not stable")
	}
}

func TestParsers(t *testing.T) {
	for in, want := range map[string]int64{
		"MemTotal:       16314372 kB\n":     16314372 * 1024,
		"MemFree: 5 kB\nMemTotal: 7\n":      7,
		"MemTotal:\n":                       0,
		"MemTotal: -5 kB":                   0,
		"MemTotal: 99999999999999999999 kB": 0,
		"":                                  0,
	} {
		if got := ParseMeminfoTotal(in); got != want {
			t.Errorf("ParseMeminfoTotal(%q) = %d, want %d", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"03000200-0400-0500-0006-000700080009":   "03000200-0400-0500-0006-000700080009",
		"ABCDEF00-0000-0000-0000-000000000000\n": "abcdef00-0000-0000-0000-000000000000",
		"not-a-uuid":                             "", "": "", "g3000200-0400-0500-0006-000700080009": "",
	} {
		if got := NormalizeUUID(in); got != want {
			t.Errorf("NormalizeUUID(%q) = %q", in, got)
		}
	}
	for in, want := range map[string]string{"/sys/devices/pci0000:00/0000:00:1c.0/0000:3b:00.0/net/x": "0000:3b:00.0", "/sys/devices/virtual/net/x": ""} {
		if got := PCIAddressOf(in); got != want {
			t.Errorf("PCIAddressOf(%q) = %q", in, got)
		}
	}
	if usableMAC("01:00:5e:00:00:01") || !usableMAC("52:54:00:12:34:56") {
		t.Error("usableMAC: multicast accepted or unicast refused")
	}
}
