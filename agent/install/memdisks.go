package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/backend"
	"github.com/diskfs/go-diskfs/disk"
	"golang.org/x/sys/unix"
)

// memPage is the unit MemDisks store: 4 KiB, the alignment MkfsExt4
// requires of a file system's offset.
const memPage = 4096

// MemDisks is a Disks held in memory, for simulating many Servers in one
// process (roost-agent simulate --host fake): device "/dev/NAME" (or
// "NAME") is a sparse disk of the size given to Add, of which only the
// 4 KiB pages holding non-zero bytes take memory. Disks share the ext4
// file systems MkfsExt4 lays down: it runs the real mkfs.ext4 once per
// size and label on a temporary sparse file in TempDir and places the
// result's non-zero pages as a read-only layer under the disk's own
// writes. Wiping (cleaning) is not simulated: OpenForWipe fails. Like FakeDisks it refuses
// MkfsExt4 while the disk is open. Safe for concurrent use.
type MemDisks struct {
	// TempDir holds mkfs.ext4's scratch files (default os.TempDir()).
	TempDir string

	mu    sync.Mutex
	disks map[string]*memDisk
}

// memDisk is one disk: its size, the pages written to it by index, and
// below them the file systems MkfsExt4 laid down, shared with other disks.
type memDisk struct {
	mu   sync.Mutex
	size int64
	// pages are the pages written, over the layers; zeroPage stands for a
	// page of zeros hiding a layer's page.
	pages  map[int64][]byte
	layers []memLayer
	open   int
}

// memLayer is a file system template placed at page first of the disk.
type memLayer struct {
	first, last int64
	pages       map[int64][]byte // by index from first; shared, read only
}

// zeroPage marks a written page of zeros over a layer's page.
var zeroPage = make([]byte, memPage)

// page returns page i (nil: zeros).
func (d *memDisk) page(i int64) []byte {
	if p, ok := d.pages[i]; ok {
		if &p[0] == &zeroPage[0] {
			return nil
		}
		return p
	}
	for j := len(d.layers) - 1; j >= 0; j-- {
		if l := d.layers[j]; i >= l.first && i <= l.last {
			return l.pages[i-l.first]
		}
	}
	return nil
}

// underLayer reports whether a layer holds page i.
func (d *memDisk) underLayer(i int64) bool {
	for _, l := range d.layers {
		if i >= l.first && i <= l.last && l.pages[i-l.first] != nil {
			return true
		}
	}
	return false
}

// ext4Templates caches mkfs.ext4's output per size and label: its
// non-zero pages by index from the file system's start. Shared by every
// MemDisks of the process.
var ext4Templates = struct {
	sync.Mutex
	m map[string]*ext4Template
}{m: map[string]*ext4Template{}}

type ext4Template struct {
	once  sync.Once
	pages map[int64][]byte
	err   error
}

