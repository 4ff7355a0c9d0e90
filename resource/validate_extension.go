package resource

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
)

// Extensions: the syntax of their names, versions and architectures (the
// rules of imagebuilder/sysext, which builds them), the name of an
// Extension object, and MachineClass spec.extensions references.

// Bounds of extension names and versions (bytes), as imagebuilder/sysext
// has them, and of a MachineClass's spec.extensions.
const (
	MaxExtensionNameLen    = 64
	MaxExtensionVersionLen = 64
	// MaxClassExtensions is how many Extensions a MachineClass may name.
	MaxClassExtensions = 32
	// DefaultExtensionArchitecture is the architecture of a Server that
	// reports none (no roost.io/arch label): Roost's fleet is x86-64.
	DefaultExtensionArchitecture = "x86-64"
)

var (
	extensionNameRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	extensionVersionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+~-]*$`)
)

// extensionArchitectures are systemd's architecture names (its
// architecture.c), as ARCHITECTURE= in an extension-release file takes them.
var extensionArchitectures = []string{
	"alpha", "arc", "arc-be", "arm", "arm-be", "arm64", "arm64-be", "cris", "ia64", "loongarch64", "m68k",
	"mips", "mips-le", "mips64", "mips64-le", "nios2", "parisc", "parisc64", "ppc", "ppc-le", "ppc64", "ppc64-le",
	"riscv32", "riscv64", "s390", "s390x", "sh", "sh64", "sparc", "sparc64", "tilegx", "x86", "x86-64",
}

// goArchitectures maps Go's (and Kubernetes') GOARCH names, which a
// Server's roost.io/arch label carries, to systemd's.
var goArchitectures = map[string]string{
	"386": "x86", "amd64": "x86-64", "arm": "arm", "arm64": "arm64", "loong64": "loongarch64",
	"mips": "mips", "mipsle": "mips-le", "mips64": "mips64", "mips64le": "mips64-le",
	"ppc64": "ppc64", "ppc64le": "ppc64-le", "riscv64": "riscv64", "s390x": "s390x", "sparc64": "sparc64",
}

// ExtensionArchitecture is systemd's name for a Server architecture as
// the roost.io/arch label gives it (Go's name: "amd64" → "x86-64");
// DefaultExtensionArchitecture for ""; a name systemd uses already, or one
// it does not know, is returned as it is.
func ExtensionArchitecture(goarch string) string {
	if goarch == "" {
		return DefaultExtensionArchitecture
	}
	if a, ok := goArchitectures[goarch]; ok {
		return a
	}
	return goarch
}

// ValidateExtensionName checks an extension name: 1–64 characters of ASCII
// letters, digits and . _ -, starting with a letter or digit (kubelet,
// roost-agent).
func ValidateExtensionName(name string) error {
	switch {
	case name == "":
		return errors.New("is empty: give the extension's name, e.g. kubelet")
	case len(name) > MaxExtensionNameLen:
		return fmt.Errorf("%q is %d characters long, at most %d are allowed", name, len(name), MaxExtensionNameLen)
	case !extensionNameRE.MatchString(name):
		return fmt.Errorf("%q: use letters, digits and . _ - only, starting with a letter or digit (kubelet, roost-agent)", name)
	}
	return nil
}

// ValidateExtensionVersion checks an extension version: 1–64 characters of
// ASCII letters, digits and . _ + ~ -, starting with a letter or digit
// (v1.34.4, 1.34.4-1, 2026.11.0+site1).
func ValidateExtensionVersion(version string) error {
	switch {
	case version == "":
		return errors.New("is empty: give a version such as v1.34.4")
	case len(version) > MaxExtensionVersionLen:
		return fmt.Errorf("%q is %d characters long, at most %d are allowed", version, len(version), MaxExtensionVersionLen)
	case !extensionVersionRE.MatchString(version):
		return fmt.Errorf("%q: use letters, digits and . _ + ~ - only, starting with a letter or digit (v1.34.4, 1.0.2-1)", version)
	}
	return nil
}

// ValidateExtensionArchitecture checks an extension's architecture: "" (any)
// or one of systemd's names; the error for a Go or Debian name (amd64,
// aarch64) gives systemd's.
func ValidateExtensionArchitecture(a string) error {
	if a == "" || slices.Contains(extensionArchitectures, a) {
		return nil
	}
	hint := ""
	if s, ok := goArchitectures[a]; ok {
		hint = fmt.Sprintf(" (systemd calls %s %s)", a, s)
	} else if s, ok := map[string]string{"x86_64": "x86-64", "aarch64": "arm64", "i386": "x86", "i686": "x86", "armhf": "arm", "armel": "arm"}[a]; ok {
		hint = fmt.Sprintf(" (systemd calls %s %s)", a, s)
	}
	return fmt.Errorf("%q is not a systemd architecture name%s", a, hint)
}

// ExtensionObjectName is the name of the Extension object of an
// extension's name and version: both lower-cased, joined by "-", with
// every character other than a letter, a digit or "-" replaced by "-"
// ("kubelet", "v1.34.4" → "kubelet-v1-34-4"). It must be a DNS-1123 label
// (at most 63 characters, ending in a letter or digit); validation says
// so when it is not. Two extensions whose names and versions differ only
// in case or separators share a name; the hub keeps the first.
func ExtensionObjectName(name, version string) string {
	return strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(name+"-"+version))
}

// ParseExtensionRef splits a MachineClass's spec.extensions item: "NAME"
// (the newest version the hub holds) or "NAME=VERSION" (that one). The
// error says what is wrong with it.
func ParseExtensionRef(ref string) (name, version string, err error) {
	name, version, pinned := strings.Cut(ref, "=")
	if err := ValidateExtensionName(name); err != nil {
		if name == "" && pinned {
			return "", "", fmt.Errorf("%q has no name before \"=\": write NAME or NAME=VERSION, e.g. kubelet=v1.34.4", ref)
		}
		return "", "", fmt.Errorf("extension name %w", err)
	}
	if pinned {
		if version == "" {
			return "", "", fmt.Errorf("%q has no version after \"=\": write %s for the newest version, or %s=VERSION", ref, name, name)
		}
		if err := ValidateExtensionVersion(version); err != nil {
			return "", "", fmt.Errorf("extension version %w", err)
		}
	}
	return name, version, nil
}

// checkClassExtensions checks a MachineClass's spec.extensions: at most
// MaxClassExtensions items, each "NAME" or "NAME=VERSION"
// (ParseExtensionRef), no extension named twice (a Machine merges one
// version of each). Whether they exist, fit the Servers' architecture and
// ship no path twice is the hub's business.
func checkClassExtensions(e *violations, refs []string) {
	const f = "spec.extensions"
	if len(refs) > MaxClassExtensions {
		e.addf(f, "merge what belongs together into fewer extensions", "%d extensions; at most %d", len(refs), MaxClassExtensions)
	}
	first := map[string]int{}
	for i, ref := range refs[:min(len(refs), MaxClassExtensions)] {
		name, _, err := ParseExtensionRef(ref)
		if err != nil {
			e.add(joinIndex(f, i), err.Error(), `write NAME for the newest version, or NAME=VERSION, e.g. "kubelet" or "kubelet=v1.34.4"`)
			continue
		}
		if j, dup := first[name]; dup {
			e.addf(joinIndex(f, i), "keep one item per extension", "extension %s is named twice (also spec.extensions[%d]); a Machine runs one version of each", name, j)
			continue
		}
		first[name] = i
	}
}

// validateExtension checks an Extension as the hub stores it: name and
// version (ValidateExtensionName, ValidateExtensionVersion) and the object
// name they make (ExtensionObjectName), the architecture, the image
// (sha256, size > 0), the paths (absolute, clean, under /usr or /opt,
// sorted, each once), a base64 ed25519 signature, and a manifest that
// describes all of it (releasesig.Extension.CheckManifest). Whether a
// trusted key signed it, and whether the image is stored, is the hub's
// business.
func validateExtension(e *violations, md *roostv1.ObjectMeta, s *roostv1.ExtensionSpec) {
	const remake = "build it again with roost-image sysext and push the .raw with its .manifest.json and .sig"
	before := len(e.list)
	nameOK, versionOK := true, true
	if err := ValidateExtensionName(s.GetName()); err != nil {
		e.add("spec.name", err.Error(), remake)
		nameOK = false
	}
	if err := ValidateExtensionVersion(s.GetVersion()); err != nil {
		e.add("spec.version", err.Error(), remake)
		versionOK = false
	}
	if nameOK && versionOK {
		want := ExtensionObjectName(s.GetName(), s.GetVersion())
		switch msgs := validation.IsDNS1123Label(want); {
		case len(msgs) > 0:
			e.addf("spec.version", "use a shorter name or version, ending in a letter or digit",
				"name %q and version %q make the Extension name %q, which is not a DNS-1123 label: %s", s.GetName(), s.GetVersion(), want, strings.Join(msgs, "; "))
		case md.GetName() != want:
			e.addf("metadata.name", fmt.Sprintf("name it %q, or leave the name empty", want), "%q does not match extension %s version %s", md.GetName(), s.GetName(), s.GetVersion())
		}
	}
	if err := ValidateExtensionArchitecture(s.GetArchitecture()); err != nil {
		e.add("spec.architecture", err.Error(), `use systemd's name, e.g. "x86-64" or "arm64", or leave it empty for any`)
	}
	img := s.GetImage()
	switch {
	case img == nil:
		e.add("spec.image", "is required", "give the .raw file's sha256 and size from the manifest")
	default:
		if d := img.GetSha256(); len(d) != 64 || strings.Trim(d, "0123456789abcdef") != "" {
			e.addf("spec.image.sha256", "give the lower-case hex sha256 of the .raw file", "%q is not a lower-case hex sha256", d)
		}
		if img.GetSize() <= 0 {
			e.addf("spec.image.size", "give the .raw file's size in bytes", "must be > 0 bytes, got %d", img.GetSize())
		}
	}
	checkExtensionPaths(e, s.GetPaths())
	if sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s.GetSignature())); s.GetSignature() == "" {
		e.add("spec.signature", "is required", "sign the manifest (roost-image sysext --key) and send the content of the .manifest.json.sig file")
	} else if err != nil || len(sig) != ed25519.SignatureSize {
		e.addf("spec.signature", "send the content of the .manifest.json.sig file", "not a base64 ed25519 signature (%d bytes decoded, want %d)", len(sig), ed25519.SignatureSize)
	}
	if len(s.GetManifest()) == 0 {
		e.add("spec.manifest", "is required", "send the .manifest.json file verbatim")
	} else if len(e.list) == before {
		// Only a well-formed spec is compared with its manifest: the
		// violations above say more.
		if err := releasesig.FromExtension(s).CheckManifest(); err != nil {
			e.add("spec.manifest", err.Error(), "take name, version, architecture, image and paths from the manifest")
		}
	}
}

