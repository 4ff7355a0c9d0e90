package sysext

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ErrOptions matches (errors.Is) the errors of Options.Check and
// ParseFileSpec: bad usage, which roost-image reports with exit code 2.
var ErrOptions = errors.New("bad extension options")

// optionsError is an error of Options.Check: its message alone, matching
// ErrOptions.
type optionsError struct{ msg string }

func (e *optionsError) Error() string        { return e.msg }
func (e *optionsError) Is(target error) bool { return target == ErrOptions }

func optErr(format string, a ...any) error { return &optionsError{msg: fmt.Sprintf(format, a...)} }

// FileSpec is one file to put into an image: the host file Src (a
// symbolic link is followed) at the absolute path Dest under /usr or
// /opt ("/usr/bin/kubelet").
type FileSpec struct {
	Src, Dest string
}

func (f FileSpec) String() string { return f.Src + ":" + f.Dest }

// ParseFileSpec reads "SRC:DEST" (bin/kubelet:/usr/bin/kubelet), split
// at the last ":/". It checks only the shape; Options.Check checks DEST.
func ParseFileSpec(s string) (FileSpec, error) {
	i := strings.LastIndex(s, ":/")
	if i <= 0 {
		return FileSpec{}, optErr("--file %q: want SRC:DEST with DEST an absolute path, e.g. bin/kubelet:/usr/bin/kubelet", s)
	}
	return FileSpec{Src: s[:i], Dest: s[i+1:]}, nil
}

// Options say what Build puts into an image; each field is the
// roost-image sysext flag of the same name.
type Options struct {
	// Name and Version name the extension (ValidateName,
	// ValidateVersion): the release file is extension-release.NAME, with
	// SYSEXT_ID=NAME and SYSEXT_VERSION_ID=VERSION.
	Name, Version string
	// From is a directory whose contents are the image's root: it holds
	// usr/… and opt/… and nothing else. Optional if Files are given.
	From string
	// Files are single files to add (they may not replace one of From).
	Files []FileSpec
	// Arch is systemd's name of the architecture the files are for
	// (ARCHITECTURE=): "" means HostArch(), ArchAny writes none.
	Arch string
	// OSID is the ID= of the OS the extension is for; "" writes ID=_any
	// (any OS). With an OSID, SysextLevel or VersionID (or both) must be
	// given: systemd-sysext compares them with the host's os-release.
	OSID, SysextLevel, VersionID string
}

// arch is the ARCHITECTURE= value Build writes ("" for ArchAny).
func (o Options) arch() string {
	switch o.Arch {
	case "":
		return HostArch()
	case ArchAny:
		return ""
	}
	return o.Arch
}

// Release is the extension-release file Build writes for o.
func (o Options) Release() Release {
	r := Release{ID: AnyOS, Architecture: o.arch(), SysextID: o.Name, SysextVersionID: o.Version}
	if o.OSID != "" {
		r.ID, r.SysextLevel, r.VersionID = o.OSID, o.SysextLevel, o.VersionID
	}
	return r
}

