package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roostfleet/roost/cli/printers"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
	"github.com/roostfleet/roost/syncbuf"
)

// These tests run roostctl against fakeHub, an in-memory HubService served
// over TLS: they check what the CLI sends and prints, not the hub.

func manifestDir(t *testing.T) (dir, cluster, pool string) {
	dir = t.TempDir()
	cluster = writeFile(t, dir, "1-cluster.yaml", clusterYAML)
	pool = writeFile(t, dir, "2-pool.yaml", poolYAML)
	return dir, cluster, pool
}

func TestApply(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	dir, _, pool := manifestDir(t)

	r := runCLI(t, "", "--config", config, "apply", "-f", dir)
	if r.code != 0 || r.out != "cluster/prod created\npool/workers created\n" {
		t.Fatalf("first apply: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	if len(f.applies) != 1 || len(f.applies[0].GetObjects()) != 2 || f.applies[0].GetDryRun() {
		t.Fatalf("want one apply of both objects, got %v", f.applies)
	}
	if _, k := resource.Unwrap(f.applies[0].GetObjects()[0]); k.Name != "Cluster" {
		t.Errorf("objects not sent in file order: first is %s", k.Name)
	}

	r = runCLI(t, "", "--config", config, "apply", "-f", dir)
	if r.code != 0 || r.out != "cluster/prod unchanged\npool/workers unchanged\n" {
		t.Errorf("second apply: exit %d, out %q, err %q", r.code, r.out, r.err)
	}

	writeFile(t, dir, filepath.Base(pool), strings.Replace(poolYAML, "replicas: 3", "replicas: 5", 1))
	r = runCLI(t, "", "--config", config, "apply", "-f", dir, "--dry-run")
	if r.code != 0 || r.out != "cluster/prod unchanged (dry run)\npool/workers configured (dry run)\n" {
		t.Errorf("dry run: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	if !f.applies[2].GetDryRun() {
		t.Errorf("--dry-run not sent")
	}

	r = runCLI(t, "", "--config", config, "apply", "-f", pool, "-o", "json")
	var out applyOutput
	if err := json.Unmarshal([]byte(r.out), &out); err != nil || r.code != 0 {
		t.Fatalf("-o json: exit %d, %v: %q", r.code, err, r.out)
	}
	if len(out.Results) != 1 || out.Results[0] != (applyResultJSON{Kind: "Pool", Name: "workers", Action: "configured"}) || out.Index == 0 {
		t.Errorf("-o json: %+v", out)
	}
	r = runCLI(t, "", "--config", config, "apply", "-f", pool, "-o", "yaml")
	if r.code != 0 || !strings.Contains(r.out, "results:\n  - kind: Pool\n    name: workers\n    action: unchanged\n") {
		t.Errorf("-o yaml: exit %d, out %q", r.code, r.out)
	}

	// Standard input.
	r = runCLI(t, strings.Replace(clusterYAML, "name: prod", "name: dev", 1), "--config", config, "apply", "-f", "-")
	if r.code != 0 || r.out != "cluster/dev created\n" {
		t.Errorf("stdin: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
}

func TestApplyHubViolationsPointAtManifests(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	dir, _, pool := manifestDir(t)

	f.applyErr = apierror.FailedPreconditionFields("dangling references",
		apierror.Violation{Field: "objects[1].spec.cluster", Message: `Cluster "prod" does not exist`, Hint: "apply the Cluster first"},
		apierror.Violation{Field: "objects[1].spec.machineClass", Message: "missing"},
		apierror.Violation{Field: "objects", Message: "general"})
	r := runCLI(t, "", "--config", config, "apply", "-f", dir)
	if r.code != ExitFailed {
		t.Errorf("FailedPrecondition: exit %d, want 1", r.code)
	}
	want := "Error from hub: dangling references; nothing was applied:\n" +
		pool + `:7:1: Pool "workers": spec.machineClass: missing` + "\n" + // at its parent, in line order
		pool + `:8:3: Pool "workers": spec.cluster: Cluster "prod" does not exist (apply the Cluster first)` + "\n" +
		"  objects: general\n"
	if r.err != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", r.err, want)
	}

	f.applyErr = apierror.Invalid("invalid objects", apierror.Violation{Field: "objects[0].spec.apiEndpoint", Message: "bad"})
	r = runCLI(t, "", "--config", config, "apply", "-f", dir)
	if r.code != ExitUsage || !strings.Contains(r.err, filepath.Join(dir, "1-cluster.yaml")+`:6:3: Cluster "prod": spec.apiEndpoint: bad`) {
		t.Errorf("InvalidArgument: exit %d, stderr %q", r.code, r.err)
	}

	f.applyErr = apierror.FailedPrecondition("no leader")
	r = runCLI(t, "", "--config", config, "apply", "-f", dir)
	if r.code != ExitFailed || r.err != "Error from hub: no leader\n" {
		t.Errorf("plain refusal: exit %d, stderr %q", r.code, r.err)
	}
}

func seedObjects(t *testing.T, f *fakeHub) {
	for _, o := range mustDecode(t, clusterYAML+"---\n"+poolYAML+"---\n"+strings.ReplaceAll(poolYAML, "workers", "gpu")) {
		f.put(o)
	}
	f.index = 7
}

func TestGet(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	seedObjects(t, f)
	pools := []*roostv1.Object{f.objects["Pool/gpu"], f.objects["Pool/workers"]}

	r := runCLI(t, "", "--config", config, "get", "pools")
	var want strings.Builder
	printers.PrintTable(&want, pools, false, testNow)
	if r.code != 0 || r.out != want.String() {
		t.Errorf("table: exit %d\n got %q\nwant %q", r.code, r.out, want.String())
	}
	if got := f.lists[0]; got.GetKind() != "Pool" || got.GetConsistency() != roostv1.Consistency_CONSISTENCY_LINEARIZABLE || got.GetLabelSelector() != "" {
		t.Errorf("list request %v", got)
	}

	r = runCLI(t, "", "--config", config, "get", "pl", "-o", "wide", "--stale", "-l", "env=prod")
	want.Reset()
	printers.PrintTable(&want, pools, true, testNow)
	if r.code != 0 || r.out != want.String() {
		t.Errorf("wide: exit %d\n got %q\nwant %q", r.code, r.out, want.String())
	}
	if got := f.lists[1]; got.GetConsistency() != roostv1.Consistency_CONSISTENCY_STALE || got.GetLabelSelector() != "env=prod" {
		t.Errorf("list request %v", got)
	}

	r = runCLI(t, "", "--config", config, "get", "Pool", "-o", "name")
	if r.out != "pool/gpu\npool/workers\n" {
		t.Errorf("-o name: %q", r.out)
	}

	r = runCLI(t, "", "--config", config, "get", "pools", "-o", "yaml")
	yaml, _ := resource.Encode(pools, "yaml")
	if r.out != string(yaml) {
		t.Errorf("-o yaml:\n%s\nwant\n%s", r.out, yaml)
	}

	// One object by name: the object itself; a list of one: a List.
	r = runCLI(t, "", "--config", config, "get", "pool", "gpu", "-o", "json")
	one, _ := resource.Encode(pools[:1], "json")
	if r.out != string(one) {
		t.Errorf("get NAME -o json:\n%s\nwant\n%s", r.out, one)
	}
	r = runCLI(t, "", "--config", config, "get", "clusters", "-o", "json")
	var list struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.out), &list); err != nil || list.Kind != "List" || len(list.Items) != 1 {
		t.Errorf("list of one as json: %v, %q", err, r.out)
	}
	two, _ := resource.Encode(pools, "json")
	r = runCLI(t, "", "--config", config, "get", "pools", "-o", "json")
	if r.out != string(two) {
		t.Errorf("list of two as json differs from resource.Encode")
	}
	// The hand-made List of one has the layout of resource.Encode's.
	doubled, _ := resource.Encode([]*roostv1.Object{f.objects["Cluster/prod"], f.objects["Cluster/prod"]}, "json")
	runOne := runCLI(t, "", "--config", config, "get", "clusters", "-o", "json").out
	if !strings.HasPrefix(string(doubled), strings.TrimSuffix(runOne, "\n    ]\n}\n")) {
		t.Errorf("List of one is laid out differently from resource.Encode:\n%s\nvs\n%s", runOne, doubled)
	}

	r = runCLI(t, "", "--config", config, "get", "machineclasses")
	if r.code != 0 || r.out != "" || r.err != "No machineclasses found.\n" {
		t.Errorf("empty: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
}

func TestGetMissing(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	seedObjects(t, f)

	r := runCLI(t, "", "--config", config, "get", "pool", "x")
	if r.code != ExitFailed || r.err != "Error from hub: Pool \"x\" not found\n" || r.out != "" {
		t.Errorf("missing: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	r = runCLI(t, "", "--config", config, "get", "pool", "workers", "x", "-o", "name")
	if r.code != ExitFailed || r.err != "Error from hub: Pool \"x\" not found\n" || r.out != "pool/workers\n" {
		t.Errorf("found and missing: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
}

func TestDescribe(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	seedObjects(t, f)
	r := runCLI(t, "", "--config", config, "describe", "pool", "workers")
	if r.code != 0 || !strings.Contains(r.out, "workers") || !strings.Contains(r.out, "prod") {
		t.Errorf("describe: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	r = runCLI(t, "", "--config", config, "describe", "cluster", "nope")
	if r.code != ExitFailed || r.err != "Error from hub: Cluster \"nope\" not found\n" {
		t.Errorf("describe missing: exit %d, err %q", r.code, r.err)
	}
}

func TestDelete(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	seedObjects(t, f)
	dir, _, _ := manifestDir(t)

	r := runCLI(t, "", "--config", config, "delete", "pool", "gpu", "missing", "workers")
	if r.code != ExitFailed || r.out != "pool/gpu deleted\npool/workers deleted\n" || r.err != "Error from hub: Pool \"missing\" not found\n" {
		t.Errorf("delete: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	r = runCLI(t, "", "--config", config, "delete", "pool", "gone", "--ignore-not-found")
	if r.code != 0 || r.out != "" || r.err != "" {
		t.Errorf("--ignore-not-found: exit %d, out %q, err %q", r.code, r.out, r.err)
	}

	seedObjects(t, f)
	f.deletes = nil
	r = runCLI(t, "", "--config", config, "delete", "-f", dir)
	if r.code != 0 || r.out != "pool/workers deleted\ncluster/prod deleted\n" {
		t.Errorf("delete -f: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	if strings.Join(f.deletes, " ") != "Pool/workers Cluster/prod" {
		t.Errorf("deletes in order %v, want dependents first", f.deletes)
	}
}

func TestHubCommands(t *testing.T) {
	f := newFakeHub()
	config, addr := startFakeHub(t, f)
	f.members = []*roostv1.Member{
		{Id: "hub-a", RaftAddress: "10.0.0.1:9444", ApiAddress: "10.0.0.1:7443", Suffrage: "Voter", Leader: true, HubVersion: "v0.3.0", RulesVersion: 2, Health: "Healthy"},
		{Id: "hub-b", RaftAddress: "10.0.0.2:7444", ApiAddress: "10.0.0.2:7443", Suffrage: "Voter", Health: "Unreachable", HealthMessage: "no answer within 1s"},
	}
	r := runCLI(t, "", "--config", config, "hub", "members")
	want := "ID      RAFT ADDRESS    API ADDRESS     SUFFRAGE   LEADER   STATUS        VERSION\n" +
		"hub-a   10.0.0.1:9444   10.0.0.1:7443   Voter      *        Healthy       v0.3.0\n" +
		"hub-b   10.0.0.2:7444   10.0.0.2:7443   Voter               Unreachable   ?\n" +
		"\nhub-b is Unreachable: no answer within 1s\n"
	if r.code != 0 || r.out != want {
		t.Errorf("members: exit %d\n%s\nwant\n%s", r.code, r.out, want)
	}
	r = runCLI(t, "", "--config", config, "hub", "members", "-o", "json")
	var ms membersJSON
	if err := json.Unmarshal([]byte(r.out), &ms); err != nil || len(ms.Members) != 2 || !ms.Members[0].Leader || ms.Members[1].APIAddress != "10.0.0.2:7443" ||
		ms.Members[0].Version != "v0.3.0" || ms.Members[0].RulesVersion != 2 || ms.Members[1].Version != "" {
		t.Errorf("members -o json: %v %q", err, r.out)
	}

	r = runCLI(t, "", "--config", config, "hub", "join", "--ttl", "2h", "--uses", "2")
	if r.code != 0 || !strings.Contains(r.out, "R1abc::id.secret") || !strings.Contains(r.out, "2 uses, expires 2026-11-03T14:00:00Z") ||
		!strings.Contains(r.out, "roost-hub --data-dir /var/lib/roost-hub --api-addr HOST:7443 --raft-addr HOST:9444 --http-addr HOST:7480 --join 10.0.0.1:7443 --join-token R1abc::id.secret\n") {
		t.Errorf("join: exit %d, out:\n%s", r.code, r.out)
	}
	r = runCLI(t, "", "--config", config, "hub", "join", "-o", "json")
	var tok joinJSON
	if err := json.Unmarshal([]byte(r.out), &tok); err != nil || tok.Token != "R1abc::id.secret" || tok.ExpiresAt != "2026-11-03T13:00:00Z" || len(tok.APIAddresses) != 2 {
		t.Errorf("join -o json: %v %q", err, r.out)
	}

	r = runCLI(t, "", "--config", config, "hub", "remove", "hub-b")
	if r.code != 0 || r.out != "member hub-b removed\n" || len(f.removed) != 1 {
		t.Errorf("remove: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	r = runCLI(t, "", "--config", config, "hub", "remove", "hub-z")
	if r.code != ExitFailed {
		t.Errorf("remove unknown: exit %d", r.code)
	}

	r = runCLI(t, "", "--config", config, "version")
	if r.code != 0 || !strings.Contains(r.out, "Hub:    2 members, leader hub-a (10.0.0.1:7443), roost-hub v0.3.0\n") {
		t.Errorf("version: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	_ = addr
}

func TestUnreachableAndFailover(t *testing.T) {
	f := newFakeHub()
	config, good := startFakeHub(t, f)
	seedObjects(t, f)
	dead := closedAddr(t)

	r := runCLI(t, "", "--config", config, "--hub", dead, "get", "pools")
	t.Logf("unreachable:\n%s", r.err)
	if r.code != ExitUnreachable || !strings.HasPrefix(r.err, "error: hub unreachable: ") || !strings.Contains(r.err, "tried "+dead+" (from --hub)") {
		t.Errorf("dead hub: exit %d, err %q", r.code, r.err)
	}
	// Writes too: apply reads and validates, then finds no hub.
	dir, _, _ := manifestDir(t)
	r = runCLI(t, "", "--config", config, "--hub", dead, "apply", "-f", dir)
	if r.code != ExitUnreachable {
		t.Errorf("apply to a dead hub: exit %d, err %q", r.code, r.err)
	}

	// A dead member first in the list: the call fails over to the live one.
	for i := 0; i < 3; i++ {
		r = runCLI(t, "", "--config", config, "--hub", dead+","+good, "get", "pools", "-o", "name")
		if r.code != 0 || r.out != "pool/gpu\npool/workers\n" {
			t.Errorf("failover: exit %d, out %q, err %q", r.code, r.out, r.err)
		}
	}

	f.listDelay = 2 * time.Second
	r = runCLI(t, "", "--config", config, "--timeout", "200ms", "get", "pools")
	t.Logf("timeout:\n%s", r.err)
	if r.code != ExitUnreachable || !strings.Contains(r.err, "did not answer in time") || !strings.Contains(r.err, "waited 200ms (--timeout)") {
		t.Errorf("timeout: exit %d, err %q", r.code, r.err)
	}
}

func TestVerbose(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	r := runCLI(t, "", "--config", config, "-v", "get", "pools")
	for _, want := range []string{"roostctl: reading client configuration " + config, "roostctl: /roost.v1.HubService/List: OK in "} {
		if !strings.Contains(r.err, want) {
			t.Errorf("-v: stderr lacks %q:\n%s", want, r.err)
		}
	}
}

// watchNames runs `roostctl get pools -w -o name` until it printed want
// (at most 10 s), then interrupts it; it must exit 0 having printed want.
func watchNames(t *testing.T, config, want string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncbuf.Buffer
	done := make(chan result)
	go func() {
		done <- runCLIStreams(ctx, "", &out, &errb, "--config", config, "get", "pools", "-w", "-o", "name")
	}()
	deadline := time.Now().Add(10 * time.Second)
	for out.String() != want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	r := <-done
	if r.code != 0 || out.String() != want {
		t.Errorf("watch: exit %d\n got %q\nwant %q\nstderr %q", r.code, out.String(), want, errb.String())
	}
}

// A watch the hub ends with Aborted (it fell behind, or the state was
// restored from a snapshot) lists again and goes on.
func TestWatchListsAgainAfterAborted(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	seedObjects(t, f)
	f.watchEnd = status.Error(codes.Aborted, "state restored from snapshot; re-list")
	watchRetry = 10 * time.Millisecond
	watchNames(t, config, "added pool/gpu\nadded pool/workers\nadded pool/gpu\nadded pool/workers\n")
}

func TestWatch(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	seedObjects(t, f)
	gpu := f.objects["Pool/gpu"]
	f.events = []*roostv1.WatchEvent{
		{Type: roostv1.WatchEvent_TYPE_MODIFIED, Object: f.objects["Pool/workers"], Index: 8},
		{Type: roostv1.WatchEvent_TYPE_DELETED, Object: gpu, Index: 9},
	}
	f.watchFail = 1 // the first stream fails: roostctl must retry
	watchRetry = 10 * time.Millisecond

	watchNames(t, config, "added pool/gpu\nadded pool/workers\nmodified pool/workers\ndeleted pool/gpu\n")

	// Table rows with an EVENT column, filtered by name.
	done := make(chan result)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out2, errb2 syncbuf.Buffer
	go func() { done <- runCLIStreams(ctx, "", &out2, &errb2, "--config", config, "get", "pools", "gpu", "-w") }()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out2.String(), "\n") < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	lines := strings.Split(strings.TrimSuffix(out2.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "EVENT     NAME") ||
		!strings.HasPrefix(lines[1], "ADDED     gpu") || !strings.HasPrefix(lines[2], "DELETED   gpu") {
		t.Errorf("watch table:\n%s", out2.String())
	}
}

// TestWatchRowsLineUp: rows printed one event at a time keep the columns of
// the widest cells seen so far, so a narrower row lines up with earlier ones.
func TestWatchRowsLineUp(t *testing.T) {
	p := &watchPrinter{}
	lines := []string{
		p.row([]string{"NAME", "IMAGE", "AGE"}),
		p.row([]string{"workers-with-a-long-name", "=2026.11.0 (stable)", "3d"}),
		p.row([]string{"gpu", "<none>", "1m"}),
	}
	if a, b := strings.Index(lines[1], "3d"), strings.Index(lines[2], "1m"); a != b {
		t.Errorf("AGE at %d and %d:\n%s", a, b, strings.Join(lines, "\n"))
	}
	if want := "workers-with-a-long-name   =2026.11.0 (stable)   3d"; lines[1] != want {
		t.Errorf("row %q, want %q", lines[1], want)
	}
}
