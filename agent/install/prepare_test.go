package install

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/partition"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"
	"golang.org/x/sys/unix"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const testGUID = "6E0B1F3A-9C47-4D2B-8A51-3F7C2D9E0B14"

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// needMkfs skips when e2fsprogs is missing (it is in every Debian base).
func needMkfs(t *testing.T) {
	t.Helper()
	if _, err := lookTool("mkfs.ext4"); err != nil {
		t.Skip(err)
	}
}

func newFake(t *testing.T, sizes map[string]int64) *FakeDisks {
	t.Helper()
	f, err := NewFakeDisks(t.TempDir(), sizes)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// digest hashes the data extents of a sparse image (SEEK_DATA/SEEK_HOLE),
// so comparing two digests says whether anything was written.
func digest(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	h := sha256.New()
	for off := int64(0); off < st.Size(); {
		data, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if err != nil {
			break // ENXIO: no data after off
		}
		hole, err := unix.Seek(int(f.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "@%d:", data)
		if _, err := io.Copy(h, io.NewSectionReader(f, data, hole-data)); err != nil {
			t.Fatal(err)
		}
		off = hole
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestPrepareFreshDisk(t *testing.T) {
	needMkfs(t)
	ctx := context.Background()
	f := newFake(t, map[string]int64{"sda": 10 << 30})
	res, err := Prepare(ctx, f, "/dev/sda", Options{DiskGUID: testGUID})
	if err != nil {
		t.Fatal(err)
	}
	got := "actions:\n  " + strings.Join(res.Actions, "\n  ") + "\n" + f.String()
	golden(t, "fresh.golden", got)

	// STATE is ext4: the magic 0xEF53 at offset+1080, and e2fsprogs agree.
	dk, err := diskfs.Open(f.Path("sda"), diskfs.WithOpenMode(diskfs.ReadOnly))
	if err != nil {
		t.Fatal(err)
	}
	p, err := dk.GetPartition(StatePartition)
	if err != nil {
		t.Fatal(err)
	}
	magic := make([]byte, 2)
	if _, err := dk.Backend.ReadAt(magic, p.GetStart()+1080); err != nil || magic[0] != 0x53 || magic[1] != 0xef {
		t.Errorf("STATE at %d: magic %x (%v), want 53ef", p.GetStart(), magic, err)
	}
	if fs, err := dk.GetFilesystem(ESPPartition); err != nil || fs.Type() != filesystem.TypeFat32 {
		t.Errorf("ESP: %v, %v; want FAT32", fs, err)
	}
	dk.Close()
	if tool, err := lookTool("dumpe2fs"); err == nil {
		out, err := exec.Command(tool, "-h", fmt.Sprintf("%s?offset=%d", f.Path("sda"), p.GetStart())).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Filesystem volume name:   ROOST-STATE") {
			t.Errorf("dumpe2fs: %v\n%s", err, out)
		}
	}
	if tool, err := lookTool("e2fsck"); err == nil {
		if out, err := exec.Command(tool, "-fn", fmt.Sprintf("%s?offset=%d", f.Path("sda"), p.GetStart())).CombinedOutput(); err != nil {
			t.Errorf("e2fsck: %v\n%s", err, out)
		}
	}
	if tool, err := lookTool("blkid"); err == nil {
		out, err := exec.Command(tool, "-p", "-o", "export", f.Path("sda")).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PTTYPE=gpt") || !strings.Contains(strings.ToUpper(string(out)), "PTUUID="+testGUID) {
			t.Errorf("blkid: %v\n%s", err, out)
		}
	}

	// Again: nothing to do, nothing written.
	before := digest(t, f.Path("sda"))
	f.Log()
	res, err = Prepare(ctx, f, "/dev/sda", Options{DiskGUID: "00000000-0000-4000-8000-000000000001"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Actions) != 0 {
		t.Errorf("second Prepare: actions %q, want none", res.Actions)
	}
	if l := f.Log(); strings.Join(l, ";") != "open sda" {
		t.Errorf("second Prepare: log %q, want only an open", l)
	}
	if after := digest(t, f.Path("sda")); after != before {
		t.Error("second Prepare changed the disk")
	}
}

// foreign writers put something Roost did not write on an image.
var foreign = map[string]struct {
	write func(t *testing.T, path string)
	what  string
}{
	"gpt": {func(t *testing.T, path string) {
		writeTable(t, path, &gpt.Table{ProtectiveMBR: true, Partitions: []*gpt.Partition{
			{Index: 1, Start: 2048, End: 4196351, Type: gpt.MicrosoftBasicData, Name: "Basic data partition"},
		}})
	}, `a GPT partition table (1 partitions: "Basic data partition")`},
	"mbr": {func(t *testing.T, path string) {
		writeTable(t, path, &mbr.Table{LogicalSectorSize: 512, PhysicalSectorSize: 512, Partitions: []*mbr.Partition{
			{Bootable: true, Type: mbr.Linux, Start: 2048, Size: 4194304},
			{Type: mbr.Linux, Start: 4196352, Size: 4194304},
		}})
	}, "an MBR partition table (2 partitions)"},
	"roost names, other GUIDs": {func(t *testing.T, path string) {
		writeTable(t, path, &gpt.Table{ProtectiveMBR: true, Partitions: []*gpt.Partition{
			{Index: 1, Start: 2048, End: 1050623, Type: gpt.EFISystemPartition, Name: ESPName},
			{Index: 2, Start: 1050624, End: 4196351, Type: gpt.LinuxFilesystem, Name: StateName},
		}})
	}, `a GPT partition table (2 partitions: "ROOST-ESP", "ROOST-STATE")`},
	"whole-disk ext4": {func(t *testing.T, path string) {
		if err := mkfsExt4(context.Background(), path, 0, 1<<30, "data"); err != nil {
			t.Fatal(err)
		}
	}, "an ext2/3/4 file system"},
	"damaged GPT": {func(t *testing.T, path string) {
		writeTable(t, path, &gpt.Table{ProtectiveMBR: true, Partitions: []*gpt.Partition{
			{Index: 1, Start: 2048, End: 4196351, Type: gpt.LinuxLVM, Name: "lvm"},
		}})
		// Corrupt the MBR signature and both headers' CRCs: no table parses.
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, _ := f.Stat()
		for _, off := range []int64{510, 512 + 16, st.Size() - 512 + 16} {
			if _, err := f.WriteAt([]byte{0, 0}, off); err != nil {
				t.Fatal(err)
			}
		}
	}, "a damaged GPT partition table"},
}

func writeTable(t *testing.T, path string, table partition.Table) {
	t.Helper()
	dk, err := diskfs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer dk.Close()
	if err := dk.Partition(table); err != nil {
		t.Fatal(err)
	}
}

func TestPrepareForeignDisk(t *testing.T) {
	needMkfs(t)
	ctx := context.Background()
	for name, fw := range foreign {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, map[string]int64{"sda": 10 << 30})
			fw.write(t, f.Path("sda"))
			before := digest(t, f.Path("sda"))
			_, err := Prepare(ctx, f, "/dev/sda", Options{})
			var fe *ForeignError
			if !errors.As(err, &fe) || !errors.Is(err, ErrForeignDisk) {
				t.Fatalf("Prepare = %v, want a *ForeignError", err)
			}
			if fe.What != fw.what {
				t.Errorf("refused for %q, want %q", fe.What, fw.what)
			}
			want := "install disk /dev/sda holds " + fw.what + " that Roost did not write; refusing to overwrite it (set wipeForeignDisks: true on the MachineClass to allow wiping it)"
			if err.Error() != want {
				t.Errorf("error:\n  %v\nwant\n  %s", err, want)
			}
			if digest(t, f.Path("sda")) != before {
				t.Error("a refused Prepare changed the disk")
			}

			res, err := Prepare(ctx, f, "/dev/sda", Options{AllowWipe: true, DiskGUID: testGUID})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Actions) == 0 || res.Actions[0] != "wiped "+fw.what {
				t.Errorf("actions %q, want first %q", res.Actions, "wiped "+fw.what)
			}
			d, err := Describe(ctx, f, "/dev/sda")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(d, "Roost GPT "+testGUID) || !strings.Contains(d, `fat32 "ROOST-ESP"`) || !strings.Contains(d, `ext4 "ROOST-STATE"`) {
				t.Errorf("after wiping:\n%s", d)
			}
		})
	}
}

