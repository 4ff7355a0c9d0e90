package boot

import (
	"errors"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// touch writes empty files into loader/entries.
func touch(t *testing.T, e ESP, entries ...string) {
	t.Helper()
	for _, n := range entries {
		if err := os.WriteFile(e.entryPath(n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEntriesOrderAndForeign(t *testing.T) {
	e := newESP(t)
	touch(t, e, "roost-rev-9+3.conf", "roost-rev-10+0-3.conf", "roost-rev-2.conf", "debian.conf", "roost-rev-07.conf", ".roost-tmp-roost-rev-11+3.conf-1")
	if err := os.Mkdir(e.entryPath("roost-rev-12.conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	es, err := e.Entries()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range es {
		got = append(got, en.Name)
	}
	want := []string{"roost-rev-10+0-3.conf", "roost-rev-9+3.conf", "roost-rev-2.conf"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Entries = %q, want %q", got, want)
	}
	if _, err := (ESP{Dir: t.TempDir()}).Entries(); err == nil {
		t.Error("Entries without loader/entries = nil error")
	}
}

func TestBless(t *testing.T) {
	for _, tc := range []struct {
		before []string
		n      int64
		after  []string
		err    error
	}{
		{[]string{"roost-rev-7+2-1.conf", "roost-rev-6.conf"}, 7, []string{"roost-rev-6.conf", "roost-rev-7.conf"}, nil},
		{[]string{"roost-rev-7+3.conf"}, 7, []string{"roost-rev-7.conf"}, nil},
		{[]string{"roost-rev-7+0-3.conf"}, 7, []string{"roost-rev-7.conf"}, nil},
		{[]string{"roost-rev-7.conf"}, 7, []string{"roost-rev-7.conf"}, nil},
		{[]string{"roost-rev-7.conf", "roost-rev-7+3.conf"}, 7, []string{"roost-rev-7.conf"}, nil},
		{[]string{"roost-rev-7+3.conf", "roost-rev-7+1-2.conf"}, 7, []string{"roost-rev-7.conf"}, nil},
		{[]string{"roost-rev-6.conf", "roost-rev-70+3.conf"}, 7, []string{"roost-rev-6.conf", "roost-rev-70+3.conf"}, ErrNoEntry},
	} {
		e := newESP(t)
		touch(t, e, tc.before...)
		err := e.Bless(tc.n)
		if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%q: Bless(%d) = %v, want %v", tc.before, tc.n, err, tc.err)
		}
		if got := names(t, e); !reflect.DeepEqual(got, tc.after) {
			t.Errorf("%q: Bless(%d) left %q, want %q", tc.before, tc.n, got, tc.after)
		}
	}
}

func TestBlessKeepsTheTriedEntry(t *testing.T) {
	e := newESP(t)
	if err := os.WriteFile(e.entryPath("roost-rev-7+1-2.conf"), []byte("tried"), 0o644); err != nil {
		t.Fatal(err)
	}
	touch(t, e, "roost-rev-7+3.conf")
	if err := e.Bless(7); err != nil {
		t.Fatal(err)
	}
	if got := read(t, e, "/loader/entries/roost-rev-7.conf"); got != "tried" {
		t.Errorf("blessed %q", got)
	}
}

func TestFailed(t *testing.T) {
	e := newESP(t)
	touch(t, e, "roost-rev-5.conf", "roost-rev-6.conf", "roost-rev-7+0-3.conf", "roost-rev-8+0-1.conf", "roost-rev-9+0.conf", "roost-rev-10+2-1.conf", "debian+0-3.conf")
	got, err := e.Failed(6)
	if err != nil {
		t.Fatal(err)
	}
	want := []FailedRevision{
		{9, "boot entry roost-rev-9 ran out of tries (no tries left); booted revision 6"},
		{8, "boot entry roost-rev-8 ran out of tries (1 failed boot); booted revision 6"},
		{7, "boot entry roost-rev-7 ran out of tries (3 failed boots); booted revision 6"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Failed(6) =\n%+v\nwant\n%+v", got, want)
	}
	// The booted revision on its last try has not failed.
	got, _ = e.Failed(8)
	if len(got) != 2 || got[0].Number != 9 || got[1].Number != 7 || !strings.HasSuffix(got[1].Reason, "; booted revision 8") {
		t.Errorf("Failed(8) = %+v", got)
	}
	got, _ = e.Failed(0)
	if len(got) != 3 || !strings.HasSuffix(got[0].Reason, "; the booted revision is unknown") {
		t.Errorf("Failed(0) = %+v", got)
	}
	// A revision that also has a live entry is not failed.
	touch(t, e, "roost-rev-7.conf")
	if got, _ = e.Failed(6); len(got) != 2 {
		t.Errorf("Failed(6) with roost-rev-7.conf = %+v", got)
	}
	if got := FailedRevisions(nil, 6); got != nil {
		t.Errorf("FailedRevisions(nil) = %+v", got)
	}
}

func TestPrune(t *testing.T) {
	e := newESP(t)
	s5 := spec(t, 5, "kernel-a", "initrd-a")
	s6 := spec(t, 6, "kernel-a", "initrd-b") // shares 5's kernel
	s7 := spec(t, 7, "kernel-c", "initrd-b") // shares 6's initrd
	for _, s := range []StageSpec{s5, s6, s7} {
		if err := e.Stage(s); err != nil {
			t.Fatal(err)
		}
	}
	rename(t, e, "roost-rev-6+3.conf", "roost-rev-6.conf")
	// Files that are not Roost's, and leftovers of an interrupted Stage.
	for p, data := range map[string]string{
		"/loader/entries/debian.conf":                  "x",
		"/loader/loader.conf":                          "x",
		"/EFI/BOOT/BOOTX64.EFI":                        "x",
		"/roost/README":                                "x",
		"/roost/notes/a":                               "x",
		"/roost/rev-5/operator-notes":                  "x",
		"/roost/rev-3/" + tmpPrefix + "config.img-1":   "x",
		"/loader/entries/" + tmpPrefix + "roost-rev-8": "x",
	} {
		if err := mkdirs(e.path(p[:strings.LastIndex(p, "/")])); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(e.path(p), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Prune(6, 7); err != nil {
		t.Fatal(err)
	}
	a, b, c := s5.KernelSHA256[:16], s6.InitrdSHA256[:16], s7.KernelSHA256[:16]
	want := []string{
		"/EFI/BOOT/BOOTX64.EFI",
		"/loader/entries/debian.conf",
		"/loader/entries/roost-rev-6.conf",
		"/loader/entries/roost-rev-7+3.conf",
		"/loader/loader.conf",
		"/roost/README",
		"/roost/" + a + "/vmlinuz",
		"/roost/" + b + "/initrd.img",
		"/roost/" + c + "/vmlinuz",
		"/roost/notes/a",
		"/roost/rev-5/operator-notes",
		"/roost/rev-6/config.img",
		"/roost/rev-7/config.img",
	}
	sortStrings(want)
	if got := tree(t, e); !reflect.DeepEqual(got, want) {
		t.Errorf("after Prune(6, 7):\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := os.Stat(e.path("/roost/rev-3")); !os.IsNotExist(err) {
		t.Errorf("/roost/rev-3 still there: %v", err)
	}
	if _, err := os.Stat(e.path("/roost/" + s5.InitrdSHA256[:16])); !os.IsNotExist(err) {
		t.Errorf("revision 5's initrd folder still there: %v", err)
	}
	// Dropping 6 frees the shared kernel; 7 still boots.
	if err := e.Prune(7); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/roost/" + a + "/vmlinuz", "/roost/rev-6/config.img", "/loader/entries/roost-rev-6.conf"} {
		if _, err := os.Stat(e.path(p)); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	for _, p := range []string{"/roost/" + b + "/initrd.img", "/roost/" + c + "/vmlinuz", "/roost/rev-7/config.img"} {
		if _, err := os.Stat(e.path(p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if err := e.Prune(); err == nil {
		t.Error("Prune() = nil")
	}
}

func TestEntryFiles(t *testing.T) {
	got := entryFiles("title x\nlinux /roost/a/vmlinuz\ninitrd\t/roost/b/initrd.img\n  initrd roost/rev-1/config.img  \noptions initrd=/x\ndevicetree /dtb\nlinux\n")
	want := []string{"/roost/a/vmlinuz", "/roost/b/initrd.img", "/roost/rev-1/config.img", "/dtb"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entryFiles = %q, want %q", got, want)
	}
}

func sortStrings(s []string) { sort.Strings(s) }
