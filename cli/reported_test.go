package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/client"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
	"github.com/roostfleet/roost/snapshot"
)

// More problems a new user reported (see regressions_test.go).

// poolWithAnnotation is poolYAML named name with an annotation of size
// bytes.
func poolWithAnnotation(name string, size int) string {
	return strings.Replace(poolYAML, "  name: workers\n", "  name: "+name+"\n  annotations:\n    note: "+strings.Repeat("x", size)+"\n", 1)
}

// An object of 5 MiB failed in gRPC ("received message larger than max",
// exit 1) while one of 1 MiB got the hub's "more than the limit" (exit 2):
// both are now refused before anything is sent.
func TestApplyOversizedObject(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	dir := t.TempDir()
	for _, size := range []int{1 << 20, 5 << 20} {
		file := writeFile(t, dir, fmt.Sprintf("big-%d.yaml", size), clusterYAML+"---\n"+poolWithAnnotation("workers", size))
		r := runCLI(t, "", "--config", config, "apply", "-f", file)
		want := fmt.Sprintf("error: 1 problem in the manifests; nothing was sent to the hub:\n%s:9:1: Pool \"workers\": object is ", file)
		if r.code != ExitUsage || !strings.HasPrefix(r.err, want) ||
			!strings.Contains(r.err, fmt.Sprintf(" bytes, more than the limit of %d", resource.MaxObjectBytes)) || strings.Contains(r.err, "grpc") {
			t.Errorf("apply of a %d-byte annotation: exit %d, stderr %q", size, r.code, r.err)
		}
	}
	// Just below the limit is sent.
	file := writeFile(t, dir, "fits.yaml", poolWithAnnotation("workers", resource.MaxObjectBytes-1024))
	if r := runCLI(t, "", "--config", config, "apply", "-f", file); r.code != ExitOK {
		t.Errorf("apply of an object below the limit: exit %d, stderr %q", r.code, r.err)
	}
	if len(f.applies) != 1 {
		t.Errorf("the hub got %d applies, want 1 (oversized objects are not sent)", len(f.applies))
	}
}

// Objects each below the limit may together exceed what the hub reads in
// one message: gRPC's ResourceExhausted becomes a message that says what
// to do, and bad input (exit code 2).
func TestApplyRequestTooLarge(t *testing.T) {
	f := newFakeHub() // a gRPC server with the default 4 MiB limit, as roost-hub
	config, _ := startFakeHub(t, f)
	var b strings.Builder
	for i := range 24 {
		fmt.Fprintf(&b, "---\n%s", poolWithAnnotation(fmt.Sprintf("workers-%d", i), 200<<10))
	}
	file := writeFile(t, t.TempDir(), "many.yaml", b.String())
	r := runCLI(t, "", "--config", config, "apply", "-f", file)
	if r.code != ExitUsage || !strings.HasPrefix(r.err, "error: the request is ") ||
		!strings.Contains(r.err, "more than the hub accepts in one message (4194304): send less at a time") {
		t.Errorf("apply of 24 objects of 200 KiB: exit %d, stderr %q", r.code, r.err)
	}

	o := &options{}
	err := o.wrapCallError(status.Error(codes.ResourceExhausted, fmt.Sprintf("grpc: received message larger than max (%d vs. %d)", client.MaxMessageBytes+1, client.MaxMessageBytes)))
	if exitCode(err) != ExitFailed || !strings.Contains(err.Error(), "the hub's answer is") {
		t.Errorf("answer too large: exit %d, %v", exitCode(err), err)
	}
	// Other ResourceExhausted errors are the hub's, unchanged.
	err = o.wrapCallError(status.Error(codes.ResourceExhausted, "pool workers: 2 Leases held"))
	if !isHubError(err) || exitCode(err) != ExitFailed {
		t.Errorf("hub's ResourceExhausted: exit %d, %v", exitCode(err), err)
	}
}