// maxPathViolations bounds the violations checkExtensionPaths reports.
const maxPathViolations = 5

// checkExtensionPaths checks an Extension's spec.paths: at least one,
// each absolute, clean and under /usr or /opt (what systemd-sysext
// merges), sorted, none twice.
func checkExtensionPaths(e *violations, paths []string) {
	const f = "spec.paths"
	const hint = "take the paths from the manifest roost-image sysext wrote"
	if len(paths) == 0 {
		e.add(f, "is empty: an extension ships at least one file", hint)
		return
	}
	n := 0
	for i, p := range paths {
		var msg string
		switch {
		case !strings.HasPrefix(p, "/") || path.Clean(p) != p:
			msg = fmt.Sprintf("%q is not a clean absolute path", p)
		case !strings.HasPrefix(p, "/usr/") && !strings.HasPrefix(p, "/opt/"):
			msg = fmt.Sprintf("%q is outside /usr and /opt, which is all systemd-sysext merges", p)
		case i > 0 && paths[i-1] >= p:
			msg = fmt.Sprintf("%q comes after %q: the paths must be sorted, each once", p, paths[i-1])
		default:
			continue
		}
		e.add(joinIndex(f, i), msg, hint)
		if n++; n == maxPathViolations {
			return
		}
	}
}

