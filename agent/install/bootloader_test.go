package install

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	diskfs "github.com/diskfs/go-diskfs"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

const systemdBootPath = "/usr/lib/systemd/boot/efi/systemd-bootx64.efi"

// fakeEFI is the smallest blob RemovableMediaPath accepts: an MZ stub
// pointing at a PE header for machine type m.
func fakeEFI(m uint16) []byte {
	b := make([]byte, 4096)
	copy(b, "MZ")
	binary.LittleEndian.PutUint32(b[0x3c:], 0x80)
	copy(b[0x80:], "PE\x00\x00")
	binary.LittleEndian.PutUint16(b[0x84:], m)
	copy(b[0x200:], "not really systemd-boot")
	return b
}

// systemdBoot is the host's systemd-boot when installed, else a fake.
func systemdBoot(t *testing.T) []byte {
	if b, err := os.ReadFile(systemdBootPath); err == nil {
		t.Logf("using %s (%d bytes)", systemdBootPath, len(b))
		return b
	}
	return fakeEFI(0x8664)
}

func TestInstallBootLoader(t *testing.T) {
	needMkfs(t)
	ctx := context.Background()
	f := newFake(t, map[string]int64{"sda": 10 << 30})
	efi := systemdBoot(t)
	if err := InstallBootLoader(ctx, f, "/dev/sda", efi); err == nil || !strings.Contains(err.Error(), "not prepared by Roost (blank)") {
		t.Fatalf("InstallBootLoader on a blank disk = %v, want not prepared", err)
	}
	if _, err := Prepare(ctx, f, "/dev/sda", Options{DiskGUID: testGUID}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // twice: the second run rewrites the same files
		if err := InstallBootLoader(ctx, f, "/dev/sda", efi); err != nil {
			t.Fatal(err)
		}
	}

	// Read the ESP back with go-diskfs.
	dk, err := diskfs.Open(f.Path("sda"), diskfs.WithOpenMode(diskfs.ReadOnly))
	if err != nil {
		t.Fatal(err)
	}
	defer dk.Close()
	fs, err := dk.GetFilesystem(ESPPartition)
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		t.Helper()
		r, err := fs.Open(name)
		if err != nil {
			t.Fatalf("open %s on the ESP: %v", name, err)
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if got := read("/EFI/BOOT/BOOTX64.EFI"); !bytes.Equal(got, efi) {
		t.Errorf("BOOTX64.EFI: %d bytes, want the %d written", len(got), len(efi))
	}
	if got := string(read("/loader/loader.conf")); got != "timeout 3\ndefault roost-rev-*\neditor no\n" {
		t.Errorf("loader.conf = %q", got)
	}
	if ents, err := fs.ReadDir("loader"); err != nil || !hasDir(ents, "entries") {
		t.Errorf("loader/: %v, %v; want an entries folder", ents, err)
	}

	fsckESP(t, f, "sda")
}

// fsckESP runs dosfstools' fsck.fat on a sparse copy of the ESP, when
// installed.
func fsckESP(t *testing.T, f *FakeDisks, dev string) {
	t.Helper()
	tool, err := lookTool("fsck.fat")
	if err != nil {
		t.Log(err)
		return
	}
	dk, err := diskfs.Open(f.Path(dev), diskfs.WithOpenMode(diskfs.ReadOnly), f.sectorSize())
	if err != nil {
		t.Fatal(err)
	}
	defer dk.Close()
	p, err := dk.GetPartition(ESPPartition)
	if err != nil {
		t.Fatal(err)
	}
	esp := filepath.Join(t.TempDir(), "esp.img")
	copySparse(t, esp, io.NewSectionReader(dk.Backend, p.GetStart(), p.GetSize()))
	out, err := exec.Command(tool, "-n", "-v", esp).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "32 bit entries") || !strings.Contains(string(out), fmt.Sprintf("%d hidden sectors", p.GetStart()/dk.LogicalBlocksize)) {
		t.Errorf("fsck.fat: %v\n%s", err, out)
	}
}

func hasDir(ents []iofs.DirEntry, name string) bool {
	for _, e := range ents {
		if e.Name() == name && e.IsDir() {
			return true
		}
	}
	return false
}

