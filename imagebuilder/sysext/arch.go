package sysext

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
)

// ArchAny, given as Options.Architecture, builds an image without
// ARCHITECTURE (systemd-sysext then merges it on any architecture: for
// scripts and data); given as Want.Architecture it skips the check.
const ArchAny = "any"

// DefaultArch is the architecture Validate wants when Want.Architecture
// is empty: Roost's fleet is x86-64.
const DefaultArch = "x86-64"

// architectures are systemd's architecture names (systemd's
// architecture.c), as ARCHITECTURE= in an extension-release file takes
// them.
var architectures = []string{
	"alpha", "arc", "arc-be", "arm", "arm-be", "arm64", "arm64-be", "cris", "ia64", "loongarch64", "m68k",
	"mips", "mips-le", "mips64", "mips64-le", "nios2", "parisc", "parisc64", "ppc", "ppc-le", "ppc64", "ppc64-le",
	"riscv32", "riscv64", "s390", "s390x", "sh", "sh64", "sparc", "sparc64", "tilegx", "x86", "x86-64",
}

// goArch maps Go's GOARCH values to systemd's architecture names.
var goArch = map[string]string{
	"386": "x86", "amd64": "x86-64", "arm": "arm", "arm64": "arm64", "loong64": "loongarch64",
	"mips": "mips", "mipsle": "mips-le", "mips64": "mips64", "mips64le": "mips64-le",
	"ppc64": "ppc64", "ppc64le": "ppc64-le", "riscv64": "riscv64", "s390x": "s390x", "sparc64": "sparc64",
}

// HostArch is systemd's name for the architecture this program was built
// for (runtime.GOARCH): "x86-64" on amd64, "arm64" on arm64. It is ""
// for a GOARCH systemd has no name for (wasm).
func HostArch() string { return goArch[runtime.GOARCH] }

// ArchFromGo returns systemd's name for a GOARCH value ("amd64" →
// "x86-64") and whether there is one.
func ArchFromGo(goarch string) (string, bool) {
	a, ok := goArch[goarch]
	return a, ok
}

// ValidateArch checks that a is one of systemd's architecture names. The
// error for a Go or Debian name (amd64, aarch64) gives systemd's.
func ValidateArch(a string) error {
	if slices.Contains(architectures, a) {
		return nil
	}
	hint := ""
	if s, ok := goArch[a]; ok {
		hint = fmt.Sprintf(" (systemd calls %s %s)", a, s)
	} else if s, ok := map[string]string{"x86_64": "x86-64", "aarch64": "arm64", "i386": "x86", "i686": "x86", "armhf": "arm", "armel": "arm"}[a]; ok {
		hint = fmt.Sprintf(" (systemd calls %s %s)", a, s)
	}
	return fmt.Errorf("%q is not a systemd architecture name%s; want one of %s", a, hint, strings.Join(architectures, ", "))
}
