package sysext

import (
	"errors"
	"strings"
	"testing"
)

// goodRelease is a valid release file of extension kubelet.
var goodRelease = releaseOf("ID=_any", "ARCHITECTURE=x86-64", "SYSEXT_ID=kubelet", "SYSEXT_VERSION_ID=v1.34.4")

const kubeletRelease = "usr/lib/extension-release.d/extension-release.kubelet"

// TestValidate: images packed by hand with mksquashfs, each wrong in one
// way, are refused with the problem's sentinel and a message saying what
// to fix; the good variants pass.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		tree map[string]string
		want Want
		kind error // nil: valid
		msg  []string
	}{
		{"good", map[string]string{kubeletRelease: goodRelease, "usr/bin/kubelet*": "ELF"}, Want{Name: "kubelet"}, nil, nil},
		{"good, any name, opt", map[string]string{kubeletRelease: goodRelease, "opt/k/bin*": "ELF"}, Want{}, nil, nil},
		{"good, no architecture", map[string]string{kubeletRelease: releaseOf("ID=_any", "SYSEXT_VERSION_ID=1")}, Want{Architecture: "arm64"}, nil, nil},
		{"good, os with level", map[string]string{kubeletRelease: releaseOf("ID=flatcar", "SYSEXT_LEVEL=1.0", "SYSEXT_VERSION_ID=1", "ARCHITECTURE=x86-64")}, Want{}, nil, nil},
		{"good, os with version", map[string]string{kubeletRelease: releaseOf("ID=debian", `VERSION_ID="12"`, "SYSEXT_VERSION_ID=1")}, Want{}, nil, nil},
		{"good, other arch wanted", map[string]string{kubeletRelease: releaseOf("ID=_any", "ARCHITECTURE=arm64", "SYSEXT_VERSION_ID=1")}, Want{Architecture: "arm64"}, nil, nil},
		{"good, arch not checked", map[string]string{kubeletRelease: releaseOf("ID=_any", "ARCHITECTURE=arm64", "SYSEXT_VERSION_ID=1")}, Want{Architecture: ArchAny}, nil, nil},

		{"no release", map[string]string{"usr/bin/kubelet*": "ELF"}, Want{Name: "kubelet"}, ErrNoRelease,
			[]string{"no extension-release file", "/usr/lib/extension-release.d/extension-release.kubelet", "--name and --version"}},
		{"release in the wrong directory", map[string]string{"usr/lib/extension-release.kubelet": goodRelease}, Want{}, ErrNoRelease,
			[]string{"extension-release.d/extension-release.NAME"}},
		{"two releases", map[string]string{kubeletRelease: goodRelease, "usr/lib/extension-release.d/extension-release.other": goodRelease}, Want{}, ErrManyReleases,
			[]string{"2 extension-release files", "/usr/lib/extension-release.d/extension-release.kubelet, /usr/lib/extension-release.d/extension-release.other", "keep exactly one"}},
		{"other name", map[string]string{"usr/lib/extension-release.d/extension-release.kube": goodRelease}, Want{Name: "kubelet"}, ErrName,
			[]string{`the image is the extension "kube"`, `want "kubelet"`, "--name kubelet"}},
		{"SYSEXT_ID differs", map[string]string{kubeletRelease: releaseOf("ID=_any", "SYSEXT_ID=kube", "SYSEXT_VERSION_ID=1")}, Want{}, ErrName,
			[]string{"SYSEXT_ID=kube differs", "make them equal"}},
		{"bad name", map[string]string{"usr/lib/extension-release.d/extension-release.a b": goodRelease}, Want{}, ErrName,
			[]string{`extension name "a b"`}},
		{"no version", map[string]string{kubeletRelease: releaseOf("ID=_any")}, Want{}, ErrNoVersion,
			[]string{"has no SYSEXT_VERSION_ID", "--version"}},
		{"no ID", map[string]string{kubeletRelease: releaseOf("SYSEXT_VERSION_ID=1", "ARCHITECTURE=x86-64")}, Want{}, ErrNoID,
			[]string{"has no ID", "set ID=_any", "--os-id"}},
		{"ID without level", map[string]string{kubeletRelease: releaseOf("ID=flatcar", "SYSEXT_VERSION_ID=1")}, Want{}, ErrNoLevel,
			[]string{"ID=flatcar but neither SYSEXT_LEVEL nor VERSION_ID", "systemd-sysext refuses it", "--sysext-level"}},
		{"arm64 for x86-64", map[string]string{kubeletRelease: releaseOf("ID=_any", "ARCHITECTURE=arm64", "SYSEXT_VERSION_ID=1")}, Want{}, ErrArch,
			[]string{"ARCHITECTURE=arm64, want x86-64", "--arch x86-64"}},
		{"not an architecture", map[string]string{kubeletRelease: releaseOf("ID=_any", "ARCHITECTURE=amd64", "SYSEXT_VERSION_ID=1")}, Want{}, ErrArch,
			[]string{`"amd64" is not a systemd architecture name (systemd calls amd64 x86-64)`}},
		{"etc", map[string]string{kubeletRelease: goodRelease, "etc/kubernetes/kubelet.conf": "x", "usr/bin/kubelet*": "ELF"}, Want{}, ErrOutside,
			[]string{"1 file (/etc/kubernetes/kubelet.conf) outside /usr and /opt", "move them under /usr or /opt"}},
		{"many outside", map[string]string{kubeletRelease: goodRelease, "a": "", "b": "", "c": "", "d": "", "e": "", "f": "->a", "g": ""}, Want{}, ErrOutside,
			[]string{"7 files (/a, /b, /c, /d, /e and 2 more)"}},
		{"os-release", map[string]string{kubeletRelease: goodRelease, "usr/lib/os-release": "ID=evil\n"}, Want{}, ErrOSRelease,
			[]string{"ships /usr/lib/os-release", "must not replace the OS's os-release"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := Inspect(squash(t, tc.tree))
			if err != nil {
				t.Fatal(err)
			}
			err = Validate(info, tc.want)
			if tc.kind == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tc.kind) {
				t.Fatalf("error %v, want %v", err, tc.kind)
			}
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error lacks %q:\n%v", m, err)
				}
			}
			var p *Problem
			if !errors.As(err, &p) {
				t.Errorf("%v is not a *Problem", err)
			}
		})
	}
}

