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
	// The ext4 file system is shared, not copied; the disks' own pages
	// are few (GPT, FAT32, the boot loader).
	a, b := m.disks["sda"], m.disks["sdb"]
	if len(a.layers) != 1 || len(b.layers) != 1 || len(a.layers[0].pages) == 0 {
		t.Fatalf("layers %d and %d, want one each", len(a.layers), len(b.layers))
	}
	for k, p := range a.layers[0].pages {
		if q := b.layers[0].pages[k]; &p[0] != &q[0] {
			t.Fatal("the two disks' ext4 pages are copies")
		}
		break
	}
	t.Logf("own pages: %d; shared ext4 pages: %d", len(a.pages), len(a.layers[0].pages))
	// Writes over the shared pages stay on their disk: zeroing a page of
	// sdb's STATE does not reach sda's.
	var i int64
	for k := range b.layers[0].pages {
		i = b.layers[0].first + k
		break
	}
	w, _ := m.Open(ctx, "/dev/sdb")
	if _, err := w.Backend.(interface {
		WriteAt([]byte, int64) (int, error)
	}).WriteAt(make([]byte, memPage), i*memPage); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if b.page(i) != nil || a.page(i) == nil {
		t.Error("a write of zeros over a shared page: wrong page seen")
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
	if _, err := Wipe(ctx, m, "/dev/sda", WipeMetadata); err == nil || !strings.Contains(err.Error(), "cleaning is not simulated") {
		t.Errorf("Wipe of a memory disk: %v", err)
	}
	if _, err := m.Open(ctx, "/dev/nvme9n1"); err == nil || !strings.Contains(err.Error(), "no such device") {
		t.Errorf("unknown disk: %v", err)
	}
}
