package ignition

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_3/types"
)

// SettingsUnit applies, on the boot that wrote them, the kernel module
// lists, sysctl settings and tmpfiles.d entries of a snippet. Flatcar runs
// Ignition in its initramfs, before systemd-modules-load, systemd-sysctl
// and systemd-tmpfiles-setup read those directories; Roost's testbed OS
// runs Ignition once the root file system is up (roost-ignition.service,
// ordered after systemd-tmpfiles-setup and unordered with the other two),
// so without this unit the files would be written but not applied until
// a reboot, which re-applies the Revision from RAM and so never comes.
// On Flatcar it applies the same settings again, which changes nothing.
const SettingsUnit = "roost-snippet-settings.service"

// The directories SettingsUnit covers, and the programs it runs for them
// (their paths on Flatcar and on Debian with merged /usr).
const (
	modulesLoadDir = "/etc/modules-load.d"
	sysctlDir      = "/etc/sysctl.d"
	tmpfilesDir    = "/etc/tmpfiles.d"

	modulesLoadBinary = "/usr/lib/systemd/systemd-modules-load"
	sysctlBinary      = "/usr/lib/systemd/systemd-sysctl"
	tmpfilesBinary    = "/usr/bin/systemd-tmpfiles"
)

// settingsUnit is SettingsUnit for the entries snippets (merged) write
// under /etc/modules-load.d, /etc/sysctl.d and /etc/tmpfiles.d; false when
// they write none there. It loads all listed modules first (a sysctl of a
// module, e.g. net.bridge.*, needs it loaded), then applies every sysctl
// file (all of them, so their order of precedence holds), then creates
// what the snippets' tmpfiles.d files say (only theirs, and without
// --boot, so the OS's boot-only entries such as /run/nologin are left
// alone).
func settingsUnit(snippets types.Config) (types.Unit, bool) {
	var modules, sysctl bool
	var tmpfiles []string
	see := func(p string) {
		if !settingsName.MatchString(path.Base(p)) {
			return // checkSettingsFiles refuses it
		}
		switch dir := path.Dir(path.Clean(p)); dir {
		case modulesLoadDir:
			modules = true
		case sysctlDir:
			sysctl = true
		case tmpfilesDir:
			tmpfiles = append(tmpfiles, path.Clean(p))
		}
	}
	for _, f := range snippets.Storage.Files {
		see(f.Path)
	}
	for _, l := range snippets.Storage.Links {
		see(l.Path)
	}
	if !modules && !sysctl && len(tmpfiles) == 0 {
		return types.Unit{}, false
	}
	sort.Strings(tmpfiles)
	var b strings.Builder
	b.WriteString(`# Roost: apply the kernel modules, sysctl settings and tmpfiles.d entries of the
# user config on this boot: the OS may have read those directories before
# Ignition wrote them.
[Unit]
Description=Apply the user config's modules, sysctl settings and tmpfiles
DefaultDependencies=no
After=systemd-modules-load.service systemd-sysctl.service systemd-tmpfiles-setup.service
Before=sysinit.target shutdown.target
Conflicts=shutdown.target

[Service]
Type=oneshot
RemainAfterExit=yes
`)
	if modules {
		b.WriteString("ExecStart=" + modulesLoadBinary + "\n")
	}
	if sysctl {
		b.WriteString("ExecStart=" + sysctlBinary + "\n")
	}
	if len(tmpfiles) > 0 {
		b.WriteString("ExecStart=" + tmpfilesBinary + " --create " + strings.Join(tmpfiles, " ") + "\n")
	}
	b.WriteString(`
[Install]
WantedBy=sysinit.target
`)
	return types.Unit{Name: SettingsUnit, Enabled: ptr(true), Contents: ptr(b.String())}, true
}

// settingsName is a name systemd reads in the directories SettingsUnit
// covers (*.conf), in characters a unit's command line needs no quoting
// for.
var settingsName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@+-]*\.conf$`)

// checkSettingsFiles refuses a file or link under /etc/modules-load.d,
// /etc/sysctl.d or /etc/tmpfiles.d that systemd would not read (not named
// *.conf) or that SettingsUnit could not name.
func checkSettingsFiles(cfg types.Config) []Problem {
	var probs []Problem
	check := func(at fieldPath, p string) {
		switch path.Dir(path.Clean(p)) {
		case modulesLoadDir, sysctlDir, tmpfilesDir:
		default:
			return
		}
		if base := path.Base(p); !settingsName.MatchString(base) {
			probs = append(probs, Problem{at: at.with("path"),
				Message: fmt.Sprintf("%q: systemd reads files named NAME.conf there, NAME of letters, digits and . _ @ + -", p),
				Hint:    "rename it, e.g. " + path.Join(path.Dir(p), "90-local.conf")})
		}
	}
	for i, f := range cfg.Storage.Files {
		check(fieldPath{"storage", "files", i}, f.Path)
	}
	for i, l := range cfg.Storage.Links {
		check(fieldPath{"storage", "links", i}, l.Path)
	}
	return probs
}
