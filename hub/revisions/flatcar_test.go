package revisions

// What a worker Revision renders, checked against what a stock Flatcar
// Container Linux booted from its PXE kernel and initramfs (root on tmpfs,
// /usr the read-only squashfs of the initramfs) expects.
//
// No Flatcar artifact is reachable where these tests run. Every
// expectation is taken from Flatcar's public sources and cited next to it
// as repository and path (docs/flatcar.md has the details and the dates
// of the snapshots read); where a fact could not be confirmed from a
// source, the comment says so instead of asserting it.

import (
	"encoding/json"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/go-systemd/v22/unit"
	"github.com/coreos/ignition/v2/config/v3_3"
	"sigs.k8s.io/yaml"
)

// flatcarBinary says where a program a rendered unit runs comes from on
// Flatcar: the OS image (or one of the system extensions Flatcar ships
// enabled), or one of the Revision's own extensions.
type flatcarBinary struct {
	fromExtension bool   // a Roost extension (roost-image sysext) ships it
	source        string // the evidence
}

// flatcarBinaries are the programs a rendered unit may run. A unit that
// runs anything else fails TestFlatcarUnitBinaries: find where Flatcar
// ships it (or ship it in an extension) and add it here with the source.
var flatcarBinaries = map[string]flatcarBinary{
	// Flatcar's own containerd.service runs ExecStart=/usr/bin/containerd
	// (flatcar/scripts sdk_container/src/third_party/coreos-overlay/coreos/
	// sysext/containerd/usr/lib/systemd/system/containerd.service); the
	// binary is in the containerd-flatcar system extension Flatcar ships
	// enabled since 3794.0.0 (flatcar/flatcar-website content/docs/latest/
	// sys-ext/_index.md; flatcar/scripts build_library/sysext_prod_builder
	// links it into /etc/extensions).
	ContainerdBinary: {source: "Flatcar's containerd-flatcar system extension (enabled by default since 3794.0.0)"},
	// Flatcar has no kubelet: the Revision brings it as an extension
	// (roost-image sysext --file kubelet:/usr/bin/kubelet).
	KubeletBinary: {fromExtension: true, source: "the kubelet extension"},
	// Not in Flatcar either: the agent extension.
	"/usr/bin/roost-agent": {fromExtension: true, source: "the agent extension"},
	// coreutils is in Flatcar's base image (flatcar/scripts
	// sdk_container/src/third_party/coreos-overlay/coreos-base/coreos/
	// coreos-0.0.1.ebuild: sys-apps/coreutils), and Flatcar's own units call
	// it by this path (flatcar/scripts .../coreos-base/oem-ami/files/
	// setup-oem.service: ExecStartPre=/usr/bin/mkdir; flatcar/sysext-bakery
	// kubernetes.sysext/files/usr/lib/systemd/system/kubelet.service.d/
	// 10-kubeadm.conf: ExecStartPre=/usr/bin/mkdir).
	"/usr/bin/mkdir": {source: "coreutils in Flatcar's base image"},
	// roost-snippet-settings.service (only with MachineClass snippets that
	// write modules-load.d, sysctl.d or tmpfiles.d files). NOT CONFIRMED from
	// a Flatcar source: these are systemd's own install paths with a merged
	// /usr, which Flatcar's systemd ebuild is not known here to change.
	"/usr/lib/systemd/systemd-modules-load": {source: "systemd (path not confirmed on Flatcar)"},
	"/usr/lib/systemd/systemd-sysctl":       {source: "systemd (path not confirmed on Flatcar)"},
	"/usr/bin/systemd-tmpfiles":             {source: "systemd (path not confirmed on Flatcar)"},
	// roost-journal.service. systemd's journalctl and systemctl are in
	// Flatcar's base image (coreos-base/coreos-0.0.1.ebuild:
	// sys-apps/systemd), and Flatcar's /usr is merged, so sh (bash) is
	// /usr/bin/sh; NOT CONFIRMED from a Flatcar source here.
	"/usr/bin/journalctl": {source: "systemd in Flatcar's base image (path not confirmed on Flatcar)"},
	"/usr/bin/systemctl":  {source: "systemd in Flatcar's base image (path not confirmed on Flatcar)"},
	"/usr/bin/sh":         {source: "bash in Flatcar's base image, merged /usr (path not confirmed on Flatcar)"},
}

