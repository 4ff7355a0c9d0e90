package boot

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/roostfleet/roost/agent/install"
)

// ESP is a mounted EFI System Partition prepared by agent/install: Dir is
// its mount point (the agent mounts ROOST-ESP; tests use a temporary
// directory). Its methods work on files under Dir only.
type ESP struct {
	Dir string
}

// RoostDir is the ESP folder holding Roost's kernels, initrds and
// per-Revision config initrds.
const RoostDir = "/roost"

// File names inside RoostDir's folders.
const (
	KernelName       = "vmlinuz"    // in /roost/<hash>/
	InitrdName       = "initrd.img" // in /roost/<hash>/
	ConfigInitrdName = "config.img" // in /roost/rev-N/
)

// hashDirLen is how many hex digits of a sha256 name a content-addressed
// folder: 16 (64 bits).
const hashDirLen = 16

// RevisionDir is revision n's folder on the ESP, e.g. "/roost/rev-7".
func RevisionDir(n int64) string { return fmt.Sprintf("%s/rev-%d", RoostDir, n) }

// ContentDir is the content-addressed folder of a file whose sha256 is
// sha (hex), e.g. "/roost/0123456789abcdef".
func ContentDir(sha string) string { return RoostDir + "/" + strings.ToLower(sha[:hashDirLen]) }

// path turns an ESP path ("/loader/entries") into a local one under Dir.
func (e ESP) path(espPath string) string {
	return filepath.Join(e.Dir, filepath.FromSlash(strings.TrimPrefix(espPath, "/")))
}

// Entries lists the Roost entries in loader/entries (install.EntriesDir),
// newest revision first and by name within a revision. Files whose names
// ParseEntryName rejects — other operating systems' entries, temporary
// files — are left out. It fails when the folder cannot be read.
func (e ESP) Entries() ([]Entry, error) {
	des, err := os.ReadDir(e.path(install.EntriesDir))
	if err != nil {
		return nil, fmt.Errorf("boot entries: %w", err)
	}
	var out []Entry
	for _, de := range des {
		if de.IsDir() {
			continue
		}
		if en, ok := ParseEntryName(de.Name()); ok {
			out = append(out, en)
		}
	}
	sortEntries(out)
	return out, nil
}

func sortEntries(es []Entry) {
	sort.Slice(es, func(i, j int) bool {
		if es[i].Revision != es[j].Revision {
			return es[i].Revision > es[j].Revision
		}
		return es[i].Name < es[j].Name
	})
}

// revisionEntries returns the entries of revision n.
func revisionEntries(es []Entry, n int64) []Entry {
	var out []Entry
	for _, en := range es {
		if en.Revision == n {
			out = append(out, en)
		}
	}
	return out
}

// entryPath is the local path of the entry file name.
func (e ESP) entryPath(name string) string {
	return e.path(install.EntriesDir + "/" + name)
}

// removeEntries removes the given entry files and fsyncs loader/entries.
func (e ESP) removeEntries(es []Entry) error {
	if len(es) == 0 {
		return nil
	}
	for _, en := range es {
		if err := os.Remove(e.entryPath(en.Name)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("remove boot entry %s: %w", en.Name, err)
		}
	}
	return syncDir(e.path(install.EntriesDir))
}