// Add creates (or empties) disk name of size bytes.
func (m *MemDisks) Add(name string, size int64) error {
	if size <= 0 || size%memPage != 0 {
		return fmt.Errorf("memory disk %s: size %d must be a positive multiple of 4 KiB", name, size)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.disks == nil {
		m.disks = map[string]*memDisk{}
	}
	m.disks[strings.TrimPrefix(name, "/dev/")] = &memDisk{size: size, pages: map[int64][]byte{}}
	return nil
}

func (m *MemDisks) disk(dev string) (*memDisk, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.disks[strings.TrimPrefix(dev, "/dev/")]
	if d == nil {
		return nil, fmt.Errorf("open %s: no such device", dev)
	}
	return d, nil
}

// Pages is how many 4 KiB pages disk dev holds in memory (its own and
// shared ones); 0 for an unknown disk.
func (m *MemDisks) Pages(dev string) int {
	d, err := m.disk(dev)
	if err != nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(d.pages)
	for _, l := range d.layers {
		n += len(l.pages)
	}
	return n
}

// Open implements Disks.
func (m *MemDisks) Open(_ context.Context, dev string) (*disk.Disk, error) {
	d, err := m.disk(dev)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if d.open > 0 {
		d.mu.Unlock()
		return nil, fmt.Errorf("open %s: device or resource busy", dev)
	}
	d.open++
	d.mu.Unlock()
	dk, err := diskfs.OpenBackend(&memFile{d: d, name: dev}, diskfs.WithOpenMode(diskfs.ReadWrite))
	if err != nil {
		d.mu.Lock()
		d.open--
		d.mu.Unlock()
		return nil, err
	}
	return dk, nil
}

// MkfsExt4 implements Disks: the pages of a real mkfs.ext4 of size bytes
// labelled label, placed at offset.
func (m *MemDisks) MkfsExt4(ctx context.Context, dev string, offset, size int64, label string) error {
	d, err := m.disk(dev)
	if err != nil {
		return err
	}
	if offset%memPage != 0 || size < memPage || offset+size > d.size {
		return fmt.Errorf("mkfs.ext4 %s: offset %d must be 4 KiB aligned, size %d at least 4 KiB, and both within the disk's %d bytes", dev, offset, size, d.size)
	}
	t, err := m.template(ctx, size, label)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.open > 0 {
		return fmt.Errorf("mkfs.ext4 %s: device is open (it would be busy: O_EXCL)", dev)
	}
	first, last := offset/memPage, (offset+size-1)/memPage
	for i := range d.pages {
		if i >= first && i <= last {
			delete(d.pages, i)
		}
	}
	// Layers under the new file system go; what they held outside it is
	// kept as written pages.
	kept := d.layers[:0]
	for _, l := range d.layers {
		if l.last < first || l.first > last {
			kept = append(kept, l)
			continue
		}
		for k, p := range l.pages {
			if i := l.first + k; i < first || i > last {
				if _, ok := d.pages[i]; !ok {
					d.pages[i] = p
				}
			}
		}
	}
	d.layers = append(kept, memLayer{first: first, last: last, pages: t})
	return nil
}

// template returns the non-zero pages of mkfs.ext4's output for size and
// label, making it on first use.
func (m *MemDisks) template(ctx context.Context, size int64, label string) (map[int64][]byte, error) {
	key := fmt.Sprintf("%d/%s", size, label)
	ext4Templates.Lock()
	t := ext4Templates.m[key]
	if t == nil {
		t = &ext4Template{}
		ext4Templates.m[key] = t
	}
	ext4Templates.Unlock()
	t.once.Do(func() { t.pages, t.err = makeExt4Template(ctx, m.TempDir, size, label) })
	return t.pages, t.err
}

func makeExt4Template(ctx context.Context, tmp string, size int64, label string) (map[int64][]byte, error) {
	dir, err := os.MkdirTemp(tmp, "roost-memdisk-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "fs.img")
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return nil, err
	}
	if err := mkfsExt4(ctx, path, 0, size, label); err != nil {
		return nil, err
	}
	// Read only the file's data extents (mkfs leaves the rest a hole).
	pages := map[int64][]byte{}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; {
		data, err := f.Seek(off, unix.SEEK_DATA)
		if err != nil {
			break // ENXIO: no data after off
		}
		hole, err := f.Seek(data, unix.SEEK_HOLE)
		if err != nil {
			hole = size
		}
		for pos := data / memPage * memPage; pos < hole; pos += int64(len(buf)) {
			n, err := f.ReadAt(buf, pos)
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			for at := 0; at < n; at += memPage {
				pg := buf[at:min(at+memPage, n)]
				if !allZero(pg) {
					p := make([]byte, memPage)
					copy(p, pg)
					pages[(pos+int64(at))/memPage] = p
				}
			}
			if n < len(buf) {
				break
			}
		}
		off = max(hole, off+memPage)
	}
	return pages, nil
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// OpenForWipe implements Disks: a memory disk is no file, so cleaning
// (Wipe) is not simulated; it fails and says so.
func (m *MemDisks) OpenForWipe(_ context.Context, dev string) (*os.File, error) {
	if _, err := m.disk(dev); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("open %s for wiping: a simulated memory disk cannot be wiped (cleaning is not simulated)", dev)
}

// Sync implements Disks: memory needs nothing.
func (m *MemDisks) Sync(context.Context, string, ...string) error { return nil }

// memFile is an open memDisk as go-diskfs storage (a regular file to it).
type memFile struct {
	d      *memDisk
	name   string
	pos    int64
	closed sync.Once
}

var _ backend.Storage = (*memFile)(nil)

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read %s: negative offset", f.name)
	}
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if off >= f.d.size {
		return 0, io.EOF
	}
	n := len(p)
	if rest := f.d.size - off; int64(n) > rest {
		n = int(rest)
	}
	for done := 0; done < n; {
		i, in := (off+int64(done))/memPage, int((off+int64(done))%memPage)
		k := min(memPage-in, n-done)
		if pg := f.d.page(i); pg != nil {
			copy(p[done:done+k], pg[in:in+k])
		} else {
			clear(p[done : done+k])
		}
		done += k
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if off < 0 || off+int64(len(p)) > f.d.size {
		return 0, fmt.Errorf("write %s: %d bytes at %d: beyond the disk's %d bytes", f.name, len(p), off, f.d.size)
	}
	for done := 0; done < len(p); {
		i, in := (off+int64(done))/memPage, int((off+int64(done))%memPage)
		k := min(memPage-in, len(p)-done)
		old := f.d.page(i)
		if old == nil && allZero(p[done:done+k]) {
			done += k
			continue
		}
		pg := make([]byte, memPage) // never change a page in place: it may be shared
		if old != nil {
			copy(pg, old)
		}
		copy(pg[in:in+k], p[done:done+k])
		switch {
		case !allZero(pg):
			f.d.pages[i] = pg
		case f.d.underLayer(i):
			f.d.pages[i] = zeroPage
		default:
			delete(f.d.pages, i)
		}
		done += k
	}
	return len(p), nil
}

func (f *memFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *memFile) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		offset += f.d.size
	default:
		return 0, fmt.Errorf("seek %s: bad whence %d", f.name, whence)
	}
	if offset < 0 {
		return 0, fmt.Errorf("seek %s: negative position", f.name)
	}
	f.pos = offset
	return offset, nil
}

func (f *memFile) Close() error {
	f.closed.Do(func() {
		f.d.mu.Lock()
		f.d.open--
		f.d.mu.Unlock()
	})
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) { return memInfo{f}, nil }

// Sys implements backend.Storage: a memory disk has no file descriptor.
func (f *memFile) Sys() (*os.File, error) { return nil, backend.ErrNotSuitable }

func (f *memFile) Writable() (backend.WritableFile, error) { return f, nil }

func (f *memFile) Path() string { return "" }

// memInfo describes a memory disk as a regular file of its size.
type memInfo struct{ f *memFile }

func (i memInfo) Name() string       { return filepath.Base(i.f.name) }
func (i memInfo) Size() int64        { return i.f.d.size }
func (i memInfo) Mode() fs.FileMode  { return 0o600 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
