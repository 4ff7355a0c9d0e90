package sysext

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/squashfs"
)

// Errors of Inspect; test with errors.Is.
var (
	// ErrNotSquashfs: the file is not a squashfs image, or one that
	// cannot be read (truncated, corrupt, an unknown compressor).
	ErrNotSquashfs = errors.New("not a squashfs image")
	// ErrBadRelease: the extension-release file cannot be parsed.
	ErrBadRelease = errors.New("unreadable extension-release file")
)

// Bounds of what Inspect reads, so that a corrupt or hostile image (a
// directory that contains itself) ends in an error: an extension-release
// file is a few hundred bytes, a real tree far shallower and smaller.
const (
	maxReleaseSize = 64 << 10
	maxDepth       = 64
	maxEntries     = 1 << 20
)

// Info describes an extension image, as Inspect reads it.
type Info struct {
	// Name is the NAME of the image's one extension-release file
	// (usr/lib/extension-release.d/extension-release.NAME); empty when
	// the image has none or more than one (see ReleaseFiles).
	Name string
	// Version is its SYSEXT_VERSION_ID.
	Version string
	// ID, SysextLevel, VersionID and Architecture are the fields of the
	// same name (ID, SYSEXT_LEVEL, VERSION_ID, ARCHITECTURE).
	ID, SysextLevel, VersionID, Architecture string
	// SysextID is SYSEXT_ID, which must equal Name when set.
	SysextID string
	// Paths are the image's regular files and symbolic links as absolute
	// paths on the merged host ("/usr/bin/kubelet"), sorted; directories
	// and special files are not listed.
	Paths []string
	// ReleaseFiles are the absolute paths of every extension-release.*
	// regular file in usr/lib/extension-release.d, sorted: exactly one
	// is valid.
	ReleaseFiles []string
	// Size is the image file's size in bytes and SHA256 its lower-case
	// hex sha256.
	Size   int64
	SHA256 string
}

// Release returns the extension-release fields of i.
func (i *Info) Release() Release {
	return Release{ID: i.ID, SysextLevel: i.SysextLevel, VersionID: i.VersionID, Architecture: i.Architecture,
		SysextID: i.SysextID, SysextVersionID: i.Version}
}

// IsImage says whether the file at p starts like a squashfs 4 image
// (magic "hsqs"). It does not check the rest; Inspect does.
func IsImage(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	return err == nil && string(magic[:]) == "hsqs"
}

// Inspect reads the extension image at p without mounting it (no root
// needed) and returns what it holds: the extension-release fields, the
// files and symbolic links, its size and sha256. It does not judge the
// image: Validate does. Errors: the file cannot be read, or wraps
// ErrNotSquashfs (with what the file looks like instead) or ErrBadRelease
// (naming the line).
//
// go-diskfs reads what mksquashfs writes (gzip, xz, lz4, zstd and lzma
// images). Its parser panics on some corrupt images (slice bounds): the
// panic is returned as an ErrNotSquashfs error, as are trees deeper than
// 64 directories or with more than 2^20 entries.
func Inspect(p string) (info *Info, err error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("extension image: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("extension image: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("extension image %s: not a regular file", p)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("extension image %s: %w", p, err)
	}
	info = &Info{Size: st.Size(), SHA256: hex.EncodeToString(h.Sum(nil))}
	if err := checkSuperblock(f, st.Size()); err != nil {
		return nil, fmt.Errorf("extension image %s: %w", p, err)
	}
	defer func() {
		if r := recover(); r != nil {
			info, err = nil, fmt.Errorf("extension image %s: %w: corrupt (%v)", p, ErrNotSquashfs, r)
		}
	}()
	sq, err := squashfs.Read(file.New(f, true), st.Size(), 0, 0)
	if err != nil {
		return nil, fmt.Errorf("extension image %s: %w: %v", p, ErrNotSquashfs, err)
	}
	var releases []string
	entries := 0
	err = iofs.WalkDir(sq, ".", func(q string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if entries++; entries > maxEntries {
			return fmt.Errorf("more than %d entries", maxEntries)
		}
		if strings.Count(q, "/") >= maxDepth {
			return fmt.Errorf("/%s is more than %d directories deep", q, maxDepth)
		}
		switch {
		case d.IsDir():
			return nil
		case d.Type().IsRegular():
			if path.Dir(q) == ReleaseDir && strings.HasPrefix(path.Base(q), ReleasePrefix) {
				releases = append(releases, q)
			}
		case d.Type()&iofs.ModeSymlink != 0:
		default:
			return nil // devices, FIFOs, sockets
		}
		info.Paths = append(info.Paths, "/"+q)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("extension image %s: %w: %v", p, ErrNotSquashfs, err)
	}
	sort.Strings(info.Paths)
	sort.Strings(releases)
	for _, r := range releases {
		info.ReleaseFiles = append(info.ReleaseFiles, "/"+r)
	}
	if len(releases) != 1 {
		return info, nil
	}
	info.Name = strings.TrimPrefix(path.Base(releases[0]), ReleasePrefix)
	data, err := readFile(sq, releases[0])
	if err != nil {
		return nil, fmt.Errorf("extension image %s: %w: %v", p, ErrNotSquashfs, err)
	}
	rel, err := ParseRelease(data)
	if err != nil {
		return nil, fmt.Errorf("extension image %s: %w /%s: %v", p, ErrBadRelease, releases[0], err)
	}
	info.ID, info.SysextLevel, info.VersionID, info.Architecture = rel.ID, rel.SysextLevel, rel.VersionID, rel.Architecture
	info.SysextID, info.Version = rel.SysextID, rel.SysextVersionID
	return info, nil
}

// readFile reads at most maxReleaseSize bytes of file q of sq.
func readFile(sq *squashfs.FileSystem, q string) ([]byte, error) {
	fl, err := sq.OpenFile(q, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer fl.Close()
	data, err := io.ReadAll(io.LimitReader(fl, maxReleaseSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxReleaseSize {
		return nil, fmt.Errorf("/%s is larger than %d bytes", q, maxReleaseSize)
	}
	return data, nil
}

// checkSuperblock checks the squashfs superblock of the image f (size
// bytes): magic, major version 4 and a filesystem that fits in the file.
// Errors wrap ErrNotSquashfs and say what the file is instead when it is
// an erofs image.
func checkSuperblock(f io.ReaderAt, size int64) error {
	var sb [96]byte
	if _, err := f.ReadAt(sb[:], 0); err != nil {
		return fmt.Errorf("%w: the file is %d bytes long, shorter than a squashfs superblock (96 bytes)", ErrNotSquashfs, size)
	}
	if string(sb[:4]) != "hsqs" {
		var ero [4]byte
		if _, err := f.ReadAt(ero[:], 1024); err == nil && binary.LittleEndian.Uint32(ero[:]) == 0xE0F5E1E2 {
			return fmt.Errorf("%w: it is an erofs image; Roost reads squashfs extensions only: rebuild it with roost-image sysext", ErrNotSquashfs)
		}
		return fmt.Errorf("%w: it starts with %q, not the squashfs magic \"hsqs\" (build extensions with roost-image sysext)", ErrNotSquashfs, sb[:4])
	}
	if major := binary.LittleEndian.Uint16(sb[28:]); major != 4 {
		return fmt.Errorf("%w: squashfs version %d, want 4", ErrNotSquashfs, major)
	}
	if used := binary.LittleEndian.Uint64(sb[40:]); used > uint64(size) {
		return fmt.Errorf("%w: truncated: the superblock says %d bytes, the file has %d", ErrNotSquashfs, used, size)
	}
	return nil
}
