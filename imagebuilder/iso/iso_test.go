package iso

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

var epoch = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// fixture writes a fake kernel, initrd and boot loaders (content does not
// matter to the writer; QEMU tests boot real ones).
func fixture(t *testing.T) Spec {
	t.Helper()
	d := t.TempDir()
	w := func(name string, size int, fill byte) string {
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, bytes.Repeat([]byte{fill}, size), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return Spec{
		Kernel: w("vmlinuz", 300_000, 'k'),
		Initrd: w("initrd", 1_500_000, 'i'),
		Config: []byte(`{"ignition":{"version":"3.3.0"}}`),
		Loaders: BootLoaders{
			Isolinux: w("isolinux.bin", 40_000, 'b'),
			Ldlinux:  w("ldlinux.c32", 120_000, 'l'),
			// isohdpfx.bin is 432 bytes of boot code
			IsohybridMBR: w("isohdpfx.bin", 432, 'm'),
			GrubEFI:      w("grubx64.efi", 900_000, 'g'),
		},
		Cmdline: []string{"roost.test=1"},
		Files:   []File{{Path: "roost/image.inf", Data: []byte(`{"release":"test"}`)}},
		Epoch:   epoch,
	}
}

func digest(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestReproducible(t *testing.T) {
	for _, format := range []Format{FormatISO, FormatRaw} {
		t.Run(string(format), func(t *testing.T) {
			spec := fixture(t)
			spec.Format = format
			a := filepath.Join(t.TempDir(), "a.img")
			if err := Build(spec, a); err != nil {
				t.Fatal(err)
			}
			// change what must not matter: source mtimes, wall clock, output dir
			later := time.Now().Add(time.Hour)
			for _, p := range []string{spec.Kernel, spec.Initrd, spec.Loaders.GrubEFI} {
				_ = os.Chtimes(p, later, later)
			}
			time.Sleep(1100 * time.Millisecond)
			b := filepath.Join(t.TempDir(), "b.img")
			if err := Build(spec, b); err != nil {
				t.Fatal(err)
			}
			if da, db := digest(t, a), digest(t, b); da != db {
				t.Fatalf("same inputs, different images: %s vs %s", da, db)
			}
			spec.Config = []byte(`{"ignition":{"version":"3.3.0"},"storage":{}}`)
			c := filepath.Join(t.TempDir(), "c.img")
			if err := Build(spec, c); err != nil {
				t.Fatal(err)
			}
			if digest(t, a) == digest(t, c) {
				t.Fatal("different configs, same image")
			}
		})
	}
}

func listing(t *testing.T, p string) string {
	t.Helper()
	im, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	ents, err := im.List()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range ents {
		if e.Dir {
			fmt.Fprintf(&b, "%s/\n", e.Path)
		} else {
			fmt.Fprintf(&b, "%s %d\n", e.Path, e.Size)
		}
	}
	boot, err := im.BootEntries()
	if err != nil {
		t.Fatal(err)
	}
	for _, be := range boot {
		fmt.Fprintf(&b, "boot %s bootable=%v loadsize=%d file=%s boottable=%v\n", be.Platform, be.Bootable, be.LoadSize, be.BootFile, be.BootTable)
	}
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (go test -update)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (go test -update to accept):\n%s", name, got)
	}
}

func TestListingGolden(t *testing.T) {
	for _, format := range []Format{FormatISO, FormatRaw} {
		t.Run(string(format), func(t *testing.T) {
			spec := fixture(t)
			spec.Format = format
			out := filepath.Join(t.TempDir(), "x.img")
			if err := Build(spec, out); err != nil {
				t.Fatal(err)
			}
			golden(t, "listing-"+string(format)+".txt", listing(t, out))

			im, err := Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer im.Close()
			cpio, err := im.ReadFile(ConfigInitrd)
			if err != nil {
				t.Fatal(err)
			}
			files, err := ReadCPIO(cpio)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(files[strings.TrimPrefix(ConfigPath, "/")]); got != string(spec.Config) {
				t.Errorf("config in image = %q", got)
			}
			cfg, err := im.ReadFile(GrubCfgPath)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(cfg), "console=ttyS0,115200n8 roost.test=1") {
				t.Errorf("grub.cfg lacks the command line:\n%s", cfg)
			}
		})
	}
}

