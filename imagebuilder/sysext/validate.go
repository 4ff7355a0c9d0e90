package sysext

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Errors of Validate and CheckSet; each problem wraps one of them (test
// with errors.Is) and its message says what to fix.
var (
	ErrNoRelease    = errors.New("no extension-release file")
	ErrManyReleases = errors.New("more than one extension-release file")
	ErrName         = errors.New("wrong extension name")
	ErrNoVersion    = errors.New("no extension version")
	ErrNoID         = errors.New("no ID")
	ErrNoLevel      = errors.New("no SYSEXT_LEVEL or VERSION_ID")
	ErrArch         = errors.New("wrong architecture")
	ErrOutside      = errors.New("files outside /usr and /opt")
	ErrOSRelease    = errors.New("an os-release file")
	ErrDuplicate    = errors.New("two extensions of one name")
	ErrConflict     = errors.New("two extensions ship one path")
)

// Problem is one thing wrong with an extension: Kind is the sentinel
// error (ErrNoRelease, …) it matches with errors.Is; Error says what to
// fix.
type Problem struct {
	Kind error
	Msg  string
}

func (p *Problem) Error() string { return p.Msg }
func (p *Problem) Unwrap() error { return p.Kind }

func problem(kind error, format string, a ...any) error {
	return &Problem{Kind: kind, Msg: fmt.Sprintf(format, a...)}
}

// Want is what Validate expects of an image.
type Want struct {
	// Name is the extension name the image must carry; "" accepts any
	// valid name.
	Name string
	// Architecture is systemd's name of the architecture the image must
	// merge on: "" means DefaultArch (x86-64), ArchAny skips the check.
	// An image without ARCHITECTURE merges anywhere and always passes.
	Architecture string
}

// osReleasePaths are the files by which a host knows its OS: an
// extension must not bring its own.
var osReleasePaths = []string{"/usr/lib/os-release", "/etc/os-release"}

// maxListed is how many paths a problem lists before "and N more".
const maxListed = 5

// Validate checks an inspected image as the hub checks a pushed extension
// and the agent before it stages one: exactly one extension-release file,
// named want.Name; a valid name and SYSEXT_VERSION_ID; SYSEXT_ID, if set,
// equal to the name; an ID, and with an ID other than _any a SYSEXT_LEVEL
// or VERSION_ID (systemd-sysext refuses the image otherwise); an
// ARCHITECTURE that is systemd's name for want's; every file under /usr
// or /opt (systemd-sysext ignores the rest); no os-release. It returns nil
// or every problem found, joined (errors.Join), each a *Problem.
func Validate(info *Info, want Want) error {
	var errs []error
	add := func(kind error, format string, a ...any) { errs = append(errs, problem(kind, format, a...)) }
	name := info.Name
	if name == "" {
		name = want.Name
	}
	switch n := len(info.ReleaseFiles); {
	case n == 0:
		add(ErrNoRelease, "no extension-release file: an extension must hold /%s (roost-image sysext writes it from --name and --version)", ReleasePath(or(want.Name, "NAME")))
	case n > 1:
		add(ErrManyReleases, "%d extension-release files (%s): keep exactly one, /%s", n, strings.Join(info.ReleaseFiles, ", "), ReleasePath(or(want.Name, "NAME")))
	}
	if info.Name != "" {
		if err := ValidateName(info.Name); err != nil {
			add(ErrName, "/%s: extension %v", ReleasePath(info.Name), err)
		} else if want.Name != "" && info.Name != want.Name {
			add(ErrName, "the image is the extension %q (its release file is /%s), want %q: rebuild it with --name %s, or use it under its own name",
				info.Name, ReleasePath(info.Name), want.Name, want.Name)
		}
		if info.SysextID != "" && info.SysextID != info.Name {
			add(ErrName, "SYSEXT_ID=%s differs from the name in the file name /%s: make them equal", info.SysextID, ReleasePath(info.Name))
		}
	}
	if len(info.ReleaseFiles) == 1 {
		rel := "/" + ReleasePath(info.Name)
		switch {
		case info.Version == "":
			add(ErrNoVersion, "%s has no SYSEXT_VERSION_ID: Roost names extensions NAME-VERSION; rebuild with roost-image sysext --version", rel)
		default:
			if err := ValidateVersion(info.Version); err != nil {
				add(ErrNoVersion, "%s: SYSEXT_VERSION_ID: %v", rel, err)
			}
		}
		switch {
		case info.ID == "":
			add(ErrNoID, "%s has no ID: set ID=%s to merge on any OS, or the OS's ID with SYSEXT_LEVEL or VERSION_ID (--os-id with --sysext-level or --version-id)", rel, AnyOS)
		case info.ID != AnyOS && info.SysextLevel == "" && info.VersionID == "":
			add(ErrNoLevel, "%s has ID=%s but neither SYSEXT_LEVEL nor VERSION_ID, so systemd-sysext refuses it: add one (--sysext-level or --version-id), or use ID=%s",
				rel, info.ID, AnyOS)
		case info.ID != AnyOS:
			if err := validateOSField("ID", info.ID); err != nil {
				add(ErrNoID, "%s: %v", rel, err)
			}
		}
		wantArch := or(want.Architecture, DefaultArch)
		switch {
		case info.Architecture == "":
		case ValidateArch(info.Architecture) != nil:
			add(ErrArch, "%s: ARCHITECTURE: %v", rel, ValidateArch(info.Architecture))
		case wantArch != ArchAny && info.Architecture != wantArch:
			add(ErrArch, "%s has ARCHITECTURE=%s, want %s: rebuild it with --arch %s from binaries for %s", rel, info.Architecture, wantArch, wantArch, wantArch)
		}
	}
	var outside, osRelease []string
	for _, p := range info.Paths {
		if !underUsrOrOpt(p) {
			outside = append(outside, p)
		}
		for _, o := range osReleasePaths {
			if p == o {
				osRelease = append(osRelease, p)
			}
		}
	}
	if len(outside) > 0 {
		add(ErrOutside, "%s outside /usr and /opt, which systemd-sysext does not merge: move them under /usr or /opt, or deliver them with the MachineClass's ignition",
			listPaths(outside))
	}
	if len(osRelease) > 0 {
		add(ErrOSRelease, "the image ships %s: an extension must not replace the OS's os-release; remove it", strings.Join(osRelease, " and "))
	}
	return errors.Join(errs...)
}

// underUsrOrOpt says whether absolute path p is below /usr or /opt.
func underUsrOrOpt(p string) bool {
	return strings.HasPrefix(p, "/usr/") || strings.HasPrefix(p, "/opt/")
}

// listPaths names paths for an error: "1 file (/a)" or "7 files (/a, …
// and 2 more)".
func listPaths(ps []string) string {
	shown := ps
	more := ""
	if len(ps) > maxListed {
		shown, more = ps[:maxListed], fmt.Sprintf(" and %d more", len(ps)-maxListed)
	}
	noun := "files"
	if len(ps) == 1 {
		noun = "file"
	}
	return fmt.Sprintf("%d %s (%s%s)", len(ps), noun, strings.Join(shown, ", "), more)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// label names an extension in errors: "kubelet v1.34.4".
func (i *Info) label() string {
	if i.Version == "" {
		return or(i.Name, "(unnamed)")
	}
	return or(i.Name, "(unnamed)") + " " + i.Version
}

// CheckSet checks that extensions can be merged together on one host: no
// two of one name (a host runs one version of each) and no path shipped
// by two (one would hide the other), counting a file in one where the
// other has a directory. It returns nil or every conflict, joined, each a
// *Problem wrapping ErrDuplicate or ErrConflict that names both
// extensions (and the paths).
func CheckSet(infos []*Info) error {
	var errs []error
	byName := map[string]*Info{}
	owner := map[string]*Info{} // file or symlink path → extension
	for _, in := range infos {
		if in == nil {
			continue
		}
		if prev, ok := byName[in.Name]; ok {
			errs = append(errs, problem(ErrDuplicate, "extensions %s and %s have the same name %s: a Machine runs one version of each extension; keep one",
				prev.label(), in.label(), in.Name))
			continue
		}
		byName[in.Name] = in
	}
	type pair struct{ a, b *Info }
	clashes := map[pair][]string{}
	var order []pair
	clash := func(a, b *Info, p string) {
		k := pair{a, b}
		if _, ok := clashes[k]; !ok {
			order = append(order, k)
		}
		clashes[k] = append(clashes[k], p)
	}
	for _, in := range infos {
		if in == nil || byName[in.Name] != in {
			continue
		}
		for _, p := range in.Paths {
			if prev, ok := owner[p]; ok && prev != in {
				clash(prev, in, p)
				continue
			}
			// A file of another extension where this one has a directory.
			for d := parentOf(p); d != "/" && d != ""; d = parentOf(d) {
				if prev, ok := owner[d]; ok && prev != in {
					clash(prev, in, d)
					break
				}
			}
		}
		for _, p := range in.Paths {
			if _, ok := owner[p]; !ok {
				owner[p] = in
			}
		}
	}
	// A directory of this extension where an earlier one has a file is
	// found above; a file of this one where an earlier one has a
	// directory needs the earlier one's directories.
	dirs := map[string]*Info{}
	for _, in := range infos {
		if in == nil || byName[in.Name] != in {
			continue
		}
		for _, p := range in.Paths {
			if prev, ok := dirs[p]; ok && prev != in {
				clash(prev, in, p)
			}
		}
		for _, p := range in.Paths {
			for d := parentOf(p); d != "/" && d != ""; d = parentOf(d) {
				if _, ok := dirs[d]; !ok {
					dirs[d] = in
				}
			}
		}
	}
	for _, k := range order {
		ps := clashes[k]
		sort.Strings(ps)
		ps = compactStrings(ps)
		errs = append(errs, problem(ErrConflict, "extensions %s and %s both ship %s: systemd-sysext would let one hide the other; remove it from one of them",
			k.a.label(), k.b.label(), listPaths(ps)))
	}
	return errors.Join(errs...)
}

func parentOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
