package sysext

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/squashfs"
)

// sources writes the inputs of one test extension under dir with the
// given modes and mtime: a --from tree and a kubelet binary for --file.
// Contents are fixed; everything else about the files varies by call.
func sources(t *testing.T, dir string, execMode, plainMode fs.FileMode, mtime time.Time) Options {
	t.Helper()
	from := filepath.Join(dir, "tree")
	mkTree(t, from, map[string]string{
		"usr/bin/tool*":                    "#!/bin/sh\necho tool\n",
		"usr/share/tool/data.txt":          "data\n",
		"usr/share/tool/empty/":            "",
		"usr/lib/libtool.so":               "->libtool.so.1",
		"usr/lib/libtool.so.1":             "ELF?",
		"opt/vendor/README":                "vendor\n",
		"usr/lib/systemd/system/x.service": "[Service]\nExecStart=/usr/bin/tool\n",
	})
	big := make([]byte, 300<<10) // several 128 KiB blocks and a fragment
	rand.New(rand.NewSource(1)).Read(big)
	kubelet := filepath.Join(dir, "kubelet")
	if err := os.WriteFile(kubelet, big, 0o600); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Chmod(p, 0o700|execMode&0o055); err != nil {
				return err
			}
		case p == kubelet || strings.HasSuffix(p, "tool"):
			if err := os.Chmod(p, execMode); err != nil {
				return err
			}
		default:
			if err := os.Chmod(p, plainMode); err != nil {
				return err
			}
		}
		return os.Chtimes(p, mtime, mtime)
	})
	if err != nil {
		t.Fatal(err)
	}
	return Options{Name: "kubelet", Version: "v1.34.4", From: from, Arch: "x86-64",
		Files: []FileSpec{{Src: kubelet, Dest: "/usr/bin/kubelet"}}}
}

