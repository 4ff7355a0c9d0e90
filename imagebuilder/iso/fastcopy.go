package iso

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/diskfs/go-diskfs/backend"
	"golang.org/x/sys/unix"
)

// go-diskfs copies file data in 2 KiB reads and writes. For large files
// WriteISO lets it lay out the image with stub files instead: each stub has
// the real size, a marker in its first block and holes after it. The output
// backend skips all-zero writes (the fresh output file already reads as
// zeros) and records where each marker lands — the file's extent — and the
// real data is then copied in with copy_file_range. The bytes are the same
// as a plain Finalize (TestFastCopySameBytes).

const fastCopyMin = 1 << 20 // files at least this big are stubbed

type stub struct {
	held string // the real file, moved out of the tree
	size int64
	off  int64 // extent offset in the image; -1 until seen
}

// stubFiles replaces large regular files of tree (except skip) by stubs,
// moving the real files into hold. It returns the stubs by index and the
// marker prefix.
func stubFiles(tree, hold string, skip map[string]bool) ([]*stub, []byte, error) {
	magic := make([]byte, 16)
	if _, err := rand.Read(magic); err != nil {
		return nil, nil, err
	}
	var paths []string
	err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(tree, p)
		if skip[filepath.ToSlash(rel)] {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() >= fastCopyMin {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(paths)
	var stubs []*stub
	for i, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, nil, err
		}
		held := filepath.Join(hold, fmt.Sprintf("%06d", i))
		if err := os.Rename(p, held); err != nil {
			var le *os.LinkError
			if errors.As(err, &le) {
				continue // another file system: leave it to go-diskfs
			}
			return nil, nil, err
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, nil, err
		}
		mark := make([]byte, len(magic)+8)
		copy(mark, magic)
		binary.LittleEndian.PutUint64(mark[len(magic):], uint64(len(stubs)))
		if _, err := f.Write(mark); err == nil {
			err = f.Truncate(info.Size())
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, nil, err
		}
		_ = os.Chtimes(p, info.ModTime(), info.ModTime())
		stubs = append(stubs, &stub{held: held, size: info.Size(), off: -1})
	}
	return stubs, magic, nil
}

// fillStubs copies the real data of each stub to its extent in out.
func fillStubs(out *os.File, stubs []*stub, progress Progress, total int64) error {
	var done int64
	for i, s := range stubs {
		if s.off < 0 {
			return fmt.Errorf("fast copy: extent of file %d not seen", i)
		}
		in, err := os.Open(s.held)
		if err != nil {
			return err
		}
		roff, woff := int64(0), s.off
		for roff < s.size {
			n, err := unix.CopyFileRange(int(in.Fd()), &roff, int(out.Fd()), &woff, int(min(s.size-roff, 64<<20)), 0)
			if err != nil || n == 0 {
				// fall back to read/write for the rest
				if _, err := in.Seek(roff, io.SeekStart); err != nil {
					in.Close()
					return err
				}
				if _, err := io.Copy(io.NewOffsetWriter(out, woff), io.LimitReader(in, s.size-roff)); err != nil {
					in.Close()
					return err
				}
				done += s.size - roff
				roff = s.size
				break
			}
			done += int64(n)
			if progress != nil {
				progress("copy files", done, total)
			}
		}
		in.Close()
	}
	return nil
}

// skipZeroBackend is the output of Finalize: it drops all-zero writes and
// records where stub markers are written.
type skipZeroBackend struct {
	f     *os.File
	magic []byte
	stubs []*stub
}

var _ backend.Storage = (*skipZeroBackend)(nil)

func (b *skipZeroBackend) Stat() (fs.FileInfo, error)              { return b.f.Stat() }
func (b *skipZeroBackend) Read(p []byte) (int, error)              { return b.f.Read(p) }
func (b *skipZeroBackend) Close() error                            { return nil }
func (b *skipZeroBackend) ReadAt(p []byte, off int64) (int, error) { return b.f.ReadAt(p, off) }
func (b *skipZeroBackend) Seek(o int64, w int) (int64, error)      { return b.f.Seek(o, w) }
func (b *skipZeroBackend) Sys() (*os.File, error)                  { return b.f, nil }
func (b *skipZeroBackend) Path() string                            { return b.f.Name() }
func (b *skipZeroBackend) Writable() (backend.WritableFile, error) { return b, nil }

func (b *skipZeroBackend) WriteAt(p []byte, off int64) (int, error) {
	if m := len(b.magic); len(p) >= m+8 && bytes.Equal(p[:m], b.magic) {
		i := binary.LittleEndian.Uint64(p[m : m+8])
		if i < uint64(len(b.stubs)) {
			b.stubs[i].off = off
			return len(p), nil
		}
	}
	if allZero(p) {
		return len(p), nil
	}
	return b.f.WriteAt(p, off)
}

func allZero(p []byte) bool {
	for len(p) >= 8 {
		if binary.LittleEndian.Uint64(p) != 0 {
			return false
		}
		p = p[8:]
	}
	for _, c := range p {
		if c != 0 {
			return false
		}
	}
	return true
}
