package boot

import "fmt"

// FailedRevision is a Revision whose boot entry systemd-boot gave up on.
type FailedRevision struct {
	Number int64
	// Reason is a sentence for the hub and operators, e.g. "boot entry
	// roost-rev-7 ran out of tries (3 failed boots); booted revision 6".
	Reason string
}

// Failed returns the revisions whose entries have no tries left
// (roost-rev-N+0[-D].conf) other than the booted one, newest first: each
// was booted until its tries ran out without being blessed, so
// systemd-boot now sorts it last and boots an older entry (systemd
// "Automatic Boot Assessment"). booted is the running revision
// (BootedRevision; 0 when unknown); its own entry may be at +0 while it is
// still on its last try. A revision that also has a blessed or counting
// entry with tries left is not failed. It fails when loader/entries cannot
// be read.
func (e ESP) Failed(booted int64) ([]FailedRevision, error) {
	es, err := e.Entries()
	if err != nil {
		return nil, err
	}
	return FailedRevisions(es, booted), nil
}

// FailedRevisions is Failed over a list of entries (any order).
func FailedRevisions(es []Entry, booted int64) []FailedRevision {
	live := map[int64]bool{}
	for _, en := range es {
		if !en.Exhausted() {
			live[en.Revision] = true
		}
	}
	sorted := append([]Entry(nil), es...)
	sortEntries(sorted)
	var out []FailedRevision
	seen := map[int64]bool{}
	for _, en := range sorted {
		if !en.Exhausted() || en.Revision == booted || live[en.Revision] || seen[en.Revision] {
			continue
		}
		seen[en.Revision] = true
		tries := "no tries left"
		switch {
		case en.TriesDone == 1:
			tries = "1 failed boot"
		case en.TriesDone > 1:
			tries = fmt.Sprintf("%d failed boots", en.TriesDone)
		}
		running := "the booted revision is unknown"
		if booted > 0 {
			running = fmt.Sprintf("booted revision %d", booted)
		}
		out = append(out, FailedRevision{
			Number: en.Revision,
			Reason: fmt.Sprintf("boot entry %s%d ran out of tries (%s); %s", EntryPrefix, en.Revision, tries, running),
		})
	}
	return out
}
