package boot

import (
	"fmt"
	"strconv"
	"strings"
)

// EntryPrefix and EntrySuffix frame a Roost entry's file name in
// loader/entries: roost-rev-N[+L[-D]].conf.
const (
	EntryPrefix = "roost-rev-"
	EntrySuffix = ".conf"
)

// Entry is one Roost boot entry file in loader/entries, as its name tells.
type Entry struct {
	Revision int64  // N, at least 1
	Name     string // file name, e.g. "roost-rev-7+2-1.conf"
	// Counting is true when the name carries a boot counter (+L or +L-D):
	// the entry was never blessed. False means blessed (good) or staged
	// without counting.
	Counting  bool
	TriesLeft int // L; 0 when not Counting
	TriesDone int // D (0 when the name has no -D); 0 when not Counting
}

// Exhausted reports whether systemd-boot has used up all of the entry's
// tries (roost-rev-N+0[-D].conf): it sorts last and is not booted by
// default.
func (e Entry) Exhausted() bool { return e.Counting && e.TriesLeft == 0 }

// Blessed reports whether the entry carries no boot counter
// (roost-rev-N.conf): marked good, or never counted.
func (e Entry) Blessed() bool { return !e.Counting }

// Booted reports whether systemd-boot has tried the entry at least once.
func (e Entry) Booted() bool { return e.Counting && e.TriesDone > 0 }

// String is the entry's name without the suffix, e.g. "roost-rev-7+2-1".
func (e Entry) String() string { return strings.TrimSuffix(e.Name, EntrySuffix) }

// maxCounter bounds the boot counters a name may carry; systemd-boot's own
// counters are small (Stage writes at most MaxTries).
const maxCounter = 1 << 16

// ParseEntryName parses a Roost entry file name: roost-rev-N.conf,
// roost-rev-N+L.conf or roost-rev-N+L-D.conf, where N is a decimal
// revision ≥ 1 without leading zeros and L, D are decimal counters (the
// "+LEFT-DONE" suffix of systemd's boot counting, "-D" defaulting to 0).
// ok is false for any other name, including non-Roost entries.
func ParseEntryName(name string) (e Entry, ok bool) {
	s, found := strings.CutPrefix(name, EntryPrefix)
	if !found {
		return Entry{}, false
	}
	s, found = strings.CutSuffix(s, EntrySuffix)
	if !found {
		return Entry{}, false
	}
	rev, counter, counting := strings.Cut(s, "+")
	n, ok := parseRevision(rev)
	if !ok {
		return Entry{}, false
	}
	e = Entry{Revision: n, Name: name, Counting: counting}
	if !counting {
		return e, true
	}
	left, done, hasDone := strings.Cut(counter, "-")
	if e.TriesLeft, ok = parseCounter(left); !ok {
		return Entry{}, false
	}
	if hasDone {
		if e.TriesDone, ok = parseCounter(done); !ok {
			return Entry{}, false
		}
	}
	return e, true
}

// EntryName is the file name of revision n's entry: roost-rev-N.conf when
// tries < 0 (no counting), else roost-rev-N+tries.conf.
func EntryName(n int64, tries int) string {
	if tries < 0 {
		return fmt.Sprintf("%s%d%s", EntryPrefix, n, EntrySuffix)
	}
	return fmt.Sprintf("%s%d+%d%s", EntryPrefix, n, tries, EntrySuffix)
}

// parseRevision parses a revision number: decimal digits, no sign, no
// leading zero, ≥ 1, fits int64.
func parseRevision(s string) (int64, bool) {
	if s == "" || s[0] == '0' || !allDigits(s) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// parseCounter parses a boot counter: decimal digits (leading zeros are
// accepted, as systemd-boot does), below maxCounter.
func parseCounter(s string) (int, bool) {
	if s == "" || len(s) > 6 || !allDigits(s) {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n < maxCounter
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