func build(t *testing.T, o Options, out string) []byte {
	t.Helper()
	if _, err := Build(o, out); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestBuildReproducible: the same inputs give the same bytes from other
// directories, with other timestamps, modes (beyond the execute bit),
// owners, umask, temporary directory and SOURCE_DATE_EPOCH; a different
// content or execute bit gives other bytes.
func TestBuildReproducible(t *testing.T) {
	needMksquashfs(t)
	a := build(t, sources(t, t.TempDir(), 0o700, 0o600, time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)),
		filepath.Join(t.TempDir(), "kubelet-v1.34.4.raw"))

	dirB := t.TempDir()
	ob := sources(t, dirB, 0o755, 0o664, time.Now())
	if os.Geteuid() == 0 {
		_ = filepath.WalkDir(dirB, func(p string, _ fs.DirEntry, _ error) error { return os.Lchown(p, 1234, 5678) })
	} else {
		t.Log("not root: owners are not varied")
	}
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	old := syscall.Umask(0o077)
	b := build(t, ob, filepath.Join(t.TempDir(), "sub", "other-name.raw"))
	syscall.Umask(old)
	if !bytes.Equal(a, b) {
		t.Fatalf("two builds of the same inputs differ: %d and %d bytes", len(a), len(b))
	}

	// The test can fail: content and the execute bit are in the bytes.
	oc := sources(t, t.TempDir(), 0o700, 0o600, time.Now())
	if err := os.WriteFile(filepath.Join(oc.From, "usr/share/tool/data.txt"), []byte("Data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c := build(t, oc, filepath.Join(t.TempDir(), "c.raw")); bytes.Equal(a, c) {
		t.Error("a changed file gives the same bytes")
	}
	od := sources(t, t.TempDir(), 0o700, 0o700, time.Now()) // data.txt executable
	if d := build(t, od, filepath.Join(t.TempDir(), "d.raw")); bytes.Equal(a, d) {
		t.Error("a changed execute bit gives the same bytes")
	}
}

// TestBuildInspect: what Build wrote reads back with its name, version,
// architecture, paths, release file, normalised modes, root owner and
// zero timestamps.
func TestBuildInspect(t *testing.T) {
	needMksquashfs(t)
	o := sources(t, t.TempDir(), 0o700, 0o600, time.Now())
	out := filepath.Join(t.TempDir(), "kubelet-v1.34.4.raw")
	built, err := Build(o, out)
	if err != nil {
		t.Fatal(err)
	}
	info, err := Inspect(out)
	if err != nil {
		t.Fatal(err)
	}
	wantPaths := []string{
		"/opt/vendor/README", "/usr/bin/kubelet", "/usr/bin/tool", "/usr/lib/extension-release.d/extension-release.kubelet",
		"/usr/lib/libtool.so", "/usr/lib/libtool.so.1", "/usr/lib/systemd/system/x.service", "/usr/share/tool/data.txt",
	}
	if !slices.Equal(info.Paths, wantPaths) {
		t.Errorf("paths %q, want %q", info.Paths, wantPaths)
	}
	if info.Name != "kubelet" || info.Version != "v1.34.4" || info.ID != AnyOS || info.Architecture != "x86-64" ||
		info.SysextID != "kubelet" || info.SysextLevel != "" || info.VersionID != "" {
		t.Errorf("release fields %+v", info)
	}
	st, _ := os.Stat(out)
	if info.Size != st.Size() || len(info.SHA256) != 64 {
		t.Errorf("size %d (file %d), sha256 %q", info.Size, st.Size(), info.SHA256)
	}
	if built.SHA256 != info.SHA256 || !slices.Equal(built.Paths, info.Paths) {
		t.Errorf("Build returned %+v, Inspect %+v", built, info)
	}
	if err := Validate(info, Want{Name: "kubelet"}); err != nil {
		t.Error(err)
	}

	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sq, err := squashfs.Read(file.New(f, true), st.Size(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := sq.ReadFile(ReleasePath("kubelet"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "ID=_any\nARCHITECTURE=x86-64\nSYSEXT_ID=kubelet\nSYSEXT_VERSION_ID=v1.34.4\n"; string(rel) != want {
		t.Errorf("release file:\n%s\nwant:\n%s", rel, want)
	}
	big, err := sq.ReadFile("usr/bin/kubelet")
	if err != nil {
		t.Fatal(err)
	}
	if src, _ := os.ReadFile(o.Files[0].Src); !bytes.Equal(big, src) {
		t.Error("usr/bin/kubelet differs from its source")
	}
	err = fs.WalkDir(sq, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o644)
		switch {
		case d.IsDir(), p == "usr/bin/tool", p == "usr/bin/kubelet":
			want = 0o755
		case d.Type()&fs.ModeSymlink != 0:
			want = 0o777
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		if st, ok := fi.Sys().(*squashfs.StatT); !ok || st.UID != 0 || st.GID != 0 {
			t.Errorf("%s: owner %+v, want root", p, fi.Sys())
		}
		if !fi.ModTime().Equal(time.Unix(0, 0)) {
			t.Errorf("%s: mtime %v, want the epoch", p, fi.ModTime())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBuildReleaseFields: --os-id with --sysext-level/--version-id and
// --arch reach the release file.
func TestBuildReleaseFields(t *testing.T) {
	needMksquashfs(t)
	src := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(src, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    Options
		want Release
	}{
		{"flatcar level", Options{OSID: "flatcar", SysextLevel: "1.0", Arch: "arm64"},
			Release{ID: "flatcar", SysextLevel: "1.0", Architecture: "arm64"}},
		{"debian version", Options{OSID: "debian", VersionID: "12", SysextLevel: "1.0", Arch: ArchAny},
			Release{ID: "debian", SysextLevel: "1.0", VersionID: "12"}},
		{"host arch", Options{}, Release{ID: AnyOS, Architecture: HostArch()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.Name, o.Version, o.Files = "tools", "1.0", []FileSpec{{src, "/opt/tools/tool"}}
			out := filepath.Join(t.TempDir(), "tools-1.0.raw")
			if _, err := Build(o, out); err != nil {
				t.Fatal(err)
			}
			info, err := Inspect(out)
			if err != nil {
				t.Fatal(err)
			}
			tc.want.SysextID, tc.want.SysextVersionID = "tools", "1.0"
			if got := info.Release(); got != tc.want {
				t.Errorf("release %+v, want %+v", got, tc.want)
			}
			if err := Validate(info, Want{Name: "tools", Architecture: or(o.arch(), ArchAny)}); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestBuildRefuses: bad options and bad trees are refused with a message
// naming the flag or file and the fix, and leave no file behind.
func TestBuildRefuses(t *testing.T) {
	needMksquashfs(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "kubelet")
	if err := os.WriteFile(bin, []byte("ELF"), 0o755); err != nil {
		t.Fatal(err)
	}
	tree := func(m map[string]string) string {
		d := t.TempDir()
		mkTree(t, d, m)
		return d
	}
	fifoTree := tree(map[string]string{"usr/bin/x": "x"})
	if err := syscall.Mkfifo(filepath.Join(fifoTree, "usr/bin/pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok := Options{Name: "kubelet", Version: "v1.34.4", Files: []FileSpec{{bin, "/usr/bin/kubelet"}}}
	with := func(f func(*Options)) Options { o := ok; o.Files = slices.Clone(ok.Files); f(&o); return o }
	for _, tc := range []struct {
		name    string
		o       Options
		options bool // a usage error (ErrOptions)
		want    []string
	}{
		{"no name", with(func(o *Options) { o.Name = "" }), true, []string{"--name", "name is empty"}},
		{"dot dot", with(func(o *Options) { o.Name = "../x" }), true, []string{`--name: name "../x"`, "letters, digits and . _ -"}},
		{"hidden", with(func(o *Options) { o.Name = ".kubelet" }), true, []string{"starting with a letter or digit"}},
		{"slash", with(func(o *Options) { o.Name = "a/b" }), true, []string{`name "a/b"`}},
		{"long name", with(func(o *Options) { o.Name = strings.Repeat("k", 65) }), true, []string{"at most 64"}},
		{"no version", with(func(o *Options) { o.Version = "" }), true, []string{"--version", "version is empty"}},
		{"bad version", with(func(o *Options) { o.Version = "1 2" }), true, []string{`--version: version "1 2"`}},
		{"nothing", with(func(o *Options) { o.Files = nil }), true, []string{"nothing to put into the extension", "--from DIR", "--file SRC:DEST"}},
		{"go arch", with(func(o *Options) { o.Arch = "amd64" }), true, []string{"--arch", "systemd calls amd64 x86-64"}},
		{"debian arch", with(func(o *Options) { o.Arch = "aarch64" }), true, []string{"systemd calls aarch64 arm64"}},
		{"os id alone", with(func(o *Options) { o.OSID = "flatcar" }), true, []string{"--os-id flatcar needs --sysext-level or --version-id"}},
		{"level alone", with(func(o *Options) { o.SysextLevel = "1.0" }), true, []string{"go with --os-id"}},
		{"upper os id", with(func(o *Options) { o.OSID, o.VersionID = "Flatcar", "1" }), true, []string{`--os-id "Flatcar"`, "lower-case"}},
		{"any os id", with(func(o *Options) { o.OSID, o.VersionID = "_any", "1" }), true, []string{"leave --os-id out"}},
		{"relative dest", with(func(o *Options) { o.Files[0].Dest = "usr/bin/kubelet" }), true, []string{"--file " + bin + ":usr/bin/kubelet", "not absolute"}},
		{"etc dest", with(func(o *Options) { o.Files[0].Dest = "/etc/kubelet" }), true, []string{"/etc/kubelet is not below /usr or /opt"}},
		{"usr dest", with(func(o *Options) { o.Files[0].Dest = "/usr" }), true, []string{"/usr is not below /usr or /opt"}},
		{"unclean dest", with(func(o *Options) { o.Files[0].Dest = "/usr/bin/../kubelet" }), true, []string{"not a clean path", "/usr/kubelet"}},
		{"release dest", with(func(o *Options) { o.Files[0].Dest = "/usr/lib/extension-release.d/extension-release.kubelet" }), true, []string{"writes the extension-release file itself"}},
		{"os-release dest", with(func(o *Options) { o.Files[0].Dest = "/usr/lib/os-release" }), true, []string{"must not replace the OS's os-release"}},
		{"twice", with(func(o *Options) { o.Files = append(o.Files, FileSpec{bin, "/usr/bin/kubelet"}) }), true, []string{"/usr/bin/kubelet is given twice"}},
		{"no source", with(func(o *Options) { o.Files[0].Src = "" }), true, []string{"no source file"}},

		{"missing source", with(func(o *Options) { o.Files[0].Src = filepath.Join(dir, "nope") }), false, []string{"--file " + dir + "/nope:/usr/bin/kubelet", "no such file"}},
		{"directory source", with(func(o *Options) { o.Files[0].Src = dir }), false, []string{"is a directory, not a regular file", "--from DIR"}},
		{"from a file", with(func(o *Options) { o.From = bin }), false, []string{"--from " + bin + ": not a directory"}},
		{"from missing", with(func(o *Options) { o.From = filepath.Join(dir, "nope") }), false, []string{"no such file"}},
		{"etc in from", with(func(o *Options) { o.From = tree(map[string]string{"etc/x.conf": "x", "usr/bin/y": "y"}) }), false,
			[]string{"etc is outside usr/ and opt/", "move it under usr/ or opt/"}},
		{"usr contents as from", with(func(o *Options) { o.From = tree(map[string]string{"bin/x": "x"}) }), false,
			[]string{"bin looks like the contents of usr/"}},
		{"usr is a file", with(func(o *Options) { o.From = tree(map[string]string{"usr": "x"}) }), false, []string{"usr is not a directory"}},
		{"release in from", with(func(o *Options) {
			o.From = tree(map[string]string{"usr/lib/extension-release.d/extension-release.kubelet": "ID=_any\n"})
		}), false, []string{"usr/lib/extension-release.d/extension-release.kubelet: roost-image writes the extension-release file itself"}},
		{"os-release in from", with(func(o *Options) { o.From = tree(map[string]string{"usr/lib/os-release": "ID=evil\n"}) }), false,
			[]string{"usr/lib/os-release: an extension must not replace the OS's os-release"}},
		{"fifo in from", with(func(o *Options) { o.From = fifoTree }), false, []string{"usr/bin/pipe is a named pipe", "regular files, directories and symbolic links only"}},
		{"from and file", with(func(o *Options) { o.From = tree(map[string]string{"usr/bin/kubelet": "old"}) }), false,
			[]string{"/usr/bin/kubelet is also in --from", "give it once"}},
		{"below a file", with(func(o *Options) {
			o.From = tree(map[string]string{"usr/bin/kubelet.d": "a file"})
			o.Files[0].Dest = "/usr/bin/kubelet.d/kubelet"
		}), false, []string{"/usr/bin/kubelet.d is a regular file in --from", "nothing can go below it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outDir := t.TempDir()
			_, err := Build(tc.o, filepath.Join(outDir, "x.raw"))
			if err == nil {
				t.Fatal("built")
			}
			if errors.Is(err, ErrOptions) != tc.options {
				t.Errorf("errors.Is(err, ErrOptions) = %v, want %v: %v", !tc.options, tc.options, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if left, _ := os.ReadDir(outDir); len(left) > 0 {
				t.Errorf("left %v behind", left)
			}
		})
	}
}

// TestBuildNeedsMksquashfs: a missing or old mksquashfs is named with the
// package to install (no real mksquashfs needed).
func TestBuildNeedsMksquashfs(t *testing.T) {
	src := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(src, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := Options{Name: "x", Version: "1", Files: []FileSpec{{src, "/usr/share/x"}}}

	t.Setenv("PATH", t.TempDir())
	_, err := Build(o, filepath.Join(t.TempDir(), "x.raw"))
	if !errors.Is(err, ErrNoMksquashfs) || !strings.Contains(err.Error(), "install the Debian package squashfs-tools") {
		t.Errorf("without mksquashfs: %v", err)
	}

	fake := t.TempDir()
	if err := os.WriteFile(filepath.Join(fake, "mksquashfs"), []byte("#!/bin/sh\necho 'mksquashfs version 4.3-git (2014/06/09)'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", fake+":/usr/bin:/bin")
	_, err = Build(o, filepath.Join(t.TempDir(), "x.raw"))
	if !errors.Is(err, ErrNoMksquashfs) || !strings.Contains(err.Error(), "need 4.4 or newer") {
		t.Errorf("with mksquashfs 4.3: %v", err)
	}
}

func TestParseFileSpec(t *testing.T) {
	for in, want := range map[string]FileSpec{
		"bin/kubelet:/usr/bin/kubelet": {"bin/kubelet", "/usr/bin/kubelet"},
		"/a:b/c:/opt/x":                {"/a:b/c", "/opt/x"},
		"./k:/usr/bin/k":               {"./k", "/usr/bin/k"},
	} {
		got, err := ParseFileSpec(in)
		if err != nil || got != want {
			t.Errorf("ParseFileSpec(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"kubelet", ":/usr/bin/kubelet", "kubelet:usr/bin/kubelet", ""} {
		if _, err := ParseFileSpec(in); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "want SRC:DEST") {
			t.Errorf("ParseFileSpec(%q): %v", in, err)
		}
	}
}