// Problems with local files exited 1 (the hub refused), and a missing
// snapshot file was reported without its name.
func TestLocalFileProblemsExit2(t *testing.T) {
	dir := t.TempDir()
	notSnap := writeFile(t, dir, "passwd", "root:x:0:0:root:/root:/bin/bash\n")
	var buf bytes.Buffer
	state := []byte(strings.Repeat("state", 1000))
	info := &roostv1.SnapshotInfo{Index: 7, SizeBytes: uint64(len(state)), Sha256: snapshot.Digest(state), TakenAt: timestamppb.New(testNow)}
	if err := snapshot.WriteFile(&buf, info, state); err != nil {
		t.Fatal(err)
	}
	good := writeFile(t, dir, "good.snap", buf.String())
	truncated := writeFile(t, dir, "truncated.snap", buf.String()[:buf.Len()/2])
	missing := filepath.Join(dir, "nosuch.snap")
	noConfig := "/nonexistent/config"

	if r := runCLI(t, "", "--config", noConfig, "hub", "snapshot", "inspect", good); r.code != ExitOK || !strings.Contains(r.out, "Index:") {
		t.Fatalf("inspect of a good snapshot: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"inspect not a snapshot", []string{"hub", "snapshot", "inspect", notSnap}, notSnap + ": not a hub snapshot"},
		{"inspect truncated", []string{"hub", "snapshot", "inspect", truncated}, truncated + ": the snapshot is damaged or truncated"},
		{"inspect missing", []string{"hub", "snapshot", "inspect", missing}, missing + ": no such file or directory"},
		{"inspect a directory", []string{"hub", "snapshot", "inspect", dir}, dir + " is a directory"},
		{"restore truncated", []string{"hub", "snapshot", "restore", truncated}, truncated + ": the snapshot is damaged or truncated"},
		{"restore missing", []string{"hub", "snapshot", "restore", missing}, missing + ": no such file or directory"},
		{"save to a missing directory", []string{"hub", "snapshot", "save", "/nonexistent/dir/x.snap"}, "cannot write /nonexistent/dir/x.snap: directory /nonexistent/dir does not exist"},
		{"save below a file", []string{"hub", "snapshot", "save", filepath.Join(notSnap, "x.snap")}, "cannot write " + filepath.Join(notSnap, "x.snap") + ": " + notSnap + " is not a directory"},
	} {
		r := runCLI(t, "", append([]string{"--config", noConfig}, tc.args...)...)
		if r.code != ExitUsage || !strings.HasPrefix(r.err, "error: "+tc.want) {
			t.Errorf("%s: exit %d, stderr %q, want exit 2 with %q", tc.name, r.code, r.err, "error: "+tc.want)
		}
	}

	// window next -f: what the manifests lack is invalid input, named.
	manifests := writeFile(t, dir, "windows.yaml", windowManifests)
	clusterOnly := writeFile(t, dir, "cluster.yaml", clusterYAML)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"window", "next", "weekly", "-f", clusterOnly}, `error: no MaintenanceWindow "weekly" in ` + clusterOnly + "\n"},
		{[]string{"window", "next", "--pool", "nope", "-f", manifests, "-f", clusterOnly}, `error: no Pool "nope" in ` + manifests + ", " + clusterOnly + "\n"},
		{[]string{"window", "next", "--pool", "workers", "-f", "-"}, `error: pool workers lists the MaintenanceWindow "nightly", which does not exist in standard input` + "\n"},
	} {
		stdin := ""
		if tc.args[len(tc.args)-1] == "-" {
			stdin = strings.Split(windowManifests, "---\n")[4] // the pool workers alone
		}
		r := runCLI(t, stdin, append([]string{"--config", noConfig}, tc.args...)...)
		if r.code != ExitUsage || r.err != tc.want {
			t.Errorf("%s: exit %d, stderr %q, want exit 2 with %q", strings.Join(tc.args, " "), r.code, r.err, tc.want)
		}
	}
}

