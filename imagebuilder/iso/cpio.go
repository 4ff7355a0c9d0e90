package iso

import (
	"io"

	"github.com/roostfleet/roost/imagebuilder/enrollconfig"
	"github.com/roostfleet/roost/internal/cpio"
)

// ConfigPath is where the Ignition config sits inside the extra initrd
// (enrollconfig.ConfigPath).
const ConfigPath = enrollconfig.ConfigPath

// CPIOFile is one regular file of a newc cpio archive (package cpio).
type CPIOFile = cpio.File

// WriteCPIO writes an uncompressed newc archive of files; see cpio.Write.
func WriteCPIO(w io.Writer, files []CPIOFile, mtime int64) error {
	return cpio.Write(w, files, mtime)
}

// ReadCPIO returns the regular files of a newc archive by path (without a
// leading slash); see cpio.Read.
func ReadCPIO(data []byte) (map[string][]byte, error) { return cpio.Read(data) }
