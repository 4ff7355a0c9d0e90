package agent

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The journals of earlier machine IDs. journald keeps its persistent
// journal in a directory named for the machine ID (/var/log/journal/
// <machine-id>, on the STATE partition) and bounds only that one
// (SystemMaxUse). A Server's machine ID is normally its SMBIOS UUID, the
// same at every boot, so all its boots share that directory; a Server
// whose machine ID changed (an image that draws a new one at each boot, a
// replaced board) leaves others behind. The agent bounds those at start:
// it removes the oldest until those left take at most
// EarlierJournalsMaxBytes, always keeping the newest (the boot before
// this one, which roostctl server logs --boot -1 reads).

// EarlierJournalsMaxBytes bounds the journals of earlier boots on disk.
const EarlierJournalsMaxBytes = 128 << 20

// journalDirInfo is one machine ID's journal directory.
type journalDirInfo struct {
	path  string
	size  int64
	mtime time.Time // of its newest file
}

// PruneJournals removes journal directories in dir (one per machine ID)
// other than current's, oldest first (by their newest file), until the
// rest take at most maxBytes; the newest of them is always kept. It
// returns the directories removed. A missing dir is no error.
func PruneJournals(dir, current string, maxBytes int64) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var dirs []journalDirInfo
	for _, e := range ents {
		if !e.IsDir() || e.Name() == current || !isMachineID(e.Name()) {
			continue
		}
		d := journalDirInfo{path: filepath.Join(dir, e.Name())}
		_ = filepath.WalkDir(d.path, func(_ string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return nil
			}
			if fi, err := de.Info(); err == nil {
				d.size += fi.Size()
				if fi.ModTime().After(d.mtime) {
					d.mtime = fi.ModTime()
				}
			}
			return nil
		})
		dirs = append(dirs, d)
	}
	// newest first
	slices.SortFunc(dirs, func(a, b journalDirInfo) int { return b.mtime.Compare(a.mtime) })
	var removed []string
	var total int64
	for i, d := range dirs {
		total += d.size
		if i == 0 || total <= maxBytes {
			continue
		}
		if err := os.RemoveAll(d.path); err != nil {
			return removed, err
		}
		removed = append(removed, d.path)
	}
	return removed, nil
}

// isMachineID says whether name is a machine ID (32 lower-case hex
// digits), as journald names its directories.
func isMachineID(name string) bool {
	return len(name) == 32 && strings.Trim(name, "0123456789abcdef") == ""
}

// pruneJournals runs PruneJournals on the Host's JournalDir, if set, and
// logs what it removed.
func (h *Host) pruneJournals(log *slog.Logger) {
	if h.JournalDir == "" {
		return
	}
	id, err := os.ReadFile(h.MachineIDPath)
	if err != nil {
		log.Warn("journals of earlier boots not pruned: machine ID unreadable", "err", err)
		return
	}
	removed, err := PruneJournals(h.JournalDir, strings.TrimSpace(string(id)), EarlierJournalsMaxBytes)
	if err != nil {
		log.Warn("pruning the journals of earlier boots failed", "dir", h.JournalDir, "err", err)
	}
	if len(removed) > 0 {
		log.Info("removed the journals of old boots", "dirs", removed, "bound_bytes", EarlierJournalsMaxBytes)
	}
}