func TestISOSizeIsVolumeSize(t *testing.T) {
	spec := fixture(t)
	out := filepath.Join(t.TempDir(), "x.iso")
	if err := Build(spec, out); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(out)
	if st.Size()%sector != 0 || st.Size() > 12*1024*1024 {
		t.Errorf("image size %d: want whole sectors, the payload and an 8 MiB ESP", st.Size())
	}
}

func noLeftovers(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		t.Errorf("left behind: %s", e.Name())
	}
}

func TestBadInputs(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Spec)
		want   string
	}{
		{"missing kernel", func(s *Spec) { s.Kernel = "/nonexistent/vmlinuz" }, "kernel"},
		{"no initrd", func(s *Spec) { s.Initrd = "" }, "no initrd"},
		{"no config", func(s *Spec) { s.Config = nil }, "Ignition"},
		{"missing isolinux", func(s *Spec) { s.Loaders.Isolinux = "/nonexistent/isolinux.bin" }, "isolinux.bin"},
		{"bad format", func(s *Spec) { s.Format = "vhd" }, "format"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := fixture(t)
			c.mutate(&spec)
			dir := t.TempDir()
			err := Build(spec, filepath.Join(dir, "x.iso"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one naming %q", err, c.want)
			}
			noLeftovers(t, dir)
		})
	}
}

func TestMissingLoaderNamesPackage(t *testing.T) {
	saved := grubPaths
	grubPaths.paths = []string{"/nonexistent/gcdx64.efi"}
	defer func() { grubPaths = saved }()
	spec := fixture(t)
	spec.Loaders.GrubEFI = ""
	dir := t.TempDir()
	err := Build(spec, filepath.Join(dir, "x.iso"))
	if err == nil || !strings.Contains(err.Error(), "grub-efi-amd64-bin") || !strings.Contains(err.Error(), "--grub-efi") {
		t.Fatalf("err = %v", err)
	}
	noLeftovers(t, dir)
}

func TestCPIORoundTrip(t *testing.T) {
	var b bytes.Buffer
	files := []CPIOFile{{Path: "/usr/share/oem/config.ign", Mode: 0o600, Data: []byte("{}")}, {Path: "etc/x", Mode: 0o644, Data: []byte("hello")}}
	if err := WriteCPIO(&b, files, 1); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCPIO(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if string(got["usr/share/oem/config.ign"]) != "{}" || string(got["etc/x"]) != "hello" || len(got) != 2 {
		t.Fatalf("got %v", got)
	}
	if b.Len()%512 != 0 {
		t.Error("archive not padded")
	}
}

func TestFastCopySameBytes(t *testing.T) {
	mk := func(dir string) {
		files := map[string]int{"boot/initrd.img": 3*mib + 123, "boot/vmlinuz": mib, "small": 5000, "data/zeros.bin": 2 * mib, "data/mixed.bin": 2*mib + 7}
		for name, size := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			b := make([]byte, size)
			if name != "data/zeros.bin" {
				for i := range b {
					if name == "data/mixed.bin" && (i/4096)%2 == 0 {
						continue // zero runs inside a file
					}
					b[i] = byte(i*31 + len(name))
				}
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	d := t.TempDir()
	var sums []string
	for i, fast := range []bool{false, true} {
		tree := filepath.Join(d, fmt.Sprintf("tree%d", i))
		mk(tree)
		out := filepath.Join(d, fmt.Sprintf("out%d.iso", i))
		if err := WriteISO(tree, out, ISOOptions{Epoch: epoch, noFastCopy: !fast}); err != nil {
			t.Fatal(err)
		}
		sums = append(sums, digest(t, out))
	}
	if sums[0] != sums[1] {
		t.Fatalf("fast copy changes the image: %s vs %s", sums[0], sums[1])
	}
}
