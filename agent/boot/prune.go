package boot

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/roostfleet/roost/agent/install"
)

// Prune removes what the kept revisions do not need: the entries
// (loader/entries/roost-rev-N*.conf) and folders (/roost/rev-N) of every
// revision not in keep, then the kernels and initrds under
// /roost/<hash>/ that no kept entry's linux or initrd line references, and
// leftover temporary files of an interrupted Stage. Entries go first, so no
// entry ever names a removed file. It touches only files it knows by name
// — other entries and files under /roost stay — and removes a folder only
// once it is empty. Keep the booted revision, the desired one and the
// previous good one. It fails when keep is empty (that would remove every
// Roost entry) or a kept entry cannot be read.
func (e ESP) Prune(keep ...int64) error {
	if len(keep) == 0 {
		return fmt.Errorf("prune boot entries: no revision to keep")
	}
	kept := map[int64]bool{}
	for _, n := range keep {
		kept[n] = true
	}
	all, err := e.Entries()
	if err != nil {
		return fmt.Errorf("prune boot entries: %w", err)
	}
	var drop []Entry
	used := map[string]bool{} // ESP paths named by kept entries
	for _, en := range all {
		if !kept[en.Revision] {
			drop = append(drop, en)
			continue
		}
		refs, err := e.entryFiles(en.Name)
		if err != nil {
			return fmt.Errorf("prune boot entries: %w", err)
		}
		for _, r := range refs {
			used[r] = true
		}
	}
	if err := e.removeEntries(drop); err != nil {
		return fmt.Errorf("prune boot entries: %w", err)
	}
	if err := e.removeTemps(install.EntriesDir); err != nil {
		return fmt.Errorf("prune boot entries: %w", err)
	}
	des, err := os.ReadDir(e.path(RoostDir))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("prune boot files: %w", err)
	}
	for _, de := range des {
		if !de.IsDir() {
			continue
		}
		dir := RoostDir + "/" + de.Name()
		var names []string // files Roost writes in dir
		switch {
		case isRevisionDir(de.Name()):
			n, _ := strconv.ParseInt(strings.TrimPrefix(de.Name(), "rev-"), 10, 64)
			if !kept[n] {
				names = []string{ConfigInitrdName}
			}
		case isContentDir(de.Name()):
			files, err := os.ReadDir(e.path(dir))
			if err != nil {
				return fmt.Errorf("prune boot files: %w", err)
			}
			for _, f := range files {
				n := f.Name()
				if (n == KernelName || n == InitrdName || isExtensionInitrd(n)) && !used[dir+"/"+n] {
					names = append(names, n)
				}
			}
		default:
			continue
		}
		for _, f := range names {
			if err := os.Remove(e.path(dir + "/" + f)); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("prune boot files: %w", err)
			}
		}
		if err := e.removeTemps(dir); err != nil {
			return fmt.Errorf("prune boot files: %w", err)
		}
		if err := syncDir(e.path(dir)); err != nil {
			return fmt.Errorf("prune boot files: %w", err)
		}
		if err := os.Remove(e.path(dir)); err != nil && !os.IsNotExist(err) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("prune boot files: %w", err)
		}
	}
	return syncDir(e.path(RoostDir))
}

// removeTemps removes writeAtomic's leftovers in the ESP folder dir.
func (e ESP) removeTemps(dir string) error {
	des, err := os.ReadDir(e.path(dir))
	if err != nil {
		return err
	}
	for _, de := range des {
		if !de.IsDir() && isTemp(de.Name()) {
			if err := os.Remove(e.path(dir + "/" + de.Name())); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	return nil
}

// entryFiles returns the ESP paths an entry's linux, initrd, devicetree
// and efi lines name (BLS type #1 keys), cleaned, with a leading slash.
func (e ESP) entryFiles(name string) ([]string, error) {
	data, err := os.ReadFile(e.entryPath(name))
	if err != nil {
		return nil, err
	}
	return entryFiles(string(data)), nil
}

func entryFiles(text string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			continue
		}
		key, val := line[:i], line[i+1:]
		switch key {
		case "linux", "initrd", "devicetree", "efi":
			out = append(out, path.Clean("/"+strings.TrimSpace(val)))
		}
	}
	return out
}

// isRevisionDir reports whether name is a per-revision folder: rev-N.
func isRevisionDir(name string) bool {
	rest, ok := strings.CutPrefix(name, "rev-")
	_, valid := parseRevision(rest)
	return ok && valid
}

// isContentDir reports whether name is a content-addressed folder: 16
// lower-case hex digits.
func isContentDir(name string) bool {
	if len(name) != hashDirLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
