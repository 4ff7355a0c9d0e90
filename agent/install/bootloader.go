package install

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path"

	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/filesystem/fat32"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// LoaderConf is systemd-boot's loader/loader.conf on a Roost ESP: the newest
// Revision entry is the default, no menu editing.
const LoaderConf = "timeout 3\ndefault roost-rev-*\neditor no\n"

// LoaderConfPath and EntriesDir are where systemd-boot looks on the ESP.
const (
	LoaderConfPath = "/loader/loader.conf"
	EntriesDir     = "/loader/entries"
)

// CheckFirmware returns nil when the server booted with UEFI firmware, and
// otherwise the reason it cannot be installed.
func CheckFirmware(inv *roostv1.Inventory) error {
	switch fw := inv.GetFirmware(); fw {
	case "UEFI":
		return nil
	case "BIOS":
		return fmt.Errorf("install needs UEFI firmware; this server booted with BIOS: enable UEFI in its firmware setup")
	case "":
		return fmt.Errorf("install needs UEFI firmware; this server did not report its firmware")
	default:
		return fmt.Errorf("install needs UEFI firmware; this server reported firmware %q", fw)
	}
}

// RemovableMediaPath is the removable-media boot path of an EFI binary for
// its PE machine type: /EFI/BOOT/BOOTX64.EFI for x86-64, BOOTAA64.EFI for
// arm64.
func RemovableMediaPath(efi []byte) (string, error) {
	if len(efi) < 0x40 || !bytes.Equal(efi[:2], []byte("MZ")) {
		return "", fmt.Errorf("systemd-boot: not an EFI (PE) binary")
	}
	pe := int(binary.LittleEndian.Uint32(efi[0x3c:]))
	if pe < 0 || pe+6 > len(efi) || !bytes.Equal(efi[pe:pe+4], []byte("PE\x00\x00")) {
		return "", fmt.Errorf("systemd-boot: not an EFI (PE) binary: no PE header")
	}
	switch m := binary.LittleEndian.Uint16(efi[pe+4:]); m {
	case 0x8664:
		return "/EFI/BOOT/BOOTX64.EFI", nil
	case 0xaa64:
		return "/EFI/BOOT/BOOTAA64.EFI", nil
	default:
		return "", fmt.Errorf("systemd-boot: unsupported PE machine type %#x", m)
	}
}

// InstallBootLoader writes systemd-boot (the release bundle's
// systemd-bootx64.efi) to the removable-media path of dev's ESP, which
// Prepare made, plus loader/loader.conf and an empty loader/entries. It
// needs no boot variables: the firmware boots the removable-media path.
// Running it again rewrites the same files.
func InstallBootLoader(ctx context.Context, d Disks, dev string, systemdBootEFI []byte) error {
	target, err := RemovableMediaPath(systemdBootEFI)
	if err != nil {
		return err
	}
	dk, err := d.Open(ctx, dev)
	if err != nil {
		return fmt.Errorf("install boot loader on %s: %w", dev, err)
	}
	defer dk.Close()
	st := probe(dk)
	if st.roost == nil {
		return fmt.Errorf("install boot loader on %s: the disk is not prepared by Roost (%s)", dev, st)
	}
	esp := st.roost.Partitions[0]
	fs, err := fat32.Read(dk.Backend, int64(esp.Size), int64(esp.Start)*dk.LogicalBlocksize, dk.LogicalBlocksize)
	if err != nil {
		return fmt.Errorf("install boot loader on %s: read %s: %w", dev, ESPName, err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{target, systemdBootEFI}, {LoaderConfPath, []byte(LoaderConf)}} {
		if err := writeFile(fs, f.name, f.data); err != nil {
			return fmt.Errorf("install boot loader on %s: %w", dev, err)
		}
	}
	if err := fs.Mkdir(EntriesDir); err != nil {
		return fmt.Errorf("install boot loader on %s: mkdir %s: %w", dev, EntriesDir, err)
	}
	if err := tidyESP(dk, esp); err != nil {
		return fmt.Errorf("install boot loader on %s: %w", dev, err)
	}
	return nil
}

// writeFile writes data to name on fs (folders made as needed) and reads it
// back.
func writeFile(fs filesystem.FileSystem, name string, data []byte) error {
	if err := fs.Mkdir(path.Dir(name)); err != nil {
		return fmt.Errorf("mkdir %s: %w", path.Dir(name), err)
	}
	f, err := fs.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_TRUNC)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	r, err := fs.OpenFile(name, os.O_RDONLY)
	if err != nil {
		return fmt.Errorf("read back %s: %w", name, err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("read back %s: %w", name, err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("read back %s: %d bytes differ from the %d written", name, len(got), len(data))
	}
	return nil
}
