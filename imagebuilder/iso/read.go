package iso

import (
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/filesystem"
)

// Entry is one file or directory of an image, as read back.
type Entry struct {
	Path string // lower-case, no ISO 9660 version suffix
	Size int64
	Dir  bool
}

// BootEntry is one El Torito boot catalog entry.
type BootEntry struct {
	Platform  string // BIOS or UEFI
	Bootable  bool
	LoadSize  uint16 // 512-byte sectors
	LBA       uint32
	BootFile  string // path in the image, when found
	BootTable bool   // BIOS entry has a boot information table
}

// Image is an enrollment image opened for reading.
type Image struct {
	Path   string
	Format Format
	fs     filesystem.FileSystem
	close  func() error
}

// Open opens an ISO 9660 image or a raw GPT disk image (its first
// partition).
func Open(p string) (*Image, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	magic := make([]byte, 5)
	_, err = f.ReadAt(magic, 16*sector+1)
	f.Close()
	format := FormatRaw
	if err == nil && string(magic) == "CD001" {
		format = FormatISO
	}
	d, err := diskfs.Open(p, diskfs.WithOpenMode(diskfs.ReadOnly))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	part := 0
	if format == FormatRaw {
		part = 1
	}
	fsys, err := d.GetFilesystem(part)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("%s: no ISO 9660 file system or ESP: %w", p, err)
	}
	return &Image{Path: p, Format: format, fs: fsys, close: d.Close}, nil
}

// Close releases the image.
func (im *Image) Close() error { return im.close() }

func cleanName(n string) string {
	n = strings.TrimSuffix(n, ";1")
	n = strings.TrimSuffix(n, ".")
	return strings.ToLower(n)
}

// List returns every file and directory, sorted by path.
func (im *Image) List() ([]Entry, error) {
	var out []Entry
	var walk func(dir, clean string) error
	walk = func(dir, clean string) error {
		ents, err := im.fs.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("read %s: %w", dir, err)
		}
		for _, e := range ents {
			name := e.Name()
			if name == "." || name == ".." {
				continue
			}
			full := path.Join(dir, name)
			cp := path.Join(clean, cleanName(name))
			info, err := e.Info()
			if err != nil {
				return err
			}
			if e.IsDir() {
				out = append(out, Entry{Path: cp, Dir: true})
				if err := walk(full, cp); err != nil {
					return err
				}
				continue
			}
			out = append(out, Entry{Path: cp, Size: info.Size()})
		}
		return nil
	}
	if err := walk(".", "/"); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// ReadFile reads the file at p (case-insensitive; "/boot/vmlinuz").
func (im *Image) ReadFile(p string) ([]byte, error) {
	real, err := im.resolve(p)
	if err != nil {
		return nil, err
	}
	f, err := im.fs.OpenFile(real, os.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	defer f.Close()
	return io.ReadAll(f)
}

// resolve maps a clean path to the name stored in the image.
func (im *Image) resolve(p string) (string, error) {
	cur := "."
	for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
		ents, err := im.fs.ReadDir(cur)
		if err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
		found := ""
		for _, e := range ents {
			if cleanName(e.Name()) == strings.ToLower(part) {
				found = e.Name()
				break
			}
		}
		if found == "" {
			return "", fmt.Errorf("%s: %w", p, fs.ErrNotExist)
		}
		cur = path.Join(cur, found)
	}
	return cur, nil
}

// BootEntries reads the El Torito boot catalog of an ISO image.
func (im *Image) BootEntries() ([]BootEntry, error) {
	if im.Format != FormatISO {
		return nil, nil
	}
	f, err := os.Open(im.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var catLBA uint32
	vd := make([]byte, sector)
	for s := int64(16); s < 32; s++ {
		if _, err := f.ReadAt(vd, s*sector); err != nil {
			return nil, err
		}
		if vd[0] == 255 {
			break
		}
		if vd[0] == 0 && strings.HasPrefix(string(vd[7:39]), "EL TORITO SPECIFICATION") {
			catLBA = binary.LittleEndian.Uint32(vd[71:75])
		}
	}
	if catLBA == 0 {
		return nil, nil
	}
	cat := make([]byte, sector)
	if _, err := f.ReadAt(cat, int64(catLBA)*sector); err != nil {
		return nil, err
	}
	files := map[uint32]string{}
	if ents, err := im.List(); err == nil {
		for _, e := range ents {
			if e.Dir {
				continue
			}
			if lba, err := im.extent(e.Path); err == nil {
				files[lba] = e.Path
			}
		}
	}
	var out []BootEntry
	platform := func(b byte) string {
		switch b {
		case 0:
			return "BIOS"
		case 0xef:
			return "UEFI"
		}
		return fmt.Sprintf("0x%02x", b)
	}
	cur := platform(cat[1])
	add := func(e []byte) {
		be := BootEntry{Platform: cur, Bootable: e[0] == 0x88, LoadSize: binary.LittleEndian.Uint16(e[6:8]), LBA: binary.LittleEndian.Uint32(e[8:12])}
		be.BootFile = files[be.LBA]
		if be.Platform == "BIOS" {
			tbl := make([]byte, 8)
			if _, err := f.ReadAt(tbl, int64(be.LBA)*sector+8); err == nil {
				be.BootTable = binary.LittleEndian.Uint32(tbl[0:4]) == 16 // PVD LBA
			}
		}
		out = append(out, be)
	}
	add(cat[32:64])
	for off := 64; off+32 <= len(cat); off += 32 {
		h := cat[off]
		if h != 0x90 && h != 0x91 {
			break
		}
		cur = platform(cat[off+1])
		n := int(binary.LittleEndian.Uint16(cat[off+2 : off+4]))
		for i := 0; i < n; i++ {
			off += 32
			add(cat[off : off+32])
		}
	}
	return out, nil
}

// extent finds the starting sector of a file from its directory record.
func (im *Image) extent(p string) (uint32, error) {
	f, err := os.Open(im.Path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	ext, _, err := fileExtent(f, p)
	return ext, err
}

// fileExtent finds a file of the ISO 9660 image r (in its primary tree) and
// returns its starting sector and its size in bytes.
func fileExtent(r io.ReaderAt, p string) (lba, size uint32, err error) {
	vd := make([]byte, sector)
	if _, err := r.ReadAt(vd, 16*sector); err != nil {
		return 0, 0, err
	}
	ext := binary.LittleEndian.Uint32(vd[156+2:])
	size = binary.LittleEndian.Uint32(vd[156+10:])
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i, part := range parts {
		buf := make([]byte, size)
		if _, err := r.ReadAt(buf, int64(ext)*sector); err != nil {
			return 0, 0, err
		}
		found := false
		for off := 0; off < len(buf); {
			l := int(buf[off])
			if l == 0 {
				off = (off/sector + 1) * sector
				continue
			}
			rec := buf[off : off+l]
			name := string(rec[33 : 33+int(rec[32])])
			if cleanName(name) == part {
				ext = binary.LittleEndian.Uint32(rec[2:6])
				size = binary.LittleEndian.Uint32(rec[10:14])
				found = true
				break
			}
			off += l
		}
		if !found {
			return 0, 0, fs.ErrNotExist
		}
		if i == len(parts)-1 {
			return ext, size, nil
		}
	}
	return 0, 0, fs.ErrNotExist
}
