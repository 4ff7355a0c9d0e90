package iso

import (
	"fmt"
	"os"
)

// BootLoaders are the boot loader binaries an image needs.
type BootLoaders struct {
	// Isolinux is isolinux.bin (Debian package isolinux); BIOS El Torito.
	Isolinux string
	// Ldlinux is ldlinux.c32 (Debian package syslinux-common).
	Ldlinux string
	// IsohybridMBR is isohdpfx.bin (Debian package isolinux), the MBR boot
	// code that starts isolinux.bin when the ISO is written to a disk or
	// USB stick.
	IsohybridMBR string
	// GrubEFI is a standalone GRUB EFI image (Debian package
	// grub-efi-amd64-bin: its monolithic CD image) used as
	// EFI/BOOT/BOOTX64.EFI.
	GrubEFI string
}

type candidate struct {
	paths []string
	pkg   string
	flag  string
}

var (
	isolinuxPaths = candidate{[]string{"/usr/lib/ISOLINUX/isolinux.bin", "/usr/lib/syslinux/isolinux.bin", "/usr/share/syslinux/isolinux.bin"}, "isolinux", "--isolinux"}
	hybridPaths   = candidate{[]string{"/usr/lib/ISOLINUX/isohdpfx.bin", "/usr/lib/syslinux/isohdpfx.bin", "/usr/share/syslinux/isohdpfx.bin", "/usr/lib/syslinux/mbr/isohdpfx.bin"}, "isolinux", "--isohybrid-mbr"}
	ldlinuxPaths  = candidate{[]string{"/usr/lib/syslinux/modules/bios/ldlinux.c32", "/usr/share/syslinux/ldlinux.c32", "/usr/lib/syslinux/ldlinux.c32"}, "syslinux-common", "--ldlinux"}
	grubPaths     = candidate{[]string{"/usr/lib/grub/x86_64-efi/monolithic/gcdx64.efi"}, "grub-efi-amd64-bin", "--grub-efi"}
)

func find(name, given string, c candidate) (string, error) {
	if given != "" {
		if _, err := os.Stat(given); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		return given, nil
	}
	for _, p := range c.paths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found (looked in %v): install the Debian package %s (apt-get install %s) or name the file with %s", name, c.paths, c.pkg, c.pkg, c.flag)
}

// FindBootLoaders fills the empty fields of given from Debian's install
// paths. A missing binary is an error naming the package that ships it.
// needBIOS is false for raw (UEFI-only) disk images.
func FindBootLoaders(given BootLoaders, needBIOS bool) (BootLoaders, error) {
	var out BootLoaders
	var err error
	if needBIOS {
		if out.Isolinux, err = find("isolinux.bin", given.Isolinux, isolinuxPaths); err != nil {
			return out, err
		}
		if out.Ldlinux, err = find("ldlinux.c32", given.Ldlinux, ldlinuxPaths); err != nil {
			return out, err
		}
		if out.IsohybridMBR, err = find("isohdpfx.bin", given.IsohybridMBR, hybridPaths); err != nil {
			return out, err
		}
	}
	if out.GrubEFI, err = find("GRUB EFI image", given.GrubEFI, grubPaths); err != nil {
		return out, err
	}
	return out, nil
}