// unitOptions parses a unit file or drop-in with go-systemd's parser.
func unitOptions(t *testing.T, name, text string) []*unit.UnitOption {
	t.Helper()
	opts, err := unit.DeserializeOptions(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%s does not parse as a unit file: %v", name, err)
	}
	return opts
}

// execProgram is the program an Exec*= value runs: the first word after
// systemd's prefixes (systemd.service(5), "Command lines"); "" for an
// empty value, which resets the list.
func execProgram(v string) string {
	f := strings.Fields(v)
	if len(f) == 0 {
		return ""
	}
	return strings.TrimLeft(f[0], "-@:+!")
}

// TestFlatcarIgnitionSpec: the Revision's config is Ignition spec 3.3.0
// and parses cleanly with the Ignition library.
//
// Flatcar reads spec 3.3.0 since 3185.0.0 (flatcar/flatcar-website
// content/docs/latest/fb-provision/ignition/specification.md: "Starting
// from release 3185.0.0, Ignition v3 (specification 3.3.0) is
// supported"); 3.3.0 is stable since Ignition 2.11.0 (coreos/ignition
// docs/release-notes.md), and later Flatcar releases ship newer Ignition
// that still accepts it (flatcar/scripts: ignition-2.14.0 in 3510.2.1,
// 2.24.0 in 4593.2.0, 2.26.0 on main). A higher spec would cut off
// releases whose Ignition predates it (3.4.0 is stable only since Ignition
// 2.15.0, coreos/ignition docs/release-notes.md).
func TestFlatcarIgnitionSpec(t *testing.T) {
	raw := mustRender(t, fullInputs(), 1).GetIgnition()

	cfg, rpt, err := v3_3.Parse(raw)
	if err != nil || rpt.IsFatal() {
		t.Fatalf("not a valid spec 3.3 config: %v: %s", err, rpt)
	}
	if v := cfg.Ignition.Version; v != "3.3.0" {
		t.Errorf("ignition.version %s: Flatcar ≥ 3185.0.0 reads 3.3.0; a newer spec needs a newer Ignition than older Flatcar releases ship", v)
	}

	// The parser is this module's coreos/ignition/v2 at v2.24.0, the
	// Ignition of Flatcar stable 4593 (flatcar/scripts branch flatcar-4593,
	// sdk_container/src/third_party/coreos-overlay/sys-apps/ignition/
	// ignition-2.24.0-r1.ebuild); it must not even warn.
	if len(rpt.Entries) > 0 {
		t.Errorf("Ignition 2.24 warns about the config:\n%s", rpt)
	}
	// Everything is inline, so Flatcar's initramfs applies the config in
	// Ignition's fetch-offline stage, before any network is up
	// (flatcar/bootengine dracut/30ignition/ignition-fetch-offline.service:
	// a config that needs the network makes Ignition create
	// /run/ignition/neednet first).
	for _, f := range cfg.Storage.Files {
		if src := f.Contents.Source; src == nil || !strings.HasPrefix(*src, "data:") {
			t.Errorf("%s: content is not inline (%v)", f.Path, src)
		}
		for _, a := range f.Append {
			if a.Source == nil || !strings.HasPrefix(*a.Source, "data:") {
				t.Errorf("%s: appended content is not inline", f.Path)
			}
		}
	}
}