// Check checks o without reading any file. Errors match ErrOptions and
// name the flag (--name, --file, …) and what to give instead.
func (o Options) Check() error {
	bad := func(flag string, err error) error { return optErr("%s: %v", flag, err) }
	if err := ValidateName(o.Name); err != nil {
		return bad("--name", err)
	}
	if err := ValidateVersion(o.Version); err != nil {
		return bad("--version", err)
	}
	if o.From == "" && len(o.Files) == 0 {
		return optErr("nothing to put into the extension: give --from DIR (holding usr/…) or --file SRC:DEST")
	}
	switch {
	case o.Arch == "" && HostArch() == "":
		return optErr("--arch: systemd has no name for this host's architecture; give --arch (x86-64, arm64, …) or --arch %s", ArchAny)
	case o.Arch != "" && o.Arch != ArchAny:
		if err := ValidateArch(o.Arch); err != nil {
			return bad("--arch", fmt.Errorf("%v, or %s for files that run anywhere", err, ArchAny))
		}
	}
	switch {
	case o.OSID == "" && (o.SysextLevel != "" || o.VersionID != ""):
		return optErr("--sysext-level and --version-id go with --os-id (without it the extension has ID=%s and merges on any OS)", AnyOS)
	case o.OSID == AnyOS:
		return optErr("--os-id %s is the default: leave --os-id out", AnyOS)
	case o.OSID != "":
		if err := validateOSField("--os-id", o.OSID); err != nil {
			return optErr("%v", err)
		}
		if o.SysextLevel == "" && o.VersionID == "" {
			return optErr("--os-id %s needs --sysext-level or --version-id: systemd-sysext refuses an extension for one OS without them", o.OSID)
		}
		for _, f := range [][2]string{{"--sysext-level", o.SysextLevel}, {"--version-id", o.VersionID}} {
			if f[1] != "" {
				if err := validateOSField(f[0], f[1]); err != nil {
					return optErr("%v", err)
				}
			}
		}
	}
	seen := map[string]string{}
	for _, f := range o.Files {
		if f.Src == "" {
			return optErr("--file %s: no source file before the ':'", f)
		}
		if err := checkDest(f.Dest); err != nil {
			return optErr("--file %s: %v", f, err)
		}
		if prev, ok := seen[f.Dest]; ok {
			return optErr("--file %s: %s is given twice (also by --file %s)", f, f.Dest, prev)
		}
		seen[f.Dest] = f.String()
	}
	return nil
}

// checkDest checks the destination of a --file: a clean absolute path
// below /usr or /opt, not the release file or an os-release.
func checkDest(d string) error {
	switch {
	case !path.IsAbs(d):
		return fmt.Errorf("destination %q is not absolute: give the path on the host, e.g. /usr/bin/kubelet", d)
	case path.Clean(d) != d:
		return fmt.Errorf("destination %q is not a clean path (no trailing '/', '//', '.' or '..'): write it as %s", d, path.Clean(d))
	case !underUsrOrOpt(d):
		return fmt.Errorf("destination %s is not below /usr or /opt, the only trees systemd-sysext merges", d)
	case strings.HasPrefix(d, "/"+ReleaseDir+"/"+ReleasePrefix):
		return fmt.Errorf("destination %s: roost-image writes the extension-release file itself from --name, --version and --arch", d)
	case d == "/usr/lib/os-release":
		return fmt.Errorf("destination %s: an extension must not replace the OS's os-release", d)
	}
	return nil
}

// Build writes the extension image of o to out (its directory is created
// if missing; an existing file is replaced) and returns what it holds, as
// Inspect reads it back. It stages the files in a temporary directory
// with normalised modes (directories 0755; files 0755 when any execute bit
// is set on the source, else 0644), adds the extension-release file and
// packs the tree with mksquashfs (see mksquashfsFlags), writing through a
// temporary file beside out, so a failed build leaves no partial image.
// The same inputs give the same bytes whatever the files' timestamps,
// owners, modes beyond the execute bit, the umask or the temporary
// directory, given the same mksquashfs.
//
// Errors: Options.Check's (matching ErrOptions); ErrNoMksquashfs; an
// unreadable source; a --from tree with files outside usr/ and opt/,
// special files, an extension-release or os-release file, or a path also
// given by --file.
func Build(o Options, out string) (*Info, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	bin, _, err := findMksquashfs()
	if err != nil {
		return nil, err
	}
	stageDir, err := os.MkdirTemp("", "roost-sysext-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stageDir)
	if err := stage(o, stageDir); err != nil {
		return nil, err
	}
	dir := filepath.Dir(out)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	tmpf, err := os.CreateTemp(dir, "."+filepath.Base(out)+".*.tmp")
	if err != nil {
		return nil, err
	}
	tmp := tmpf.Name()
	tmpf.Close()
	defer os.Remove(tmp) // after the rename: nothing to remove
	if err := runMksquashfs(bin, stageDir, tmp); err != nil {
		return nil, err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return nil, err
	}
	info, err := Inspect(tmp)
	if err != nil {
		return nil, fmt.Errorf("reading back the image mksquashfs wrote: %w", err)
	}
	want := Want{Name: o.Name, Architecture: o.arch()}
	if want.Architecture == "" {
		want.Architecture = ArchAny
	}
	if err := Validate(info, want); err != nil {
		return nil, fmt.Errorf("the image mksquashfs wrote is not a valid extension: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, err
	}
	return info, nil
}
