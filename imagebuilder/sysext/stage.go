package sysext

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Modes of staged entries: the image keeps only whether a file is
// executable.
const (
	dirMode  fs.FileMode = 0o755
	execMode fs.FileMode = 0o755
	fileMode fs.FileMode = 0o644
)

// stager lays out an image tree in root.
type stager struct {
	root string
	// origin says which flag put each entry (slash path relative to
	// root) there, for errors.
	origin map[string]string
}

// stage lays out the image tree of o in the empty directory dir: the
// --from tree, the --file files and the extension-release file, with
// normalised modes (set explicitly, so the umask does not matter).
func stage(o Options, dir string) error {
	s := &stager{root: dir, origin: map[string]string{}}
	if err := os.Chmod(dir, dirMode); err != nil {
		return err
	}
	if o.From != "" {
		if err := s.addTree(o.From); err != nil {
			return err
		}
	}
	for _, f := range o.Files {
		if err := s.addFile(f); err != nil {
			return err
		}
	}
	rel := ReleasePath(o.Name)
	if err := s.mkdirAll(path.Dir(rel), "roost-image"); err != nil {
		return err
	}
	return writeFile(filepath.Join(s.root, filepath.FromSlash(rel)), o.Release().Marshal(), fileMode)
}

// addTree copies the tree from (its contents are the image's root).
func (s *stager) addTree(from string) error {
	flag := "--from " + from
	root, err := filepath.EvalSymlinks(from)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	if st, err := os.Stat(root); err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	} else if !st.IsDir() {
		return fmt.Errorf("%s: not a directory (give a directory holding usr/…, or use --file SRC:DEST)", flag)
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
		relOS, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if relOS == "." {
			return nil
		}
		rel := filepath.ToSlash(relOS)
		top, _, _ := strings.Cut(rel, "/")
		switch {
		case top != "usr" && top != "opt":
			hint := ""
			if top == "bin" || top == "lib" || top == "share" || top == "libexec" {
				hint = fmt.Sprintf(" (%s looks like the contents of usr/: give a directory that holds usr/%s)", rel, rel)
			}
			return fmt.Errorf("%s: %s is outside usr/ and opt/, which systemd-sysext does not merge: move it under usr/ or opt/%s", flag, rel, hint)
		case rel == top && !d.IsDir():
			return fmt.Errorf("%s: %s is not a directory: it must be one (the host's /%s)", flag, rel, rel)
		case strings.HasPrefix(rel, ReleaseDir+"/"+ReleasePrefix):
			return fmt.Errorf("%s: %s: roost-image writes the extension-release file itself from --name, --version and --arch: remove it from the tree", flag, rel)
		case rel == "usr/lib/os-release":
			return fmt.Errorf("%s: %s: an extension must not replace the OS's os-release: remove it from the tree", flag, rel)
		}
		dst := filepath.Join(s.root, relOS)
		t := d.Type()
		switch {
		case t.IsDir():
			if err := os.Mkdir(dst, dirMode); err != nil {
				return err
			}
			s.origin[rel] = flag
			return os.Chmod(dst, dirMode)
		case t.IsRegular():
			st, err := d.Info()
			if err != nil {
				return fmt.Errorf("%s: %w", flag, err)
			}
			s.origin[rel] = flag
			return copyFile(p, dst, modeOf(st.Mode()))
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("%s: %w", flag, err)
			}
			s.origin[rel] = flag
			return os.Symlink(target, dst)
		default:
			return fmt.Errorf("%s: %s is a %s: an extension holds regular files, directories and symbolic links only", flag, rel, kindOf(t))
		}
	})
}

// addFile copies one --file.
func (s *stager) addFile(f FileSpec) error {
	flag := "--file " + f.String()
	st, err := os.Stat(f.Src)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: %s is a %s, not a regular file (use --from DIR for a tree)", flag, f.Src, kindOf(st.Mode().Type()))
	}
	rel := strings.TrimPrefix(f.Dest, "/")
	if err := s.mkdirAll(path.Dir(rel), flag); err != nil {
		return err
	}
	dst := filepath.Join(s.root, filepath.FromSlash(rel))
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("%s: %s is also in %s: give it once", flag, f.Dest, s.origin[rel])
	}
	s.origin[rel] = flag
	return copyFile(f.Src, dst, modeOf(st.Mode()))
}

// mkdirAll makes directory rel (slash path) and its parents, refusing to
// go through a file or symbolic link another flag put there.
func (s *stager) mkdirAll(rel, flag string) error {
	cur := ""
	for _, part := range strings.Split(rel, "/") {
		cur = path.Join(cur, part)
		dst := filepath.Join(s.root, filepath.FromSlash(cur))
		st, err := os.Lstat(dst)
		switch {
		case err == nil && st.IsDir():
			continue
		case err == nil:
			return fmt.Errorf("%s: /%s is a %s in %s, so nothing can go below it", flag, cur, kindOf(st.Mode().Type()), s.origin[cur])
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
		if err := os.Mkdir(dst, dirMode); err != nil {
			return err
		}
		if err := os.Chmod(dst, dirMode); err != nil {
			return err
		}
		s.origin[cur] = flag
	}
	return nil
}

// modeOf is the staged mode of a file of mode m: 0755 if anyone may
// execute it, else 0644.
func modeOf(m fs.FileMode) fs.FileMode {
	if m&0o111 != 0 {
		return execMode
	}
	return fileMode
}

// kindOf names a file type for errors.
func kindOf(t fs.FileMode) string {
	switch {
	case t&fs.ModeDir != 0:
		return "directory"
	case t&fs.ModeSymlink != 0:
		return "symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "named pipe"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeCharDevice != 0:
		return "character device"
	case t&fs.ModeDevice != 0:
		return "block device"
	case t == 0:
		return "regular file"
	}
	return "special file"
}

// copyFile copies src to the new file dst with mode (not masked by the
// umask). io.Copy between files uses copy_file_range where it can.
func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := out.Chmod(mode); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeFile writes data to the new file p with mode (not masked by the
// umask).
func writeFile(p string, data []byte, mode fs.FileMode) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