// CompareExtensionVersions orders extension versions "naturally", as
// semantic versions extended to any version string: a leading "v" before
// a digit is ignored; runs of digits compare as numbers and other runs as
// text ("v1.34.10" > "v1.34.9" > "1.34"); a "-" or "~" starts a
// pre-release, which comes before the version without it ("1.35.0-rc.1"
// < "1.35.0"), and a "+" build suffix comes after. Versions equal under
// these rules are ordered by their bytes, so the order is total. It
// returns -1, 0 or +1.
func CompareExtensionVersions(a, b string) int {
	split := func(v string) (core, pre, build string, hasPre bool) {
		if len(v) > 1 && (v[0] == 'v' || v[0] == 'V') && v[1] >= '0' && v[1] <= '9' {
			v = v[1:]
		}
		v, build, _ = strings.Cut(v, "+")
		if i := strings.IndexAny(v, "-~"); i >= 0 {
			return v[:i], v[i+1:], build, true
		}
		return v, "", build, false
	}
	ac, ap, ab, aPre := split(a)
	bc, bp, bb, bPre := split(b)
	if c := naturalCompare(ac, bc); c != 0 {
		return c
	}
	switch {
	case aPre && !bPre:
		return -1
	case !aPre && bPre:
		return 1
	}
	if c := naturalCompare(ap, bp); c != 0 {
		return c
	}
	if c := naturalCompare(ab, bb); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// naturalCompare compares a and b run by run: digit runs as numbers,
// other runs as bytes; a prefix comes first.
func naturalCompare(a, b string) int {
	isDigit := func(c byte) bool { return c >= '0' && c <= '9' }
	run := func(s string) (string, string) {
		i := 1
		for i < len(s) && isDigit(s[i]) == isDigit(s[0]) {
			i++
		}
		return s[:i], s[i:]
	}
	for a != "" && b != "" {
		var ra, rb string
		ra, a = run(a)
		rb, b = run(b)
		da, db := isDigit(ra[0]), isDigit(rb[0])
		switch {
		case da && db:
			na, nb := strings.TrimLeft(ra, "0"), strings.TrimLeft(rb, "0")
			if len(na) != len(nb) {
				return cmpInt(len(na), len(nb))
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
		case da != db:
			// a number sorts before text ("1.0.1" < "1.0.a")
			if da {
				return -1
			}
			return 1
		default:
			if c := strings.Compare(ra, rb); c != 0 {
				return c
			}
		}
	}
	return cmpInt(len(a), len(b))
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
