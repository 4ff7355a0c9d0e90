package agent

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestJournalctlArgs(t *testing.T) {
	j := Journalctl{PersistentDir: "/state/journal"}
	since := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		q    JournalQuery
		want []string
	}{
		{JournalQuery{}, []string{"--no-pager", "--quiet", "--output=short-iso", "--boot=0"}},
		{JournalQuery{Units: []string{"kubelet", "containerd.service"}, Follow: true, JSON: true},
			[]string{"--no-pager", "--quiet", "--output=json", "--boot=0", "--unit=kubelet", "--unit=containerd.service", "--follow"}},
		// an earlier boot: every machine ID's journal on STATE
		{JournalQuery{Boot: -1, Since: since, Lines: 50},
			[]string{"--no-pager", "--quiet", "--output=short-iso", "--boot=-1", "--directory=/state/journal", fmt.Sprintf("--since=@%d", since.Unix()), "--lines=50"}},
	} {
		if got := j.Args(c.q); !slices.Equal(got, c.want) {
			t.Errorf("Args(%+v) =\n %q\nwant\n %q", c.q, got, c.want)
		}
	}
	if got := (Journalctl{}).Args(JournalQuery{Boot: -2}); !slices.Contains(got, "--directory="+DefaultJournalDir) {
		t.Errorf("default directory: %q", got)
	}
}

// TestJournalctlPreviousBoot runs the real journalctl on journal files of
// two boots under two machine IDs, as an installed Server's STATE holds
// them (written by systemd-journal-remote from the export format): --boot
// -1 reads the older boot, --boot 0 of the directory the newer. Skipped
// without journalctl and systemd-journal-remote.
func TestJournalctlPreviousBoot(t *testing.T) {
	jc, err := exec.LookPath("journalctl")
	if err != nil {
		t.Skip("no journalctl")
	}
	remote := "/lib/systemd/systemd-journal-remote"
	if _, err := os.Stat(remote); err != nil {
		t.Skip("no systemd-journal-remote (Debian package systemd-journal-remote)")
	}
	dir := t.TempDir()
	now := time.Now()
	boots := []struct{ machine, boot, msg string }{
		{"11111111111111111111111111111111", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "kubelet: broken on purpose"},
		{"22222222222222222222222222222222", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "kubelet: healthy"},
	}
	for i, b := range boots {
		export := fmt.Sprintf("__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=1000\n_BOOT_ID=%s\n_MACHINE_ID=%s\n_HOSTNAME=worker-1\n"+
			"_SYSTEMD_UNIT=kubelet.service\nSYSLOG_IDENTIFIER=kubelet\nMESSAGE=%s\n\n"+
			"__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=2000\n_BOOT_ID=%s\n_MACHINE_ID=%s\n_HOSTNAME=worker-1\n"+
			"_SYSTEMD_UNIT=roost-agent.service\nSYSLOG_IDENTIFIER=roost-agent\nMESSAGE=agent of boot %d\n\n",
			now.Add(time.Duration(i-2)*time.Hour).UnixMicro(), b.boot, b.machine, b.msg,
			now.Add(time.Duration(i-2)*time.Hour+time.Second).UnixMicro(), b.boot, b.machine, i)
		in := filepath.Join(dir, b.machine+".export")
		if err := os.WriteFile(in, []byte(export), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "journal", b.machine), 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(remote, "-o", filepath.Join(dir, "journal", b.machine, "system.journal"), in).CombinedOutput(); err != nil {
			t.Fatalf("systemd-journal-remote: %v\n%s", err, out)
		}
	}
	j := Journalctl{Path: jc, PersistentDir: filepath.Join(dir, "journal")}
	read := func(q JournalQuery) string {
		var b bytes.Buffer
		if err := j.Read(context.Background(), q, &b); err != nil {
			t.Fatalf("Read(%+v): %v", q, err)
		}
		return b.String()
	}
	if out := read(JournalQuery{Boot: -1, Units: []string{"kubelet"}}); !strings.Contains(out, "kubelet: broken on purpose") || strings.Contains(out, "healthy") || strings.Contains(out, "agent of boot") {
		t.Errorf("boot -1, unit kubelet:\n%s", out)
	}
	if out := read(JournalQuery{Boot: -1, JSON: true, Lines: 1}); !strings.Contains(out, `"MESSAGE":"agent of boot 0"`) || strings.Count(out, "\n") != 1 {
		t.Errorf("boot -1, json, 1 line:\n%s", out)
	}
	// no earlier boot: journalctl's error reaches the caller
	var b bytes.Buffer
	if err := j.Read(context.Background(), JournalQuery{Boot: -5}, &b); err == nil || !strings.Contains(err.Error(), "journalctl") {
		t.Errorf("boot -5: %v\n%s", err, b.String())
	}
	// without a persistent journal (the enrollment image)
	none := Journalctl{Path: jc, PersistentDir: filepath.Join(dir, "missing")}
	if err := none.Read(context.Background(), JournalQuery{Boot: -1}, &b); err == nil || !strings.Contains(err.Error(), "no journal of earlier boots") {
		t.Errorf("no persistent journal: %v", err)
	}
}

func TestPruneJournals(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	mk := func(id string, size int, age time.Duration) {
		p := filepath.Join(dir, id)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(p, "system.journal")
		if err := os.WriteFile(f, make([]byte, size), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	id := func(c byte) string { return strings.Repeat(string(c), 32) }
	mk(id('c'), 900, 0)           // this boot: never touched
	mk(id('b'), 600, time.Hour)   // the boot before: always kept
	mk(id('a'), 300, 2*time.Hour) // within the bound with b
	mk(id('9'), 300, 3*time.Hour) // over it
	mk(id('8'), 10, 4*time.Hour)  // over it too (older than one removed)
	if err := os.Mkdir(filepath.Join(dir, "not-a-machine-id"), 0o755); err != nil {
		t.Fatal(err)
	}
	removed, err := PruneJournals(dir, id('c'), 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, id('9')), filepath.Join(dir, id('8'))}
	if !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	for _, keep := range []string{id('c'), id('b'), id('a'), "not-a-machine-id"} {
		if _, err := os.Stat(filepath.Join(dir, keep)); err != nil {
			t.Errorf("%s: %v", keep, err)
		}
	}
	// the newest earlier boot stays even when it alone is over the bound
	if removed, err := PruneJournals(dir, id('c'), 1); err != nil || !slices.Equal(removed, []string{filepath.Join(dir, id('a'))}) {
		t.Errorf("bound 1: removed %v, %v", removed, err)
	}
	if removed, err := PruneJournals(filepath.Join(dir, "missing"), id('c'), 1); err != nil || removed != nil {
		t.Errorf("missing dir: %v %v", removed, err)
	}
}
