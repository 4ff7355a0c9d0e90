package sysext

import (
	"strings"
	"testing"
)

func TestParseRelease(t *testing.T) {
	got, err := ParseRelease([]byte(`# comment
ID=flatcar
  SYSEXT_LEVEL='1.0'
VERSION_ID="3975.2.1"
ARCHITECTURE=x86-64
SYSEXT_ID="kube\"let"
SYSEXT_VERSION_ID=v1\.34
PRETTY_NAME="ignored, with spaces"

ID=debian
`))
	if err != nil {
		t.Fatal(err)
	}
	want := Release{ID: "debian", SysextLevel: "1.0", VersionID: "3975.2.1", Architecture: "x86-64", SysextID: `kube"let`, SysextVersionID: "v1.34"}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	for in, msg := range map[string]string{
		"ID=_any\nnonsense\n": `line 2: "nonsense" is not KEY=VALUE`,
		"1D=x\n":              `line 1: "1D=x" is not KEY=VALUE`,
		"ID=\"open\n":         "line 1: ID: unterminated double quote",
		"ID='open\n":          "line 1: ID: unterminated single quote",
		"NAME=two words\n":    "line 1: NAME: unquoted white space",
	} {
		if _, err := ParseRelease([]byte(in)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseRelease(%q): %v, want %q", in, err, msg)
		}
	}
}

func TestReleaseRoundTrip(t *testing.T) {
	for _, r := range []Release{
		{ID: AnyOS, Architecture: "x86-64", SysextID: "kubelet", SysextVersionID: "v1.34.4"},
		{ID: "flatcar", SysextLevel: "1.0", VersionID: "3975.2.1", SysextID: "x", SysextVersionID: "1+site~1"},
		{ID: "odd value", SysextID: `a"b$c\d` + "`"},
	} {
		got, err := ParseRelease(r.Marshal())
		if err != nil || got != r {
			t.Errorf("%+v → %q → %+v, %v", r, r.Marshal(), got, err)
		}
	}
	if got := string(Release{ID: AnyOS, SysextID: "k", SysextVersionID: "1"}.Marshal()); got != "ID=_any\nSYSEXT_ID=k\nSYSEXT_VERSION_ID=1\n" {
		t.Errorf("Marshal: %q", got)
	}
}

func TestNames(t *testing.T) {
	for _, ok := range []string{"kubelet", "roost-agent", "a", "K8s_1.2"} {
		if err := ValidateName(ok); err != nil {
			t.Error(err)
		}
	}
	for _, bad := range []string{"", ".", "..", ".x", "-x", "a/b", "a b", "ä", strings.Repeat("a", 65)} {
		if ValidateName(bad) == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	for _, ok := range []string{"v1.34.4", "1", "2026.11.0+site1", "1.0~rc1", "1.0-1"} {
		if err := ValidateVersion(ok); err != nil {
			t.Error(err)
		}
	}
	for _, bad := range []string{"", ".1", "1/2", "1 2", "1:2", strings.Repeat("1", 65)} {
		if ValidateVersion(bad) == nil {
			t.Errorf("version %q accepted", bad)
		}
	}
}

func TestArch(t *testing.T) {
	for goarch, want := range map[string]string{"amd64": "x86-64", "arm64": "arm64", "386": "x86", "ppc64le": "ppc64-le", "riscv64": "riscv64"} {
		if got, ok := ArchFromGo(goarch); !ok || got != want {
			t.Errorf("ArchFromGo(%s) = %q", goarch, got)
		}
		if err := ValidateArch(want); err != nil {
			t.Error(err)
		}
	}
	if _, ok := ArchFromGo("wasm"); ok {
		t.Error("wasm has a systemd name")
	}
	if err := ValidateArch(HostArch()); err != nil {
		t.Errorf("host: %v", err)
	}
	if err := ValidateArch("x86_64"); err == nil || !strings.Contains(err.Error(), "systemd calls x86_64 x86-64") {
		t.Errorf("x86_64: %v", err)
	}
}