// TestFlatcarUnitBinaries: every program a rendered unit runs (Exec*= of
// every unit and drop-in) is an absolute path that Flatcar ships or an
// extension of the Revision brings, and what extensions bring is under
// /usr.
func TestFlatcarUnitBinaries(t *testing.T) {
	p := parseIgnition(t, mustRender(t, fullInputs(), 1).GetIgnition())
	seen := map[string]bool{}
	check := func(where, text string) {
		for _, o := range unitOptions(t, where, text) {
			if !strings.HasPrefix(o.Name, "Exec") {
				continue
			}
			prog := execProgram(o.Value)
			if prog == "" {
				continue // "ExecStart=" resets the list
			}
			seen[prog] = true
			if !path.IsAbs(prog) {
				t.Errorf("%s: %s=%s runs %q by name: give the absolute path Flatcar has", where, o.Name, o.Value, prog)
				continue
			}
			b, ok := flatcarBinaries[prog]
			if !ok {
				t.Errorf("%s: %s runs %s, which no Flatcar source here says Flatcar ships; add it to flatcarBinaries with its source, or ship it in an extension", where, o.Name, prog)
				continue
			}
			// Extensions extend /usr (and /opt, but merging /opt makes it
			// read-only, which Flatcar users do not expect: flatcar/
			// sysext-bakery pull request #239, and Flatcar issue #2111 on
			// nested mounts under /opt).
			if b.fromExtension && !strings.HasPrefix(prog, "/usr/") {
				t.Errorf("%s: %s comes from %s but is not under /usr", where, prog, b.source)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.units)) {
		u := p.units[name]
		if u.Contents != nil {
			check(name, *u.Contents)
		}
		for _, d := range u.Dropins {
			if d.Contents != nil {
				check(name+".d/"+d.Name, *d.Contents)
			}
		}
	}
	// The check is not vacuous: a worker runs containerd, the kubelet and
	// the directory helpers.
	for _, prog := range []string{ContainerdBinary, KubeletBinary, "/usr/bin/mkdir"} {
		if !seen[prog] {
			t.Errorf("no rendered unit runs %s; units %v", prog, slices.Sorted(maps.Keys(p.units)))
		}
	}
}

// Flatcar's containerd.service (flatcar/scripts sdk_container/src/
// third_party/coreos-overlay/coreos/sysext/containerd/usr/lib/systemd/
// system/containerd.service, unchanged since 2025-10-24): the two lines
// that choose the configuration file. Its default configuration is
// /usr/share/containerd/config.toml, read-only.
const (
	flatcarContainerdEnv  = "CONTAINERD_CONFIG=/usr/share/containerd/config.toml"
	flatcarContainerdExec = "/usr/bin/containerd --config ${CONTAINERD_CONFIG}"
)

// TestFlatcarContainerdDropin applies the rendered containerd.service
// drop-ins to Flatcar's unit as systemd does (an empty ExecStart= clears
// the list; Environment= assignments accumulate, later ones win;
// systemd.service(5), systemd.exec(5)) and checks that containerd then
// runs once, with the Revision's configuration.
//
// Either override works on Flatcar: replacing ExecStart (what Flatcar
// documents in flatcar/flatcar-website content/docs/latest/orchestrate/
// containers/customizing-docker.md, "Use a custom containerd
// configuration") or setting CONTAINERD_CONFIG (which keeps Flatcar's
// ExecStart line).
func TestFlatcarContainerdDropin(t *testing.T) {
	p := parseIgnition(t, mustRender(t, fullInputs(), 1).GetIgnition())
	u, ok := p.units[ContainerdUnit]
	if !ok {
		t.Fatalf("%s not rendered", ContainerdUnit)
	}
	if u.Contents != nil {
		t.Errorf("%s: the Revision replaces the OS's unit; Flatcar's unit (from its containerd-flatcar extension) should only get drop-ins", ContainerdUnit)
	}
	if u.Mask != nil && *u.Mask {
		t.Fatalf("%s is masked", ContainerdUnit)
	}
	exec := []string{flatcarContainerdExec}
	env := map[string]string{}
	setEnv := func(v string) {
		for _, kv := range strings.Fields(v) {
			k, val, _ := strings.Cut(strings.Trim(kv, `"`), "=")
			env[k] = val
		}
	}
	setEnv(flatcarContainerdEnv)
	names := make([]string, 0, len(u.Dropins))
	dropins := map[string]string{}
	for _, d := range u.Dropins {
		names = append(names, d.Name)
		dropins[d.Name] = *d.Contents
	}
	slices.Sort(names) // systemd applies drop-ins in file name order
	for _, n := range names {
		for _, o := range unitOptions(t, n, dropins[n]) {
			switch {
			case o.Section == "Service" && o.Name == "ExecStart" && strings.TrimSpace(o.Value) == "":
				exec = nil
			case o.Section == "Service" && o.Name == "ExecStart":
				exec = append(exec, o.Value)
			case o.Section == "Service" && o.Name == "Environment":
				setEnv(o.Value)
			}
		}
	}
	if len(exec) != 1 {
		t.Fatalf("containerd.service would have %d ExecStart= lines %q: a Type=notify service takes one", len(exec), exec)
	}
	args := strings.Fields(os.Expand(exec[0], func(k string) string { return env[k] }))
	if args[0] != ContainerdBinary {
		t.Errorf("containerd.service runs %s, want %s", args[0], ContainerdBinary)
	}
	i := slices.Index(args, "--config")
	if i < 0 || i+1 >= len(args) || args[i+1] != ContainerdConfigPath {
		t.Errorf("containerd.service runs %q: want --config %s (Flatcar's default %s is not the Revision's)", args, ContainerdConfigPath, "/usr/share/containerd/config.toml")
	}
	if _, ok := p.files[ContainerdConfigPath]; !ok {
		t.Errorf("%s is not rendered", ContainerdConfigPath)
	}

	// Flatcar's own containerd 2.x reads a version 2 configuration (its
	// default config.toml, flatcar/scripts .../coreos/sysext/containerd/usr/
	// share/containerd/config.toml, says version = 2; containerd 2 migrates
	// sandbox_image and cni.bin_dir from it: containerd/containerd plugins/
	// cri/images/plugin.go and plugins/cri/runtime/plugin.go,
	// configMigration), and uses the systemd cgroup driver with runc
	// (SystemdCgroup = true there).
	conf := p.files[ContainerdConfigPath]
	for _, want := range []string{"version = 2\n", "SystemdCgroup = true\n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("%s lacks %q, which Flatcar's own containerd configuration has:\n%s", ContainerdConfigPath, strings.TrimSpace(want), conf)
		}
	}
}

