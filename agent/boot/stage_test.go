package boot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/roostfleet/roost/internal/cpio"
)

// newESP returns an ESP in a temporary folder laid out as
// agent/install.InstallBootLoader leaves it.
func newESP(t *testing.T) ESP {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "loader", "entries"), 0o755); err != nil {
		t.Fatal(err)
	}
	return ESP{Dir: dir}
}

// artifact writes data to a file and returns its path and sha256.
func artifact(t *testing.T, name, data string) (string, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(data))
	return p, hex.EncodeToString(sum[:])
}

func spec(t *testing.T, n int64, kernel, initrd string) StageSpec {
	t.Helper()
	kp, ks := artifact(t, "vmlinuz", kernel)
	ip, is := artifact(t, "initrd.img", initrd)
	return StageSpec{
		Revision: n, KernelPath: kp, KernelSHA256: ks, InitrdPath: ip, InitrdSHA256: is,
		Ignition: []byte(`{"ignition":{"version":"3.4.0"}}`), KernelArgs: []string{"console=ttyS0", "flatcar.first_boot=1"},
	}
}

func read(t *testing.T, e ESP, p string) string {
	t.Helper()
	b, err := os.ReadFile(e.path(p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tree lists every file under the ESP, slash-separated, sorted.
func tree(t *testing.T, e ESP) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(e.Dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(e.Dir, p)
		out = append(out, "/"+filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func TestStage(t *testing.T) {
	e := newESP(t)
	s := spec(t, 7, "kernel-7", "initrd-7")
	if err := e.Stage(s); err != nil {
		t.Fatal(err)
	}
	k, i := s.KernelSHA256[:16], s.InitrdSHA256[:16]
	want := []string{
		"/loader/entries/roost-rev-7+3.conf",
		"/roost/" + i + "/initrd.img",
		"/roost/" + k + "/vmlinuz",
		"/roost/rev-7/config.img",
	}
	sort.Strings(want)
	if got := tree(t, e); !reflect.DeepEqual(got, want) {
		t.Fatalf("files = %q, want %q", got, want)
	}
	wantEntry := "title Roost revision 7\n" +
		"version 7\n" +
		"sort-key roost\n" +
		"linux /roost/" + k + "/vmlinuz\n" +
		"initrd /roost/" + i + "/initrd.img\n" +
		"initrd /roost/rev-7/config.img\n" +
		"options console=ttyS0 flatcar.first_boot=1 roost.revision=7\n"
	if got := read(t, e, "/loader/entries/roost-rev-7+3.conf"); got != wantEntry {
		t.Errorf("entry =\n%s\nwant\n%s", got, wantEntry)
	}
	if got := read(t, e, "/roost/"+k+"/vmlinuz"); got != "kernel-7" {
		t.Errorf("kernel = %q", got)
	}
	if got := read(t, e, "/roost/"+i+"/initrd.img"); got != "initrd-7" {
		t.Errorf("initrd = %q", got)
	}
	files, err := cpio.Read(bytes.TrimLeft([]byte(read(t, e, "/roost/rev-7/config.img")), "\x00"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || string(files["usr/share/oem/config.ign"]) != string(s.Ignition) {
		t.Errorf("config initrd holds %q", files)
	}
	es, err := e.Entries()
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0] != (Entry{Revision: 7, Name: "roost-rev-7+3.conf", Counting: true, TriesLeft: 3}) {
		t.Errorf("Entries = %+v", es)
	}
}

func TestStageConfigInitrdListsWithCPIO(t *testing.T) {
	bin, err := exec.LookPath("cpio")
	if err != nil {
		t.Skip("cpio not installed")
	}
	e := newESP(t)
	if err := e.Stage(spec(t, 3, "k", "i")); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-t", "--quiet", "-F", e.path("/roost/rev-3/config.img")).Output()
	if err != nil {
		t.Fatalf("cpio -t: %v", err)
	}
	want := []string{"usr", "usr/share", "usr/share/oem", "usr/share/oem/config.ign"}
	if got := strings.Fields(string(out)); !reflect.DeepEqual(got, want) {
		t.Errorf("cpio -t = %q, want %q", got, want)
	}
}

func TestStageOptions(t *testing.T) {
	e := newESP(t)
	s := spec(t, 10, "k", "i")
	s.Title, s.KernelArgs, s.Tries = "Roost 2026.01 (pool workers)", nil, 5
	if err := e.Stage(s); err != nil {
		t.Fatal(err)
	}
	got := read(t, e, "/loader/entries/roost-rev-10+5.conf")
	if !strings.HasPrefix(got, "title Roost 2026.01 (pool workers)\n") || !strings.HasSuffix(got, "\noptions roost.revision=10\n") {
		t.Errorf("entry =\n%s", got)
	}
}

func TestStageIdempotent(t *testing.T) {
	e := newESP(t)
	s := spec(t, 7, "kernel", "initrd")
	if err := e.Stage(s); err != nil {
		t.Fatal(err)
	}
	before := tree(t, e)
	if err := e.Stage(s); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, e); !reflect.DeepEqual(got, before) {
		t.Errorf("second Stage changed files: %q, was %q", got, before)
	}
	// systemd-boot tried it once; staging again keeps the counter, even
	// with other tries asked for.
	rename(t, e, "roost-rev-7+3.conf", "roost-rev-7+2-1.conf")
	s.Tries = 5
	if err := e.Stage(s); err != nil {
		t.Fatal(err)
	}
	if es := names(t, e); !reflect.DeepEqual(es, []string{"roost-rev-7+2-1.conf"}) {
		t.Errorf("entries = %q", es)
	}
	// A missing file comes back.
	k := "/roost/" + s.KernelSHA256[:16] + "/vmlinuz"
	if err := os.Remove(e.path(k)); err != nil {
		t.Fatal(err)
	}
	if err := e.Stage(s); err != nil {
		t.Fatal(err)
	}
	if read(t, e, k) != "kernel" {
		t.Error("kernel not restored")
	}
}

func TestStageSkipsPresentContent(t *testing.T) {
	e := newESP(t)
	s := spec(t, 7, "kernel", "initrd")
	if err := e.Stage(s); err != nil {
		t.Fatal(err)
	}
	// Revision 8 shares the kernel: a file of the right size is not
	// copied again (it is content-addressed).
	k := "/roost/" + s.KernelSHA256[:16] + "/vmlinuz"
	if err := os.WriteFile(e.path(k), []byte("KERNEL"), 0o600); err != nil {
		t.Fatal(err)
	}
	s8 := s
	s8.Revision = 8
	if err := e.Stage(s8); err != nil {
		t.Fatal(err)
	}
	if got := read(t, e, k); got != "KERNEL" {
		t.Errorf("kernel copied again: %q", got)
	}
	// A file of another size is replaced.
	if err := os.WriteFile(e.path(k), []byte("trunc"), 0o600); err != nil {
		t.Fatal(err)
	}
	s9 := s
	s9.Revision = 9
	if err := e.Stage(s9); err != nil {
		t.Fatal(err)
	}
	if got := read(t, e, k); got != "kernel" {
		t.Errorf("kernel = %q", got)
	}
}

func TestStageRestagesUnbootedEntry(t *testing.T) {
	e := newESP(t)
	s := spec(t, 7, "kernel", "initrd")
	if err := e.Stage(s); err != nil {
		t.Fatal(err)
	}
	s.Ignition = []byte(`{"ignition":{"version":"3.4.0"},"storage":{}}`)
	s.Tries = 2
	if err := e.Stage(s); err != nil {
		t.Fatal(err)
	}
	if es := names(t, e); !reflect.DeepEqual(es, []string{"roost-rev-7+2.conf"}) {
		t.Errorf("entries = %q", es)
	}
	files, err := cpio.Read(bytes.TrimLeft([]byte(read(t, e, "/roost/rev-7/config.img")), "\x00"))
	if err != nil || string(files["usr/share/oem/config.ign"]) != string(s.Ignition) {
		t.Errorf("config initrd = %q, %v", files, err)
	}
}

func TestStageRefusesChangingBootedRevision(t *testing.T) {
	for _, booted := range []string{"roost-rev-7+2-1.conf", "roost-rev-7+0-3.conf", "roost-rev-7.conf"} {
		e := newESP(t)
		s := spec(t, 7, "kernel", "initrd")
		if err := e.Stage(s); err != nil {
			t.Fatal(err)
		}
		rename(t, e, "roost-rev-7+3.conf", booted)
		before := tree(t, e)
		s.KernelArgs = []string{"quiet"}
		if err := e.Stage(s); !errors.Is(err, ErrRevisionConflict) {
			t.Errorf("%s: Stage = %v, want ErrRevisionConflict", booted, err)
		}
		if got := tree(t, e); !reflect.DeepEqual(got, before) {
			t.Errorf("%s: files changed: %q", booted, got)
		}
	}
}

func TestStageDigestMismatch(t *testing.T) {
	e := newESP(t)
	s := spec(t, 7, "kernel", "initrd")
	_, s.InitrdSHA256 = artifact(t, "other", "other")
	err := e.Stage(s)
	if err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("Stage = %v", err)
	}
	for _, f := range tree(t, e) {
		if strings.HasPrefix(f, "/loader/") || strings.Contains(f, tmpPrefix) || strings.HasSuffix(f, "/initrd.img") {
			t.Errorf("left behind %s", f)
		}
	}
}

func TestStageRejectsBadSpecs(t *testing.T) {
	e := newESP(t)
	for name, mod := range map[string]func(*StageSpec){
		"revision 0":     func(s *StageSpec) { s.Revision = 0 },
		"short digest":   func(s *StageSpec) { s.KernelSHA256 = "abcd" },
		"non-hex digest": func(s *StageSpec) { s.InitrdSHA256 = strings.Repeat("g", 64) },
		"no kernel path": func(s *StageSpec) { s.KernelPath = "" },
		"missing file":   func(s *StageSpec) { s.KernelPath = "/nonexistent/vmlinuz" },
		"bad ignition":   func(s *StageSpec) { s.Ignition = []byte("{") },
		"newline title":  func(s *StageSpec) { s.Title = "a\nlinux /evil" },
		"newline arg":    func(s *StageSpec) { s.KernelArgs = []string{"a\ninitrd /x"} },
		"empty arg":      func(s *StageSpec) { s.KernelArgs = []string{""} },
		"revision arg":   func(s *StageSpec) { s.KernelArgs = []string{"roost.revision=1"} },
		"negative tries": func(s *StageSpec) { s.Tries = -1 },
		"too many tries": func(s *StageSpec) { s.Tries = MaxTries + 1 },
	} {
		s := spec(t, 7, "kernel", "initrd")
		mod(&s)
		if err := e.Stage(s); err == nil {
			t.Errorf("%s: Stage = nil", name)
		}
	}
	if es := names(t, e); len(es) != 0 {
		t.Errorf("entries = %q", es)
	}
}

func TestStageNeedsEntriesFolder(t *testing.T) {
	e := ESP{Dir: t.TempDir()}
	if err := e.Stage(spec(t, 7, "k", "i")); err == nil {
		t.Fatal("Stage on an unprepared ESP = nil")
	}
}

func rename(t *testing.T, e ESP, from, to string) {
	t.Helper()
	if err := os.Rename(e.entryPath(from), e.entryPath(to)); err != nil {
		t.Fatal(err)
	}
}

// names lists loader/entries.
func names(t *testing.T, e ESP) []string {
	t.Helper()
	des, err := os.ReadDir(e.path("/loader/entries"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range des {
		out = append(out, d.Name())
	}
	return out
}

// The config initrd is padded so its cpio header starts 4-aligned after the
// image initrd (found in QEMU: "Initramfs unpacking failed: invalid magic").
func TestConfigInitrdAlignment(t *testing.T) {
	for size, want := range map[int64]int{0: 0, 1: 3, 2: 2, 3: 1, 4: 0, 60934667: 1} {
		if got := ConfigPadding(size); got != want {
			t.Errorf("ConfigPadding(%d) = %d, want %d", size, got, want)
		}
	}
}