// TestPrepareRepairsFileSystems: a Roost table whose file systems are gone
// (a crash after the table was written) gets them back, table untouched.
func TestPrepareRepairsFileSystems(t *testing.T) {
	needMkfs(t)
	ctx := context.Background()
	f := newFake(t, map[string]int64{"sda": 10 << 30})
	if _, err := Prepare(ctx, f, "/dev/sda", Options{DiskGUID: testGUID}); err != nil {
		t.Fatal(err)
	}
	f.Log()
	want := f.String()
	for _, tc := range []struct {
		zero   []int
		action string
	}{
		{[]int{ESPPartition}, "formatted ROOST-ESP FAT32"},
		{[]int{StatePartition}, "formatted ROOST-STATE ext4"},
		{[]int{ESPPartition, StatePartition}, "formatted ROOST-ESP FAT32, formatted ROOST-STATE ext4"},
	} {
		dk, err := diskfs.Open(f.Path("sda"))
		if err != nil {
			t.Fatal(err)
		}
		w, _ := dk.Backend.Writable()
		for _, i := range tc.zero {
			p, _ := dk.GetPartition(i)
			if _, err := w.WriteAt(make([]byte, 1<<20), p.GetStart()); err != nil {
				t.Fatal(err)
			}
		}
		dk.Close()
		res, err := Prepare(ctx, f, "/dev/sda", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(res.Actions, ", "); got != tc.action {
			t.Errorf("zeroed %v: actions %q, want %q", tc.zero, got, tc.action)
		}
		f.Log()
		if got := f.String(); got != want {
			t.Errorf("zeroed %v, after repair:\n%s\nwant\n%s", tc.zero, got, want)
		}
	}
}

func TestPrepareSmallDisk(t *testing.T) {
	f := newFake(t, map[string]int64{"sda": 1 << 30})
	_, err := Prepare(context.Background(), f, "sda", Options{})
	if err == nil || !strings.Contains(err.Error(), "disk of 1Gi is too small: it needs 1.5Gi") {
		t.Fatalf("Prepare = %v, want too small", err)
	}
}

func TestFakeRefusesMkfsWhileOpen(t *testing.T) {
	f := newFake(t, map[string]int64{"sda": 2 << 30})
	dk, err := f.Open(context.Background(), "/dev/sda")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.MkfsExt4(context.Background(), "/dev/sda", 1<<20, 1<<30, "x"); err == nil || !strings.Contains(err.Error(), "O_EXCL") {
		t.Errorf("MkfsExt4 on an open disk = %v, want busy", err)
	}
	if _, err := f.Open(context.Background(), "/dev/sda"); err == nil {
		t.Error("second Open succeeded, want busy")
	}
	dk.Close()
	if dk2, err := f.Open(context.Background(), "/dev/sda"); err != nil {
		t.Errorf("Open after Close: %v", err)
	} else {
		dk2.Close()
	}
}
