package sysext

import (
	"fmt"
	"io"
)

// Write prints info for people: the extension's name, version, what its
// extension-release file says, the image's size and sha256, and its
// files, one a line. file names the image.
func (i *Info) Write(w io.Writer, file string) error {
	fmt.Fprintf(w, "Extension:    %s (systemd-sysext squashfs, %.1f MiB, %d bytes)\n", file, float64(i.Size)/(1<<20), i.Size)
	fmt.Fprintf(w, "sha256:       %s\n", i.SHA256)
	if i.Name == "" {
		fmt.Fprintf(w, "Name:         (unknown: %d extension-release files)\n", len(i.ReleaseFiles))
	} else {
		fmt.Fprintf(w, "Name:         %s\n", i.Name)
		fmt.Fprintf(w, "Version:      %s\n", or(i.Version, "(none)"))
		os := or(i.ID, "(none)")
		if i.ID == AnyOS {
			os += " (any OS)"
		}
		if i.SysextLevel != "" {
			os += ", SYSEXT_LEVEL " + i.SysextLevel
		}
		if i.VersionID != "" {
			os += ", VERSION_ID " + i.VersionID
		}
		fmt.Fprintf(w, "OS:           %s\n", os)
		fmt.Fprintf(w, "Architecture: %s\n", or(i.Architecture, "(any)"))
	}
	fmt.Fprintf(w, "Files:\n")
	for _, p := range i.Paths {
		if _, err := fmt.Fprintf(w, "  %s\n", p); err != nil {
			return err
		}
	}
	return nil
}
