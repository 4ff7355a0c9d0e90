package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const windowManifests = `apiVersion: roost.io/v1
kind: MaintenanceWindow
metadata:
  name: nightly
spec:
  rrule: FREQ=DAILY;BYHOUR=2;BYMINUTE=30
  duration: 4h
  timeZone: Europe/Berlin
---
apiVersion: roost.io/v1
kind: MaintenanceWindow
metadata:
  name: saturday-late
spec:
  rrule: FREQ=WEEKLY;BYDAY=SA;BYHOUR=22
  duration: 6h
  timeZone: Europe/Berlin
---
apiVersion: roost.io/v1
kind: MaintenanceWindow
metadata:
  name: new-york
spec:
  rrule: FREQ=WEEKLY;BYDAY=SU;BYHOUR=12
  duration: 1h
  timeZone: America/New_York
---
apiVersion: roost.io/v1
kind: MaintenanceWindow
metadata:
  name: three-nights
spec:
  rrule: FREQ=DAILY;BYHOUR=1;COUNT=3;DTSTART=20270326T000000
  duration: 1h
  timeZone: Europe/Berlin
---
apiVersion: roost.io/v1
kind: Pool
metadata:
  name: workers
spec:
  cluster: prod
  maintenanceWindows: [nightly, saturday-late, new-york]
---
apiVersion: roost.io/v1
kind: Pool
metadata:
  name: anytime
spec:
  cluster: prod
---
apiVersion: roost.io/v1
kind: Pool
metadata:
  name: broken
spec:
  cluster: prod
  maintenanceWindows: [nightly, gone]
`

func windowHub(t *testing.T) string {
	t.Helper()
	f := newFakeHub()
	for _, o := range mustDecode(t, windowManifests) {
		f.put(o)
	}
	cfg, _ := startFakeHub(t, f)
	return cfg
}

// The spring-forward night of 2027 in Berlin (March 28): 02:30 does not
// exist, the window opens at 03:00 CEST and lasts 4 real hours.
func TestWindowNextAcrossSpringForward(t *testing.T) {
	cfg := windowHub(t)
	r := runCLI(t, "", "--config", cfg, "window", "next", "nightly", "--from", "2027-03-27T00:00:00Z", "-n", "3")
	want := `START                       END                         START (UTC)        END (UTC)          WINDOW
Sat 2027-03-27 02:30 CET    Sat 2027-03-27 06:30 CET    2027-03-27 01:30   2027-03-27 05:30   nightly
Sun 2027-03-28 03:00 CEST   Sun 2027-03-28 07:00 CEST   2027-03-28 01:00   2027-03-28 05:00   nightly
Mon 2027-03-29 02:30 CEST   Mon 2027-03-29 06:30 CEST   2027-03-29 00:30   2027-03-29 04:30   nightly
`
	if r.code != 0 || r.out != want || r.err != "" {
		t.Fatalf("code %d\nstdout:\n%s\nwant:\n%s\nstderr:\n%s", r.code, r.out, want, r.err)
	}
}

// An opening that started before --from and is still open comes first.
func TestWindowNextOpenNow(t *testing.T) {
	cfg := windowHub(t)
	r := runCLI(t, "", "--config", cfg, "window", "next", "nightly", "--from", "2026-11-03T04:00:00Z", "-n", "1")
	if r.code != 0 || !strings.Contains(r.out, "Tue 2026-11-03 02:30 CET") {
		t.Fatalf("code %d\n%s%s", r.code, r.out, r.err)
	}
}

func TestWindowNextPoolMerges(t *testing.T) {
	cfg := windowHub(t)
	// Saturday 2026-11-07: saturday-late opens 22:00 (6h, to 04:00), nightly
	// opens 02:30 Sunday inside it (to 06:30): one merged opening.
	r := runCLI(t, "", "--config", cfg, "window", "next", "--pool", "workers", "--from", "2026-11-07T12:00:00Z", "-n", "3")
	want := `START                      END                        START (UTC)        END (UTC)          WINDOW
Sat 2026-11-07 22:00 CET   Sun 2026-11-08 06:30 CET   2026-11-07 21:00   2026-11-08 05:30   saturday-late,nightly
Sun 2026-11-08 12:00 EST   Sun 2026-11-08 13:00 EST   2026-11-08 17:00   2026-11-08 18:00   new-york
Mon 2026-11-09 02:30 CET   Mon 2026-11-09 06:30 CET   2026-11-09 01:30   2026-11-09 05:30   nightly
`
	if r.code != 0 || r.out != want {
		t.Fatalf("code %d\nstdout:\n%s\nwant:\n%s\nstderr:\n%s", r.code, r.out, want, r.err)
	}
}