// TestFlatcarWritablePaths: Ignition writes every file, directory and
// link of the Revision under /etc, /var or /opt, and mounts nothing under
// /usr; nothing goes to Flatcar's OEM directory.
//
//   - /usr is the squashfs from the initramfs, mounted read-only at
//     /sysroot/usr before Ignition's files stage (flatcar/bootengine
//     dracut/10diskless-generator/diskless-generator and, since the
//     minimal initrd, dracut/51diskless-generator/diskless-generator:
//     sysroot-usr.mount, Type=squashfs); systemd-sysext lays the
//     extensions over it and unmounts what is mounted below it (flatcar/
//     bootengine commit 790e781, "Move OEM partition mountpoint from
//     /usr/share/oem to /oem").
//   - /oem (formerly /usr/share/oem) is Flatcar's OEM directory: the OEM
//     partition, or on PXE the initramfs's OEM files (flatcar/bootengine
//     minimal-init); Flatcar keeps its OEM system extensions and
//     oem-release there (dracut/99setup-root/initrd-setup-root-after-
//     ignition) and its Ignition maps the "oem" file system there
//     (flatcar/scripts .../sys-apps/ignition/files/0015-usr-share-oem-oem.patch).
//   - The root is a tmpfs when neither root= nor rootfstype= is given
//     (diskless-generator), so /etc, /var and /opt are writable.
func TestFlatcarWritablePaths(t *testing.T) {
	cfg := parseIgnition(t, mustRender(t, fullInputs(), 1).GetIgnition()).cfg
	var paths []string
	for _, f := range cfg.Storage.Files {
		paths = append(paths, f.Path)
	}
	for _, d := range cfg.Storage.Directories {
		paths = append(paths, d.Path)
	}
	for _, l := range cfg.Storage.Links {
		paths = append(paths, l.Path)
	}
	if len(paths) == 0 {
		t.Fatal("the Revision writes no file")
	}
	under := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	for _, p := range paths {
		switch {
		case under(p, "/oem"), under(p, "/usr/share/oem"):
			t.Errorf("%s is in Flatcar's OEM directory", p)
		case under(p, "/usr"):
			t.Errorf("%s is under /usr, which is read-only on Flatcar", p)
		case !under(p, "/etc") && !under(p, "/var") && !under(p, "/opt"):
			t.Errorf("%s is not under /etc, /var or /opt", p)
		}
	}
	for _, u := range cfg.Systemd.Units {
		if u.Contents == nil || !strings.HasSuffix(u.Name, ".mount") {
			continue
		}
		for _, o := range unitOptions(t, u.Name, *u.Contents) {
			if o.Section == "Mount" && o.Name == "Where" && (under(o.Value, "/usr") || under(o.Value, "/oem")) {
				t.Errorf("%s mounts on %s", u.Name, o.Value)
			}
		}
	}
}

