package boot

// The initrds Stage writes after the image initrd, checked against what a
// stock Flatcar Container Linux PXE initramfs reads from them. No Flatcar
// artifact is reachable where these tests run: the expectations come from
// Flatcar's public sources, cited next to them (docs/flatcar.md has the
// details); what could not be confirmed is said so.

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// newcEntry is one entry of a newc cpio archive.
type newcEntry struct {
	name string // without a leading slash
	mode uint32 // file type and permission bits
	data []byte
}

// newcEntries lists every entry (directories too) of the newc archives in
// data, which may start with zero padding, up to the TRAILER!!! entry.
func newcEntries(t *testing.T, data []byte) []newcEntry {
	t.Helper()
	data = bytes.TrimLeft(data, "\x00")
	var out []newcEntry
	off := 0
	align := func(n int) int { return (n + 3) &^ 3 }
	for {
		if off+110 > len(data) || string(data[off:off+6]) != "070701" {
			t.Fatalf("no newc header at %d", off)
		}
		field := func(i int) int {
			v, err := strconv.ParseUint(string(data[off+6+8*i:off+14+8*i]), 16, 32)
			if err != nil {
				t.Fatalf("bad header field %d at %d", i, off)
			}
			return int(v)
		}
		mode, size, nameSize := field(1), field(6), field(11)
		name := strings.TrimRight(string(data[off+110:off+110+nameSize]), "\x00")
		off = align(off + 110 + nameSize)
		if name == "TRAILER!!!" {
			return out
		}
		out = append(out, newcEntry{name: name, mode: uint32(mode), data: data[off : off+size]})
		off = align(off + size)
	}
}

// flatcarEra is a range of Flatcar releases that reads the Ignition config
// an extra initrd carries in one way. read returns the config the
// initramfs hands to Ignition (/usr/lib/ignition/user.ign) given what the
// extra initrds unpack, or false.
//
// The stock PXE initramfs is assumed to hold neither /oem nor
// /usr/share/oem itself: flatcar_production_pxe_image.cpio.gz holds only
// etc/ and usr.squashfs (flatcar/scripts build_library/vm_image_util.sh,
// _write_cpio_common). NOT CONFIRMED: what the initramfs built into
// Flatcar's kernel holds (sys-kernel/coreos-kernel builds it from
// bootengine); if it held /oem, the legacy path below would never be
// read on 4487.0.0 and later.
type flatcarEra struct {
	releases string
	read     func(files map[string]newcEntry) ([]byte, bool)
}

func regular(files map[string]newcEntry, name string) ([]byte, bool) {
	e, ok := files[name]
	if !ok || e.mode&0o170000 != 0o100000 {
		return nil, false
	}
	return e.data, true
}

var (
	// flatcar/bootengine dracut/30ignition/ignition-setup.sh (later
	// dracut/53ignition/ignition-setup.sh), case "pxe": src=/usr/share/oem,
	// then cp ${src}/config.ign /usr/lib/ignition/user.ign. Per the
	// bootengine commit each flatcar/scripts release tag pins
	// (sys-kernel/bootengine/bootengine-9999.ebuild): every release up to
	// 3602.2.x and 3619.0.0, and again from stable 3815.2.1 and beta
	// 3874.1.0 (bootengine commit c98b75a, "Keep looking at old place for
	// PXE OEM initrd contents") until the minimal initrd. This is also
	// Flatcar's documented recipe (flatcar/flatcar-website
	// content/docs/latest/deploy/bare-metal/booting-with-pxe.md, "Adding a
	// Custom OEM").
	eraUsrShareOEM = flatcarEra{
		releases: "≤ 3619.0.0, and 3815.2.1 / 3874.1.0 to 4459.x (dracut initramfs)",
		read: func(files map[string]newcEntry) ([]byte, bool) {
			return regular(files, "usr/share/oem/config.ign")
		},
	}
	// The same script with src=/oem (bootengine commit 790e781, "Move OEM
	// partition mountpoint from /usr/share/oem to /oem"), pinned by
	// 3637.0.0 to 3874.0.0: stable 3760.2.0 and 3815.2.0, betas up to
	// 3850.1.0.
	eraOEMOnly = flatcarEra{
		releases: "3637.0.0 to 3874.0.0 (stable 3760.2.0, 3815.2.0)",
		read: func(files map[string]newcEntry) ([]byte, bool) {
			return regular(files, "oem/config.ign")
		},
	}
	// flatcar/bootengine minimal-init (the initramfs built into the kernel
	// since alpha 4487.0.0 and stable 4593.2.0, per the flatcar/scripts tags
	// whose bootengine ebuild installs it): `mv /oem /realinit || mv
	// /usr/share/oem /realinit` (older revisions: cp -a of either), so the
	// initramfs's /oem wins when it exists at all; the real initramfs then
	// reads /oem/config.ign (dracut/53ignition/ignition-setup.sh, "pxe").
	eraMinimalInit = flatcarEra{
		releases: "≥ 4487.0.0 (minimal initrd)",
		read: func(files map[string]newcEntry) ([]byte, bool) {
			for name := range files {
				if name == "oem" || strings.HasPrefix(name, "oem/") {
					return regular(files, "oem/config.ign")
				}
			}
			return regular(files, "usr/share/oem/config.ign")
		},
	}
)

