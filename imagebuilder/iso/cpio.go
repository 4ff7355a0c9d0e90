package iso

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// ConfigPath is where the Ignition config sits inside the extra initrd: the
// OEM config path Flatcar's initramfs reads (the testbed reads it too).
const ConfigPath = "/usr/share/oem/config.ign"

// CPIOFile is one regular file of a newc cpio archive.
type CPIOFile struct {
	Path string
	Mode uint32 // permission bits
	Data []byte
}

// WriteCPIO writes an uncompressed newc ("070701") archive holding files and
// their parent directories, sorted by path, with every timestamp set to
// mtime, uid/gid 0 and inode numbers in order, so equal inputs give equal
// bytes. The kernel unpacks such an archive appended as an extra initrd.
func WriteCPIO(w io.Writer, files []CPIOFile, mtime int64) error {
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
	// pad the archive to 512 bytes, as cpio(1) does
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

// ReadCPIO returns the regular files of a newc archive by path (without a
// leading slash).
func ReadCPIO(data []byte) (map[string][]byte, error) {
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
			var v int
			_, err := fmt.Sscanf(string(h[6+8*i:6+8*i+8]), "%08X", &v)
			return v, err
		}
		mode, err := field(1)
		if err != nil {
			return nil, err
		}
		size, _ := field(6)
		nameSize, _ := field(11)
		off += 110
		if off+nameSize > len(data) {
			return nil, fmt.Errorf("cpio: truncated name at %d", off)
		}
		name := strings.TrimRight(string(data[off:off+nameSize]), "\x00")
		off = align4(off + nameSize)
		if name == "TRAILER!!!" {
			return out, nil
		}
		if off+size > len(data) {
			return nil, fmt.Errorf("cpio: truncated data of %s", name)
		}
		if mode&0o170000 == 0o100000 {
			out[name] = data[off : off+size]
		}
		off = align4(off + size)
	}
}

func align4(n int) int { return (n + 3) &^ 3 }