// get -o yaml printed nothing for no objects, -o json an empty List.
func TestGetYAMLEmptyList(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	r := runCLI(t, "", "--config", config, "get", "pools", "-o", "yaml")
	want := "apiVersion: " + resource.APIVersion + "\nkind: List\nitems: []\n"
	if r.code != ExitOK || r.out != want || r.err != "" {
		t.Errorf("get pools -o yaml: exit %d, stdout %q, want %q, stderr %q", r.code, r.out, want, r.err)
	}
	// It reads back as no objects, as the json form does.
	for _, format := range []string{"yaml", "json"} {
		r := runCLI(t, "", "--config", config, "get", "pools", "-o", format)
		ms, err := resource.Decode([]byte(r.out), "get."+format)
		if err != nil || len(ms) != 0 {
			t.Errorf("-o %s %q decodes to %d objects, %v", format, r.out, len(ms), err)
		}
	}
}

// rollout status showed NEXT WINDOW <none> (which means no windows) for a
// pool whose only window has ended.
func TestRolloutStatusNextWindow(t *testing.T) {
	f := newFakeHub()
	window := func(name, rrule string, d string) {
		ms := mustDecode(t, fmt.Sprintf("apiVersion: roost.io/v1\nkind: MaintenanceWindow\nmetadata: {name: %s}\nspec: {rrule: %q, duration: %s, timeZone: UTC}\n", name, rrule, d))
		f.put(ms[0])
	}
	window("ended", "FREQ=DAILY;BYHOUR=1;COUNT=3;DTSTART=20200326T000000", "1h")
	window("always", "FREQ=HOURLY;BYMINUTE=0", "1h")
	pool := func(name string, windows ...string) {
		p := rolloutPool(name, "Waiting", "no maintenance window of the pool is open")
		p.GetPool().Spec.MaintenanceWindows = windows
		f.put(p)
	}
	pool("ended", "ended")
	pool("open", "always", "ended")
	pool("missing", "gone")
	pool("anytime")
	next := rolloutPool("next", "Waiting", "")
	next.GetPool().Spec.MaintenanceWindows = []string{"ended"}
	next.GetPool().Status.Rollout.NextWindowStart = timestamppb.New(testNow)
	f.put(next)
	config, _ := startFakeHub(t, f)

	r := runCLI(t, "", "--config", config, "rollout", "status")
	if r.code != ExitOK || r.err != "" {
		t.Fatalf("rollout status: exit %d, stderr %q", r.code, r.err)
	}
	want := map[string]string{"ended": "never", "open": "open now", "missing": "never", "anytime": "<none>", "next": testNow.Local().Format("2006-01-02 15:04 MST")}
	for _, l := range strings.Split(strings.TrimSpace(r.out), "\n")[1:] {
		var cols []string
		for _, c := range strings.Split(l, "   ") {
			if c = strings.TrimSpace(c); c != "" {
				cols = append(cols, c)
			}
		}
		if len(cols) < 8 || !strings.HasPrefix(cols[6], want[cols[0]]) {
			t.Errorf("NEXT WINDOW of pool %s: got %q, want %q\n%s", cols[0], cols, want[cols[0]], r.out)
		}
	}
}

// image promote -o said "a line per created object"; promote creates
// nothing.
func TestImagePromoteOutputHelp(t *testing.T) {
	r := runCLI(t, "", "image", "promote", "--help")
	if r.code != ExitOK || strings.Contains(r.out, "created object") || !strings.Contains(r.out, "a line saying what changed") {
		t.Errorf("image promote --help: exit %d\n%s", r.code, r.out)
	}
}

// apply refused a "kind: List" with kubectl's "apiVersion: v1".
func TestApplyKubectlList(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	indent := func(s string) string {
		return "- " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
	}
	list := "apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: \"\"\nitems:\n" + indent(clusterYAML) + indent(poolYAML)
	file := writeFile(t, t.TempDir(), "list.yaml", list)
	r := runCLI(t, "", "--config", config, "apply", "-f", file)
	if r.code != ExitOK || r.out != "cluster/prod created\npool/workers created\n" {
		t.Errorf("apply of an apiVersion v1 List: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(list, "apiVersion: v1\nkind: List", "apiVersion: apps/v1\nkind: List", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "", "--config", config, "apply", "-f", file); r.code != ExitUsage || !strings.Contains(r.err, `unsupported apiVersion "apps/v1"`) {
		t.Errorf("apply of an apps/v1 List: exit %d, stderr %q", r.code, r.err)
	}
}
