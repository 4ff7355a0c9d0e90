package boot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/roostfleet/roost/internal/cpio"
)

// ExtensionsDir is where the kernel unpacks a Revision's system
// extensions: systemd-sysext.service merges the images it finds there
// into /usr and /opt before sysinit.target (systemd-sysext(8)).
const ExtensionsDir = "/etc/extensions"

// Extension is one systemd-sysext image a Revision boots with.
type Extension struct {
	// Name is the extension's name: the image is unpacked as
	// ExtensionsDir/<Name>.raw, the name systemd-sysext requires to match
	// its extension-release.<Name>.
	Name string
	// Path is the local, verified .raw file; SHA256 its digest (64 hex
	// digits), checked again while it is copied.
	Path, SHA256 string
}

// extensionName is what systemd accepts as an image name: it becomes a
// file name.
var extensionName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ExtensionInitrdName is the name of the initrd (a newc cpio archive
// holding ExtensionsDir/<name>.raw) in the extension image's content
// directory /roost/<hash>/.
func ExtensionInitrdName(name string) string { return "sysext-" + name + ".img" }

// isExtensionInitrd reports whether file is an ExtensionInitrdName.
func isExtensionInitrd(file string) bool {
	name, ok := strings.CutPrefix(file, "sysext-")
	if !ok {
		return false
	}
	name, ok = strings.CutSuffix(name, ".img")
	return ok && extensionName.MatchString(name)
}

// initrd is the ESP path of x's initrd.
func (x Extension) initrd() string { return ContentDir(x.SHA256) + "/" + ExtensionInitrdName(x.Name) }

func (x Extension) check() error {
	if !extensionName.MatchString(x.Name) {
		return fmt.Errorf("extension name %q: want letters, digits, '-', '_' or '.', at most 64, starting with a letter or digit", x.Name)
	}
	if b, err := hex.DecodeString(x.SHA256); err != nil || len(b) != sha256.Size {
		return fmt.Errorf("extension %s: sha256 %q: want 64 hex digits", x.Name, x.SHA256)
	}
	if x.Path == "" {
		return fmt.Errorf("extension %s: the image path is required", x.Name)
	}
	return nil
}

// stageExtension writes x's initrd to the ESP unless it is there: a newc
// archive holding the image at ExtensionsDir/<name>.raw (mode 0644),
// which starts at a 4-byte boundary wherever it is loaded because every
// initrd Stage writes before it (the config initrd, other extension
// initrds) is a cpio archive padded to 512 bytes. The image's digest is
// checked before it is written.
func (e ESP) stageExtension(x Extension) error {
	dst := x.initrd()
	if st, err := os.Stat(e.path(dst)); err == nil && st.Mode().IsRegular() && st.Size() > 0 {
		return nil
	}
	data, err := os.ReadFile(x.Path)
	if err != nil {
		return fmt.Errorf("extension %s: %w", x.Name, err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != x.SHA256 {
		return fmt.Errorf("extension %s: %s: sha256 is %x, want %s", x.Name, x.Path, sum, x.SHA256)
	}
	var buf bytes.Buffer
	if err := cpio.Write(&buf, []cpio.File{{Path: ExtensionsDir + "/" + x.Name + ".raw", Mode: 0o644, Data: data}}, 0); err != nil {
		return fmt.Errorf("extension %s: %w", x.Name, err)
	}
	if err := mkdirs(e.path(ContentDir(x.SHA256))); err != nil {
		return err
	}
	if err := writeAtomic(e.path(dst), &buf, 0o600, nil); err != nil {
		return fmt.Errorf("extension %s: %w", x.Name, err)
	}
	return nil
}