// TestValidateJoins: every problem of an image is reported at once.
func TestValidateJoins(t *testing.T) {
	info := &Info{Name: "kubelet", ReleaseFiles: []string{"/" + kubeletRelease}, ID: "flatcar", Architecture: "arm64",
		Paths: []string{"/etc/x", "/" + kubeletRelease, "/usr/lib/os-release"}}
	err := Validate(info, Want{Name: "kubelet"})
	for _, k := range []error{ErrNoVersion, ErrNoLevel, ErrArch, ErrOutside, ErrOSRelease} {
		if !errors.Is(err, k) {
			t.Errorf("%v lacks %v", err, k)
		}
	}
	for _, k := range []error{ErrNoRelease, ErrManyReleases, ErrName, ErrNoID} {
		if errors.Is(err, k) {
			t.Errorf("%v has %v", err, k)
		}
	}
}

func TestCheckSet(t *testing.T) {
	ext := func(name, version string, paths ...string) *Info {
		return &Info{Name: name, Version: version, Paths: append(paths, "/usr/lib/extension-release.d/extension-release."+name)}
	}
	kubelet := ext("kubelet", "v1.34.4", "/usr/bin/kubelet", "/usr/lib/systemd/system/kubelet.service")
	agent := ext("roost-agent", "1.0", "/usr/bin/roost-agent")
	for _, tc := range []struct {
		name string
		set  []*Info
		kind error
		msg  []string
	}{
		{"disjoint", []*Info{kubelet, agent, ext("tools", "2", "/opt/tools/bin/x", "/usr/bin/crictl")}, nil, nil},
		{"empty", nil, nil, nil},
		{"same name", []*Info{kubelet, agent, ext("kubelet", "v1.35.0", "/usr/bin/kubelet")}, ErrDuplicate,
			[]string{"extensions kubelet v1.34.4 and kubelet v1.35.0 have the same name kubelet", "keep one"}},
		{"same path", []*Info{kubelet, agent, ext("tools", "2", "/usr/bin/crictl", "/usr/bin/kubelet")}, ErrConflict,
			[]string{"extensions kubelet v1.34.4 and tools 2 both ship 1 file (/usr/bin/kubelet)", "remove it from one of them"}},
		{"file where the other has a directory", []*Info{ext("a", "1", "/usr/lib/x"), ext("b", "1", "/usr/lib/x/y", "/usr/lib/x/z")}, ErrConflict,
			[]string{"extensions a 1 and b 1 both ship 1 file (/usr/lib/x)"}},
		{"directory where the other has a file", []*Info{ext("b", "1", "/usr/lib/x/y"), ext("a", "1", "/usr/lib/x")}, ErrConflict,
			[]string{"extensions b 1 and a 1 both ship 1 file (/usr/lib/x)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSet(tc.set)
			if tc.kind == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tc.kind) {
				t.Fatalf("error %v, want %v", err, tc.kind)
			}
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error lacks %q:\n%v", m, err)
				}
			}
		})
	}
}
