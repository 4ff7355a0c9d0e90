package netboot

import (
	"fmt"
	"strings"
)

// Script is an iPXE script that boots a kernel with the release initrd and
// the config initrd.
type Script struct {
	// Title names what boots, for the console (one line).
	Title string
	// Kernel, Initrd and Config are the URLs of the three pieces.
	Kernel, Initrd, Config string
	// Args is the kernel command line.
	Args string
}

// Initrd names in the script: iPXE under UEFI hands initrds to the
// kernel's EFI stub as files of these names, which the kernel loads in
// the order of its initrd= arguments (the release initrd first, then the
// config initrd, as on the ISO); under a BIOS iPXE concatenates them in
// the order loaded, and the kernel ignores the arguments.
const (
	initrdName = "initrd"
	configName = "config.img"
)

// String is the script: "#!ipxe", a comment, kernel, the two initrds,
// boot. The URLs and arguments go in verbatim: they must hold no space
// and none of iPXE's "${" expansions (the hub's URLs are paths of
// letters, digits, "-", "_", "." and "/").
func (s Script) String() string {
	var b strings.Builder
	b.WriteString("#!ipxe\n")
	fmt.Fprintf(&b, "echo Roost network enrollment: %s\n", strings.NewReplacer("\n", " ", "$", "").Replace(s.Title))
	args := strings.TrimSpace(fmt.Sprintf("initrd=%s initrd=%s %s", initrdName, configName, s.Args))
	fmt.Fprintf(&b, "kernel %s %s\n", s.Kernel, args)
	fmt.Fprintf(&b, "initrd --name %s %s\n", initrdName, s.Initrd)
	fmt.Fprintf(&b, "initrd --name %s %s\n", configName, s.Config)
	b.WriteString("boot\n")
	return b.String()
}