// TestFlatcarCgroupDriver: the kubelet uses the systemd cgroup driver,
// like the Revision's containerd. Flatcar boots with the unified cgroup
// hierarchy (cgroup v2) since 2969.0.0 (flatcar/flatcar-website
// content/docs/latest/orchestrate/containers/switching-to-unified-
// cgroups.md) and its own containerd configuration sets SystemdCgroup =
// true (flatcar/scripts .../coreos/sysext/containerd/usr/share/containerd/
// config.toml); kubelet and runtime must agree.
func TestFlatcarCgroupDriver(t *testing.T) {
	p, kc := renderKubelet(t, fullInputs())
	if kc.CgroupDriver != "systemd" {
		t.Errorf("kubelet cgroupDriver %q, want systemd", kc.CgroupDriver)
	}
	if !strings.Contains(p.files[ContainerdConfigPath], "SystemdCgroup = true") {
		t.Errorf("containerd's runc does not use the systemd cgroup driver:\n%s", p.files[ContainerdConfigPath])
	}
}

// TestFlatcarCNI: containerd looks for CNI plugins in /opt/cni/bin, a
// writable place on Flatcar, and the fallback network's bridge is one
// Flatcar's systemd-networkd leaves alone.
//
// Flatcar's image ships no CNI plugins (none in flatcar/scripts; the
// base package list, coreos-base/coreos/coreos-0.0.1.ebuild, names none);
// its community kubernetes extension copies them into /opt/cni/bin when
// the kubelet starts, because that is where containerd looks (flatcar/
// sysext-bakery kubernetes.sysext/files/usr/lib/systemd/system/
// kubelet.service.d/10-kubeadm.conf; sysext-bakery pull request #23).
// Cluster network add-ons install their plugins there from DaemonSets, so
// it must stay writable: not under /usr, and not shipped in an extension
// (merging /opt makes it read-only; sysext-bakery pull request #239). So
// on Flatcar the plugins the fallback network needs (bridge, host-local)
// are NOT provided by anything Roost renders: see docs/flatcar.md, "CNI
// plugins".
//
// flatcar/init systemd/network/cni.network marks links named cni* as
// Unmanaged=yes for systemd-networkd.
func TestFlatcarCNI(t *testing.T) {
	p := parseIgnition(t, mustRender(t, fullInputs(), 1).GetIgnition())
	conf := p.files[ContainerdConfigPath]
	if !strings.Contains(conf, `bin_dir = "/opt/cni/bin"`) {
		t.Errorf("containerd's CNI bin_dir is not /opt/cni/bin:\n%s", conf)
	}
	var list struct {
		Plugins []struct {
			Type   string `json:"type"`
			Bridge string `json:"bridge"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(p.files[CNIConfigPath]), &list); err != nil {
		t.Fatalf("%s: %v", CNIConfigPath, err)
	}
	for _, pl := range list.Plugins {
		if pl.Type == "bridge" && !strings.HasPrefix(pl.Bridge, "cni") {
			t.Errorf("bridge %q: Flatcar's networkd would manage it (only cni* links are Unmanaged)", pl.Bridge)
		}
	}
}

// flatcarArg is the value bootengine's cmdline_arg gives a kernel
// argument: the value of its last occurrence, def when absent (flatcar/
// bootengine dracut/53ignition/ignition-generator).
func flatcarArg(args []string, name, def string) string {
	v := def
	for _, a := range args {
		if k, val, _ := strings.Cut(a, "="); k == name {
			v = val
		}
	}
	return v
}

// TestFlatcarReleaseCmdline renders a worker with the kernel arguments of
// images/flatcar-stable.yaml and checks the boot Flatcar's initramfs then
// makes (flatcar/bootengine, dracut/53ignition/ignition-generator,
// ignition-setup.sh, ignition-setup-pre.sh, dracut/51diskless-generator/
// diskless-generator, minimal-init; older releases the same under
// dracut/30ignition and dracut/10diskless-generator):
//
//   - flatcar.first_boot (or coreos.first_boot) set to anything but "",
//     0, no or off makes Ignition run (ignition-complete.target). The
//     root is a fresh tmpfs at every boot, so every boot is a first boot.
//     ignition.firstboot, the Fedora CoreOS argument, is not read.
//   - no root= and no rootfstype other than tmpfs: the root is a tmpfs.
//   - no mount.usr= or usr=: /usr is the initramfs's usr.squashfs, which
//     is what makes ignition-setup copy the initramfs's OEM config.ign to
//     /usr/lib/ignition/user.ign ("pxe") instead of mounting a disk
//     labelled OEM ("normal").
//   - no ignition.config.url (nor flatcar.config.url or coreos.config.url,
//     which Flatcar's Ignition also reads: flatcar/scripts .../sys-apps/
//     ignition/files/0006-internal-prv-cmdline-backport-flatcar-patch.patch):
//     Ignition's command line provider is consulted before user.ign
//     (coreos/ignition internal/exec/engine.go, fetchProviderConfig), so it
//     would replace the Revision's config.
//   - the platform comes from flatcar.oem.id (default metal, qemu in a
//     KVM/QEMU guest; ignition-setup-pre.sh), not from
//     ignition.platform.id, which Flatcar's initramfs does not read.
func TestFlatcarReleaseCmdline(t *testing.T) {
	data, err := os.ReadFile("../../images/flatcar-stable.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var def struct {
		Cmdline []string `json:"cmdline"`
	}
	if err := yaml.Unmarshal(data, &def); err != nil {
		t.Fatal(err)
	}
	in := fullInputs()
	in.Release = testRelease("4593.2.0", def.Cmdline, "stable")
	args := mustRender(t, in, 1).GetKernelArgs()

	switch v := flatcarArg(args, "flatcar.first_boot", flatcarArg(args, "coreos.first_boot", "")); v {
	case "", "0", "no", "off":
		t.Errorf("flatcar.first_boot is %q in %q: Flatcar's initramfs would not run Ignition", v, args)
	}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		switch {
		case k == "root", k == "mount.usr", k == "usr":
			t.Errorf("%s: Flatcar would not boot from RAM with the initramfs's /usr (PXE mode)", a)
		case k == "rootfstype" && v != "tmpfs":
			t.Errorf("%s: the Revision expects a tmpfs root", a)
		case k == "ignition.config.url" || k == "flatcar.config.url" || k == "coreos.config.url":
			t.Errorf("%s would take precedence over the Revision's config", a)
		case k == "ignition.platform.id":
			t.Errorf("%s: Flatcar's initramfs reads flatcar.oem.id, not ignition.platform.id", a)
		case k == "flatcar.oem.id" && v != "metal":
			t.Errorf("%s: Roost's Machines are bare metal (platform metal)", a)
		}
	}
}
