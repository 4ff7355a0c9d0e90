package install

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestMemDisks: a memory disk is prepared (GPT, FAT32 ESP, the ext4 of a
// real mkfs.ext4) and takes the boot loader exactly as an image file does;
// a second Prepare finds it prepared; the pages it holds stay few, and the
// ext4 pages are shared between disks.
func TestMemDisks(t *testing.T) {
	needMkfs(t)
	ctx := context.Background()
	m := &MemDisks{TempDir: t.TempDir()}
	for _, name := range []string{"sda", "sdb"} {
		if err := m.Add(name, 2<<30); err != nil {
			t.Fatal(err)
		}
	}
	efi := fakeEFI(0x8664)
	if err := InstallBootLoader(ctx, m, "/dev/sda", efi); err == nil || !strings.Contains(err.Error(), "not prepared by Roost (blank)") {
		t.Fatalf("InstallBootLoader on a blank disk = %v, want not prepared", err)
	}
	start := time.Now()
	for _, dev := range []string{"/dev/sda", "/dev/sdb"} {
		res, err := Prepare(ctx, m, dev, Options{DiskGUID: testGUID})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(res.Actions, "; "); !strings.Contains(got, "formatted ROOST-ESP FAT32") || !strings.Contains(got, "formatted ROOST-STATE ext4") {
			t.Errorf("actions: %s", got)
		}
		if err := InstallBootLoader(ctx, m, dev, efi); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("two disks prepared in %v; %d and %d pages in memory", time.Since(start), m.Pages("sda"), m.Pages("sdb"))
	res, err := Prepare(ctx, m, "/dev/sda", Options{DiskGUID: testGUID})
	if err != nil || len(res.Actions) != 0 {
		t.Errorf("second Prepare: %v %v, want nothing to do", res, err)
	}
	if n := m.Pages("sda"); n == 0 || n > 2000 {
		t.Errorf("%d pages in memory for a prepared disk, want a few hundred", n)
	}
	// Pages of mkfs.ext4 are shared, not copied.
	m.disks["sda"].mu.Lock()
	m.disks["sdb"].mu.Lock()
	shared := 0
	for i, p := range m.disks["sda"].pages {
		if q := m.disks["sdb"].pages[i]; q != nil && &p[0] == &q[0] {
			shared++
		}
	}
	m.disks["sdb"].mu.Unlock()
	m.disks["sda"].mu.Unlock()
	if shared == 0 {
		t.Error("no page is shared between the two disks' ext4 file systems")
	}
	// Busy and unknown disks are refused as the real ones are.
	dk, err := m.Open(ctx, "/dev/sda")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open(ctx, "/dev/sda"); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("second Open: %v", err)
	}
	if err := m.MkfsExt4(ctx, "/dev/sda", 1<<30, 1<<20, "X"); err == nil || !strings.Contains(err.Error(), "device is open") {
		t.Errorf("MkfsExt4 while open: %v", err)
	}
	dk.Close()
	if _, err := m.Open(ctx, "/dev/nvme9n1"); err == nil || !strings.Contains(err.Error(), "no such device") {
		t.Errorf("unknown disk: %v", err)
	}
}