// stagedExtraInitrds stages a Revision with an extension and returns what
// the initrds its entry loads after the image initrd unpack, by path.
func stagedExtraInitrds(t *testing.T) (StageSpec, map[string]newcEntry) {
	t.Helper()
	e := newESP(t)
	s := spec(t, 4, "flatcar_production_pxe.vmlinuz", "flatcar_production_pxe_image.cpio.gz")
	s.Ignition = []byte(`{"ignition":{"version":"3.3.0"}}`)
	kp, ks := artifact(t, "kubelet.raw", "hsqs kubelet")
	s.Extensions = []Extension{{Name: "kubelet", Path: kp, SHA256: ks}}
	if err := e.Stage(s); err != nil {
		t.Fatal(err)
	}
	var initrds []string
	for _, line := range strings.Split(read(t, e, "/loader/entries/roost-rev-4+3.conf"), "\n") {
		if p, ok := strings.CutPrefix(line, "initrd "); ok {
			initrds = append(initrds, p)
		}
	}
	if len(initrds) != 3 {
		t.Fatalf("entry loads initrds %q, want the image's, the config and the extension", initrds)
	}
	files := map[string]newcEntry{}
	for _, p := range initrds[1:] {
		for _, en := range newcEntries(t, []byte(read(t, e, p))) {
			if old, ok := files[en.name]; ok && old.mode&0o170000 != 0o040000 {
				t.Errorf("%s is in two initrds", en.name)
			}
			files[en.name] = en
		}
	}
	return s, files
}

// TestFlatcarConfigPath: ConfigPath is the path docs/flatcar.md says
// Flatcar's PXE initramfs reads, and the initrds a Revision boots with put
// the Revision's config where the supported Flatcar releases find it.
func TestFlatcarConfigPath(t *testing.T) {
	if ConfigPath != "/usr/share/oem/config.ign" {
		t.Fatalf("ConfigPath %s: docs/flatcar.md and images/flatcar-stable.yaml say /usr/share/oem/config.ign; update them with it", ConfigPath)
	}
	s, files := stagedExtraInitrds(t)

	// The kernel's unpacker creates no missing parent directory: it opens
	// the file's path with O_CREAT and skips the entry when that fails
	// (Linux init/initramfs.c, do_name). Flatcar's recipe archives them
	// too (find usr | cpio -o -H newc).
	for _, dir := range []string{"usr", "usr/share", "usr/share/oem"} {
		if e, ok := files[dir]; !ok || e.mode&0o170000 != 0o040000 {
			t.Errorf("the config initrd has no directory entry %s before %s", dir, ConfigPath)
		}
	}

	for _, era := range []flatcarEra{eraUsrShareOEM, eraMinimalInit} {
		got, ok := era.read(files)
		if !ok || !bytes.Equal(got, s.Ignition) {
			t.Errorf("Flatcar %s would not find the Revision's config (found %v)", era.releases, ok)
		}
	}
	// Not supported, said so in docs/flatcar.md: writing the config at
	// both oem/ and usr/share/oem/ would cover these releases too.
	if _, ok := eraOEMOnly.read(files); !ok {
		t.Logf("Flatcar %s reads only /oem/config.ign: not supported (docs/flatcar.md)", eraOEMOnly.releases)
	}
}

// TestFlatcarExtensionInitrds checks where a Revision's extensions land
// against what survives Flatcar's switch from its initramfs to the real
// root. Of what extra initrds unpack, only the OEM directory does: the
// minimal initrd moves /oem (or /usr/share/oem) into the next root and
// switch_root discards the rest (flatcar/bootengine minimal-init); the
// real root is a fresh tmpfs (dracut/51diskless-generator/
// diskless-generator) onto which /oem is bind-mounted (sysroot-oem.mount),
// and the dracut initramfs of older releases copied only the OEM directory
// (dracut/99setup-root/initrd-setup-root). An image the kernel unpacks at
// /etc/extensions/NAME.raw therefore stays in the initramfs, and
// systemd-sysext on the real root (which looks in /etc/extensions,
// /run/extensions, /var/lib/extensions, /usr/local/lib/extensions and
// /usr/lib/extensions: flatcar/init systemd/system/ensure-sysext.service)
// never sees it. NOT CONFIRMED on a Flatcar machine.
//
// This is a known gap (docs/flatcar.md, "System extensions"): the test is
// skipped while extensions are staged outside the OEM directory, and
// checks, once they are not, that they leave the config readable.
func TestFlatcarExtensionInitrds(t *testing.T) {
	s, files := stagedExtraInitrds(t)
	var lost []string
	for name, e := range files {
		if e.mode&0o170000 != 0o100000 || name == strings.TrimPrefix(ConfigPath, "/") {
			continue
		}
		if !strings.HasPrefix(name, "oem/") && !strings.HasPrefix(name, "usr/share/oem/") {
			lost = append(lost, "/"+name)
		}
	}
	if len(lost) > 0 {
		t.Skipf("known gap on Flatcar: %v would stay in the initramfs (see docs/flatcar.md, System extensions)", lost)
	}
	// Staged in the OEM directory: the config must still be found (on the
	// minimal initrd, an oem/ entry hides usr/share/oem/).
	for _, era := range []flatcarEra{eraUsrShareOEM, eraMinimalInit} {
		if got, ok := era.read(files); !ok || !bytes.Equal(got, s.Ignition) {
			t.Errorf("with the extensions in the OEM directory, Flatcar %s would not find the config", era.releases)
		}
	}
}