// copySparse copies r to a new file, leaving 64 KiB runs of zeros as holes.
func copySparse(t *testing.T, path string, r *io.SectionReader) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf, zero := make([]byte, 64<<10), make([]byte, 64<<10)
	for off := int64(0); off < r.Size(); off += int64(len(buf)) {
		n, err := r.ReadAt(buf, off)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:n], zero[:n]) {
			if _, err := f.WriteAt(buf[:n], off); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := f.Truncate(r.Size()); err != nil {
		t.Fatal(err)
	}
}

func TestRemovableMediaPath(t *testing.T) {
	for _, tc := range []struct {
		name string
		efi  []byte
		want string
	}{
		{"x86-64", fakeEFI(0x8664), "/EFI/BOOT/BOOTX64.EFI"},
		{"arm64", fakeEFI(0xaa64), "/EFI/BOOT/BOOTAA64.EFI"},
		{"i386", fakeEFI(0x14c), "error: unsupported PE machine type 0x14c"},
		{"text", []byte("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"), "error: not an EFI (PE) binary"},
		{"MZ only", append([]byte("MZ"), make([]byte, 100)...), "error: no PE header"},
		{"empty", nil, "error: not an EFI (PE) binary"},
	} {
		got, err := RemovableMediaPath(tc.efi)
		if want, ok := strings.CutPrefix(tc.want, "error: "); ok {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: RemovableMediaPath = %q, %v; want error %q", tc.name, got, err, want)
			}
		} else if err != nil || got != tc.want {
			t.Errorf("%s: RemovableMediaPath = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if b, err := os.ReadFile(systemdBootPath); err == nil {
		if got, err := RemovableMediaPath(b); err != nil || got != "/EFI/BOOT/BOOTX64.EFI" {
			t.Errorf("%s: %q, %v", systemdBootPath, got, err)
		}
	}
}

func TestCheckFirmware(t *testing.T) {
	for fw, want := range map[string]string{
		"UEFI": "",
		"BIOS": "install needs UEFI firmware; this server booted with BIOS: enable UEFI in its firmware setup",
		"":     "install needs UEFI firmware; this server did not report its firmware",
		"OFW":  `install needs UEFI firmware; this server reported firmware "OFW"`,
	} {
		err := CheckFirmware(&roostv1.Inventory{Firmware: fw})
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("CheckFirmware(%q) = %q, want %q", fw, got, want)
		}
	}
	if err := CheckFirmware(nil); err == nil {
		t.Error("CheckFirmware(nil) = nil, want an error")
	}
}

// TestPrepare4Kn: a disk with 4096-byte logical sectors gets the same
// layout in bytes, and its ESP reads back.
func TestPrepare4Kn(t *testing.T) {
	needMkfs(t)
	ctx := context.Background()
	f := newFake(t, map[string]int64{"nvme0n1": 10 << 30})
	f.SectorSize = 4096
	if _, err := Prepare(ctx, f, "/dev/nvme0n1", Options{DiskGUID: testGUID}); err != nil {
		t.Fatal(err)
	}
	if err := InstallBootLoader(ctx, f, "/dev/nvme0n1", fakeEFI(0x8664)); err != nil {
		t.Fatal(err)
	}
	f.Log()
	golden(t, "4kn.golden", f.String())
	fsckESP(t, f, "nvme0n1")
	res, err := Prepare(ctx, f, "/dev/nvme0n1", Options{})
	if err != nil || len(res.Actions) != 0 {
		t.Errorf("second Prepare: %v, %v; want no actions", res, err)
	}
}

// TestSmallESP: the smallest ESP Prepare accepts is still FAT32 that
// fsck.fat accepts; smaller ones are refused.
func TestSmallESP(t *testing.T) {
	needMkfs(t)
	ctx := context.Background()
	f := newFake(t, map[string]int64{"sda": 4 << 30})
	if _, err := Prepare(ctx, f, "sda", Options{ESPSize: 64 << 20}); err == nil || !strings.Contains(err.Error(), "at least 100 MiB") {
		t.Errorf("Prepare with a 64 MiB ESP = %v, want refused", err)
	}
	if _, err := Prepare(ctx, f, "sda", Options{ESPSize: 100 << 20}); err != nil {
		t.Fatal(err)
	}
	if err := InstallBootLoader(ctx, f, "sda", fakeEFI(0x8664)); err != nil {
		t.Fatal(err)
	}
	fsckESP(t, f, "sda")
}