func TestWindowNextJSON(t *testing.T) {
	cfg := windowHub(t)
	r := runCLI(t, "", "--config", cfg, "window", "next", "--pool", "workers", "--from", "2026-11-07T12:00:00Z", "-n", "2", "-o", "json")
	if r.code != 0 {
		t.Fatalf("code %d: %s", r.code, r.err)
	}
	var got []map[string]string
	if err := json.Unmarshal([]byte(r.out), &got); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	want := []map[string]string{
		{"window": "saturday-late,nightly", "start": "2026-11-07T22:00:00+01:00", "end": "2026-11-08T06:30:00+01:00",
			"startUTC": "2026-11-07T21:00:00Z", "endUTC": "2026-11-08T05:30:00Z", "timeZone": "Europe/Berlin"},
		{"window": "new-york", "start": "2026-11-08T12:00:00-05:00", "end": "2026-11-08T13:00:00-05:00",
			"startUTC": "2026-11-08T17:00:00Z", "endUTC": "2026-11-08T18:00:00Z", "timeZone": "America/New_York"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d openings, want %d:\n%s", len(got), len(want), r.out)
	}
	for i := range want {
		for k, v := range want[i] {
			if got[i][k] != v {
				t.Errorf("opening %d: %s = %q, want %q", i, k, got[i][k], v)
			}
		}
	}
	y := runCLI(t, "", "--config", cfg, "window", "next", "nightly", "--from", "2026-11-07T12:00:00Z", "-n", "1", "-o", "yaml")
	if y.code != 0 || !strings.Contains(y.out, "- window: nightly\n  start: \"2026-11-08T02:30:00+01:00\"") {
		t.Fatalf("code %d\n%s%s", y.code, y.out, y.err)
	}
}

func TestWindowNextPoolWithoutWindows(t *testing.T) {
	cfg := windowHub(t)
	r := runCLI(t, "", "--config", cfg, "window", "next", "--pool", "anytime")
	if r.code != 0 || r.out != "pool anytime has no maintenance windows: reboots may start at any time\n" {
		t.Fatalf("code %d\n%s%s", r.code, r.out, r.err)
	}
	j := runCLI(t, "", "--config", cfg, "window", "next", "--pool", "anytime", "-o", "json")
	if j.code != 0 || strings.TrimSpace(j.out) != "[]" || !strings.Contains(j.err, "reboots may start at any time") {
		t.Fatalf("code %d\n%s%s", j.code, j.out, j.err)
	}
}

func TestWindowNextRuleEnds(t *testing.T) {
	cfg := windowHub(t)
	r := runCLI(t, "", "--config", cfg, "window", "next", "three-nights", "--from", "2027-03-01T00:00:00Z")
	// 26 March 01:00 CET, 27 March 01:00 CET, 28 March 01:00 CET (before the jump).
	if r.code != 0 || strings.Count(r.out, "\n") != 4 || !strings.Contains(r.out, "Sun 2027-03-28 01:00 CET") {
		t.Fatalf("code %d\n%s%s", r.code, r.out, r.err)
	}
	if !strings.Contains(r.err, "note: window three-nights has only 3 more opening(s) after 2027-03-01T00:00:00Z") {
		t.Errorf("stderr: %s", r.err)
	}
}

func TestWindowNextErrors(t *testing.T) {
	cfg := windowHub(t)
	for _, c := range []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"no window", []string{"window", "next"}, ExitUsage, "name a WINDOW, or a pool with --pool"},
		{"both", []string{"window", "next", "nightly", "--pool", "workers"}, ExitUsage, "give a WINDOW or --pool, not both"},
		{"bad from", []string{"window", "next", "nightly", "--from", "tomorrow"}, ExitUsage, `--from "tomorrow" is not an RFC 3339 time`},
		{"bad n", []string{"window", "next", "nightly", "-n", "0"}, ExitUsage, "-n must be from 1 to 1000, got 0"},
		{"bad output", []string{"window", "next", "nightly", "-o", "wide"}, ExitUsage, `--output "wide": use table, json or yaml`},
		{"unknown window", []string{"window", "next", "weekly"}, ExitFailed, `no MaintenanceWindow "weekly" in the hub`},
		{"unknown pool", []string{"window", "next", "--pool", "nope"}, ExitFailed, `no Pool "nope" in the hub`},
		{"pool lists missing window", []string{"window", "next", "--pool", "broken"}, ExitFailed, `pool broken lists the MaintenanceWindow "gone", which does not exist in the hub`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, "", append([]string{"--config", cfg}, c.args...)...)
			if r.code != c.code || !strings.Contains(r.err, c.err) {
				t.Fatalf("code %d (want %d)\nstderr: %s\nwant: %s", r.code, c.code, r.err, c.err)
			}
		})
	}
}

// -f reads windows from manifests and checks them as apply does, without a hub.
func TestWindowNextFromFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.yaml")
	if err := os.WriteFile(path, []byte(windowManifests), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "", "window", "next", "--pool", "workers", "-f", path, "--from", "2026-11-07T12:00:00Z", "-n", "1")
	if r.code != 0 || !strings.Contains(r.out, "saturday-late,nightly") {
		t.Fatalf("code %d\n%s%s", r.code, r.out, r.err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(windowManifests, "duration: 4h", "duration: 36h", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "", "window", "next", "nightly", "-f", bad)
	if r.code != ExitUsage || !strings.Contains(r.err, "spec.duration: must be at most 24h, got 36h (split it into two windows)") {
		t.Fatalf("code %d\n%s%s", r.code, r.out, r.err)
	}
}
