package boot

import (
	"strconv"
	"testing"
)

func TestParseEntryName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
		want Entry
	}{
		{"roost-rev-7.conf", true, Entry{Revision: 7}},
		{"roost-rev-7+3.conf", true, Entry{Revision: 7, Counting: true, TriesLeft: 3}},
		{"roost-rev-7+2-1.conf", true, Entry{Revision: 7, Counting: true, TriesLeft: 2, TriesDone: 1}},
		{"roost-rev-7+0-3.conf", true, Entry{Revision: 7, Counting: true, TriesLeft: 0, TriesDone: 3}},
		{"roost-rev-7+0.conf", true, Entry{Revision: 7, Counting: true}},
		{"roost-rev-12+03-01.conf", true, Entry{Revision: 12, Counting: true, TriesLeft: 3, TriesDone: 1}},
		{"roost-rev-9223372036854775807.conf", true, Entry{Revision: 9223372036854775807}},
		{"roost-rev-9223372036854775808.conf", false, Entry{}},
		{"roost-rev-0.conf", false, Entry{}},
		{"roost-rev-07.conf", false, Entry{}},
		{"roost-rev--7.conf", false, Entry{}},
		{"roost-rev-+7.conf", false, Entry{}},
		{"roost-rev-.conf", false, Entry{}},
		{"roost-rev-7", false, Entry{}},
		{"roost-rev-7.conf.tmp", false, Entry{}},
		{"roost-rev-7.CONF", false, Entry{}},
		{"ROOST-REV-7.conf", false, Entry{}},
		{"roost-rev-7+.conf", false, Entry{}},
		{"roost-rev-7+3-.conf", false, Entry{}},
		{"roost-rev-7+-1.conf", false, Entry{}},
		{"roost-rev-7+3-1-1.conf", false, Entry{}},
		{"roost-rev-7+3+1.conf", false, Entry{}},
		{"roost-rev-7+x.conf", false, Entry{}},
		{"roost-rev-7+1000000.conf", false, Entry{}},
		{"roost-rev-7 .conf", false, Entry{}},
		{"roost-rev-7a.conf", false, Entry{}},
		{"debian-6.1.0.conf", false, Entry{}},
		{".roost-tmp-roost-rev-7+3.conf-123", false, Entry{}},
		{"", false, Entry{}},
	} {
		got, ok := ParseEntryName(tc.name)
		if ok != tc.ok {
			t.Errorf("ParseEntryName(%q) ok = %v, want %v", tc.name, ok, tc.ok)
			continue
		}
		if ok {
			tc.want.Name = tc.name
		}
		if got != tc.want {
			t.Errorf("ParseEntryName(%q) = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestEntryStates(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		exhausted, blessed, booted bool
	}{
		{"roost-rev-7.conf", false, true, false},
		{"roost-rev-7+3.conf", false, false, false},
		{"roost-rev-7+3-0.conf", false, false, false},
		{"roost-rev-7+2-1.conf", false, false, true},
		{"roost-rev-7+0-3.conf", true, false, true},
	} {
		e, ok := ParseEntryName(tc.name)
		if !ok {
			t.Fatalf("ParseEntryName(%q) failed", tc.name)
		}
		if e.Exhausted() != tc.exhausted || e.Blessed() != tc.blessed || e.Booted() != tc.booted {
			t.Errorf("%s: exhausted %v blessed %v booted %v", tc.name, e.Exhausted(), e.Blessed(), e.Booted())
		}
	}
	if got := (Entry{Name: "roost-rev-7+2-1.conf"}).String(); got != "roost-rev-7+2-1" {
		t.Errorf("String = %q", got)
	}
}

func TestEntryName(t *testing.T) {
	for _, tc := range []struct {
		n     int64
		tries int
		want  string
	}{{7, -1, "roost-rev-7.conf"}, {7, 3, "roost-rev-7+3.conf"}, {12, 0, "roost-rev-12+0.conf"}} {
		if got := EntryName(tc.n, tc.tries); got != tc.want {
			t.Errorf("EntryName(%d, %d) = %q, want %q", tc.n, tc.tries, got, tc.want)
		}
		e, ok := ParseEntryName(tc.want)
		if !ok || e.Revision != tc.n || e.Counting != (tc.tries >= 0) || (e.Counting && e.TriesLeft != tc.tries) {
			t.Errorf("ParseEntryName(%q) = %+v, %v", tc.want, e, ok)
		}
	}
}

func FuzzParseEntryName(f *testing.F) {
	for _, s := range []string{"roost-rev-7.conf", "roost-rev-7+3.conf", "roost-rev-7+2-1.conf", "roost-rev-07.conf", "roost-rev-7+-1.conf", "x.conf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		e, ok := ParseEntryName(name)
		if !ok {
			if e != (Entry{}) {
				t.Fatalf("rejected %q but returned %+v", name, e)
			}
			return
		}
		if e.Revision < 1 || e.TriesLeft < 0 || e.TriesDone < 0 || e.Name != name {
			t.Fatalf("ParseEntryName(%q) = %+v", name, e)
		}
		if !e.Counting && (e.TriesLeft != 0 || e.TriesDone != 0) {
			t.Fatalf("ParseEntryName(%q) = %+v: counters without counting", name, e)
		}
		// The canonical name of what was parsed parses to the same entry.
		canon := EntryName(e.Revision, -1)
		if e.Counting {
			canon = EntryName(e.Revision, e.TriesLeft)
			if e.TriesDone > 0 {
				canon = canon[:len(canon)-len(EntrySuffix)] + "-" + strconv.Itoa(e.TriesDone) + EntrySuffix
			}
		}
		e2, ok := ParseEntryName(canon)
		e2.Name = name
		if !ok || (e2 != e && !(e.Counting && e.TriesDone == 0)) {
			t.Fatalf("%q parsed to %+v; canonical %q parsed to %+v, %v", name, e, canon, e2, ok)
		}
	})
}
