// Package cpio writes and reads uncompressed newc ("070701") cpio
// archives, the format the Linux kernel unpacks from an initrd (see the
// kernel's Documentation/driver-api/early-userspace/buffer-format.rst).
// Roost uses it for the small "config initrd" that carries an Ignition
// config next to the image initrd: imagebuilder/iso bakes one into
// enrollment images and agent/boot writes one per Revision on the ESP.
package cpio

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
)

// File is one regular file of a newc archive.
type File struct {
	Path string // slash-separated; a leading slash is dropped
	Mode uint32 // permission bits (0o7777 are kept)
	Data []byte
}

// Write writes an uncompressed newc archive holding files and their parent
// directories (mode 0755), sorted by path, with every timestamp set to
// mtime (Unix seconds), uid/gid 0 and inode numbers in order, so equal
// inputs give equal bytes. The archive ends with the TRAILER!!! entry and
// is padded with zeros to a multiple of 512 bytes, as cpio(1) does. The
// kernel unpacks such an archive appended as an extra initrd. It fails
// on an empty path.
func Write(w io.Writer, files []File, mtime int64) error {
	type entry struct {
		name string
		mode uint32
		data []byte
	}
	dirs := map[string]bool{}
	var entries []entry
	for _, f := range files {
		p := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		if p == "" || p == "." {
			return fmt.Errorf("cpio: bad path %q", f.Path)
		}
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			entries = append(entries, entry{name: d, mode: 0o040755})
		}
		entries = append(entries, entry{name: p, mode: 0o100000 | (f.Mode & 0o7777), data: f.Data})
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	hdr := func(ino int, e entry) {
		nlink := 1
		if e.mode&0o040000 != 0 {
			nlink = 2
		}
		fmt.Fprintf(&buf, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			ino, e.mode, 0, 0, nlink, mtime, len(e.data), 0, 0, 0, 0, len(e.name)+1, 0)
		buf.WriteString(e.name)
		buf.WriteByte(0)
		pad4(&buf)
		buf.Write(e.data)
		pad4(&buf)
	}
	for i, e := range entries {
		hdr(i+1, e)
	}
	hdr(0, entry{name: "TRAILER!!!"})
	for buf.Len()%512 != 0 {
		buf.WriteByte(0)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

func pad4(b *bytes.Buffer) {
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
}

// Read returns the regular files of a newc archive by path (without a
// leading slash), up to the TRAILER!!! entry; directories and other
// entries are skipped. The returned slices alias data. It fails on a bad
// magic, a malformed header field or a truncated archive.
func Read(data []byte) (map[string][]byte, error) {
	out := map[string][]byte{}
	off := 0
	for {
		if off+110 > len(data) {
			return nil, fmt.Errorf("cpio: truncated header at %d", off)
		}
		h := data[off : off+110]
		if string(h[:6]) != "070701" {
			return nil, fmt.Errorf("cpio: bad magic at %d", off)
		}
		field := func(i int) (int, error) {
			v, err := strconv.ParseUint(string(h[6+8*i:6+8*i+8]), 16, 32)
			if err != nil {
				return 0, fmt.Errorf("cpio: bad header field %d at %d", i, off)
			}
			return int(v), nil
		}
		mode, err := field(1)
		if err != nil {
			return nil, err
		}
		size, err := field(6)
		if err != nil {
			return nil, err
		}
		nameSize, err := field(11)
		if err != nil {
			return nil, err
		}
		off += 110
		if nameSize > len(data)-off {
			return nil, fmt.Errorf("cpio: truncated name at %d", off)
		}
		name := strings.TrimRight(string(data[off:off+nameSize]), "\x00")
		off = align4(off + nameSize)
		if name == "TRAILER!!!" {
			return out, nil
		}
		if off > len(data) || size > len(data)-off {
			return nil, fmt.Errorf("cpio: truncated data of %s", name)
		}
		if mode&0o170000 == 0o100000 {
			out[name] = data[off : off+size]
		}
		off = align4(off + size)
	}
}

func align4(n int) int { return (n + 3) &^ 3 }
