package boot

import (
	"errors"
	"fmt"
	"os"

	"github.com/roostfleet/roost/agent/install"
)

// ErrNoEntry is returned (wrapped) by Bless when a revision has no boot
// entry.
var ErrNoEntry = errors.New("no boot entry")

// Bless marks revision n's entry good: it renames roost-rev-N+L[-D].conf
// to roost-rev-N.conf and fsyncs loader/entries, which is what
// systemd-bless-boot.service does (systemd "Automatic Boot Assessment").
// systemd-boot then stops counting the entry down. It does nothing when
// the entry is already blessed (and removes stray counting copies of it
// then). It fails with ErrNoEntry when revision n has no entry. Call it only for the booted
// revision, once its health checks pass.
func (e ESP) Bless(n int64) error {
	all, err := e.Entries()
	if err != nil {
		return fmt.Errorf("bless revision %d: %w", n, err)
	}
	es := revisionEntries(all, n)
	if len(es) == 0 {
		return fmt.Errorf("bless revision %d: %w: no %s%d*%s in %s", n, ErrNoEntry, EntryPrefix, n, EntrySuffix, install.EntriesDir)
	}
	var counting []Entry
	blessed := false
	for _, en := range es {
		if en.Blessed() {
			blessed = true
		} else {
			counting = append(counting, en)
		}
	}
	if blessed {
		if err := e.removeEntries(counting); err != nil {
			return fmt.Errorf("bless revision %d: %w", n, err)
		}
		return nil
	}
	// Normally one counting entry; after an interrupted restage, keep the
	// one systemd-boot tried most.
	best := counting[0]
	for _, en := range counting[1:] {
		if en.TriesDone > best.TriesDone {
			best = en
		}
	}
	if err := os.Rename(e.entryPath(best.Name), e.entryPath(EntryName(n, -1))); err != nil {
		return fmt.Errorf("bless revision %d: %w", n, err)
	}
	if err := syncDir(e.path(install.EntriesDir)); err != nil {
		return fmt.Errorf("bless revision %d: %w", n, err)
	}
	var rest []Entry
	for _, en := range counting {
		if en.Name != best.Name {
			rest = append(rest, en)
		}
	}
	if err := e.removeEntries(rest); err != nil {
		return fmt.Errorf("bless revision %d: %w", n, err)
	}
	return nil
}
