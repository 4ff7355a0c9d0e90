package cli

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/version"
)

// freeAddr returns a loopback host:port that was free a moment ago; the
// end-to-end test restarts a hub on the same addresses.
func freeAddr(t *testing.T) string { return closedAddr(t) }

// cliWith returns a runner of roostctl with --config config.
func cliWith(t *testing.T, config string) func(args ...string) result {
	return func(args ...string) result {
		t.Helper()
		return runCLI(t, "", append([]string{"--config", config}, args...)...)
	}
}

// realHubCLI starts one hub member (closed in cleanup) and returns it,
// its admin.conf and a runner of roostctl against it.
func realHubCLI(t *testing.T) (*hub.Hub, string, func(args ...string) result) {
	t.Helper()
	h := startRealHub(t, t.TempDir(), freeAddr(t), freeAddr(t))
	t.Cleanup(func() { h.Close() })
	config := h.AdminConfigPath()
	return h, config, cliWith(t, config)
}

// startRealHub starts one hub member in dir and waits until it leads and
// has written admin.conf.
func startRealHub(t *testing.T, dir, apiAddr, raftAddr string) *hub.Hub {
	t.Helper()
	h, err := hub.Start(context.Background(), hub.Options{
		DataDir: dir, APIAddr: apiAddr, RaftAddr: raftAddr,
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond, LeaderLeaseTimeout: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RaftLogOutput: io.Discard,
	})
	if err != nil {
		t.Fatalf("start hub: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.WaitLeader(ctx); err != nil {
		h.Close()
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := client.LoadConfig(h.AdminConfigPath()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			h.Close()
			t.Fatal("the hub wrote no admin.conf")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return h
}

// TestEndToEnd runs roostctl's commands against a real single-member hub
// in this process: apply the examples, read them back (also across a hub
// restart, byte for byte), describe, delete, and the hub commands.
func TestEndToEnd(t *testing.T) {
	dir := t.TempDir()
	apiAddr, raftAddr := freeAddr(t), freeAddr(t)
	h := startRealHub(t, dir, apiAddr, raftAddr)
	defer func() { h.Close() }()
	config := h.AdminConfigPath()
	examples := filepath.Join("..", "examples", "all.yaml")
	run := cliWith(t, config)

	// Apply the examples: everything created, then unchanged.
	r := run("apply", "-f", examples)
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if len(lines) < 5 {
		t.Fatalf("apply printed %q", r.out)
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, " created") || !strings.Contains(l, "/") {
			t.Errorf("apply: line %q", l)
		}
	}
	r = run("apply", "-f", examples, "--dry-run")
	if r.code != 0 || strings.Count(r.out, " unchanged (dry run)\n") != len(lines) {
		t.Errorf("apply --dry-run again: exit %d, out %q, err %q", r.code, r.out, r.err)
	}

	// Read back.
	kinds := []string{"clusters", "pools", "machineclasses", "networkprofiles", "maintenancewindows"}
	before := map[string]string{}
	for _, k := range kinds {
		r = run("get", k, "-o", "yaml")
		if r.code != 0 || !strings.Contains(r.out, "apiVersion: roost.io/v1") {
			t.Errorf("get %s -o yaml: exit %d, out %q, err %q", k, r.code, r.out, r.err)
		}
		before[k] = r.out
	}
	r = run("get", "pools")
	if r.code != 0 || !strings.HasPrefix(r.out, "NAME ") {
		t.Errorf("get pools: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	pool := strings.Fields(strings.Split(r.out, "\n")[1])[0]
	r = run("get", "pool", pool, "-o", "name", "--stale")
	if r.code != 0 || r.out != "pool/"+pool+"\n" {
		t.Errorf("get pool %s -o name --stale: exit %d, out %q, err %q", pool, r.code, r.out, r.err)
	}
	r = run("describe", "pool", pool)
	if r.code != 0 || !strings.Contains(r.out, pool) || !strings.Contains(r.out, "Pool") {
		t.Errorf("describe: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	r = run("get", "pool", "no-such-pool")
	if r.code != ExitFailed || r.err != "Error from hub: Pool \"no-such-pool\" not found\n" {
		t.Errorf("get missing: exit %d, err %q", r.code, r.err)
	}

	// A reference to a missing object is reported at its line.
	bad := writeFile(t, t.TempDir(), "bad-pool.yaml", strings.Replace(poolYAML, "cluster: prod", "cluster: nowhere", 1))
	r = run("apply", "-f", bad)
	if r.code != ExitFailed || !strings.Contains(r.err, bad+`:8:3: Pool "workers": spec.cluster: `) {
		t.Errorf("dangling reference: exit %d, err %q", r.code, r.err)
	}

	// The hub.
	r = run("hub", "members")
	if r.code != 0 || !strings.Contains(r.out, "LEADER") || !strings.Contains(r.out, "*        Healthy   "+version.Version+"\n") || !strings.Contains(r.out, h.ID()) || !strings.Contains(r.out, "*") || !strings.Contains(r.out, apiAddr) {
		t.Errorf("hub members: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	r = run("version")
	if r.code != 0 || !strings.Contains(r.out, "Hub:    1 member, leader "+h.ID()) || !strings.Contains(r.out, ", roost-hub "+version.Version+"\n") {
		t.Errorf("version: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	r = run("hub", "join", "-o", "json")
	if r.code != 0 || !strings.Contains(r.out, `"token": "R1`) || !strings.Contains(r.out, apiAddr) {
		t.Errorf("hub join: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	var joined struct{ ID, Token string }
	if err := json.Unmarshal([]byte(r.out), &joined); err != nil || joined.ID == "" || !strings.Contains(joined.Token, "::"+joined.ID+".") {
		t.Fatalf("hub join -o json: %v %+v", err, joined)
	}
	r = run("hub", "join-tokens", "list")
	if r.code != 0 || !strings.Contains(r.out, "ID") || !regexp.MustCompile(joined.ID+` +in \S+ +0/1 +Active\n`).MatchString(r.out) {
		t.Errorf("hub join-tokens list: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	if r = run("__complete", "hub", "join-tokens", "revoke", ""); !strings.HasPrefix(r.out, joined.ID+"\t") {
		t.Errorf("join-tokens revoke completion: %q", r.out)
	}
	r = run("hub", "join-tokens", "revoke", joined.Token) // the whole token names it too
	if r.code != 0 || r.out != "join token "+joined.ID+" revoked\n" {
		t.Errorf("hub join-tokens revoke: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	r = run("hub", "join-tokens", "list", "-o", "json")
	var listed struct {
		Tokens []struct{ ID, ExpiresAt, RevokedAt, Status string }
	}
	if err := json.Unmarshal([]byte(r.out), &listed); err != nil || r.code != 0 || len(listed.Tokens) != 1 || listed.Tokens[0].Status != "Revoked" ||
		listed.Tokens[0].RevokedAt == "" || listed.Tokens[0].ExpiresAt == listed.Tokens[0].RevokedAt { // every member knows revokedAt: the expiry stays
		t.Errorf("hub join-tokens list after revoke: exit %d, out %q, err %q (%v)", r.code, r.out, r.err, err)
	}
	r = run("hub", "join-tokens", "revoke", joined.ID, "nope0000")
	if r.code != ExitFailed || !strings.Contains(r.err, `join token "nope0000" not found; nothing was revoked`) {
		t.Errorf("hub join-tokens revoke unknown: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	r = run("hub", "join-tokens", "revoke", joined.ID)
	if r.code != 0 || r.out != "join token "+joined.ID+" was already revoked\n" {
		t.Errorf("hub join-tokens revoke again: exit %d, out %q, err %q", r.code, r.out, r.err)
	}

	// Restart the hub: the same state reads back byte for byte. The
	// controllers write status after an apply (the Cluster's Reachable
	// condition): read it once they have.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		settled := true
		for _, k := range kinds {
			r = run("get", k, "-o", "yaml")
			settled = settled && r.code == 0 && r.out == before[k]
			before[k] = r.out
		}
		if settled && strings.Contains(before["clusters"], "type: Reachable") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the state did not settle in 10s; clusters:\n%s", before["clusters"])
		}
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	r = run("--timeout", "2s", "get", "pools")
	if r.code != ExitUnreachable {
		t.Errorf("get with the hub down: exit %d, err %q", r.code, r.err)
	}
	h = startRealHub(t, dir, apiAddr, raftAddr)
	for _, k := range kinds {
		r = run("get", k, "-o", "yaml")
		if r.code != 0 || r.out != before[k] {
			t.Errorf("get %s -o yaml after restart differs:\n%s\nbefore:\n%s\n(err %q)", k, r.out, before[k], r.err)
		}
	}

	// Delete what the examples describe (dependents first), then nothing is left.
	r = run("delete", "-f", examples)
	if r.code != 0 || strings.Count(r.out, " deleted\n") != len(lines) {
		t.Fatalf("delete -f: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	r = run("get", "pools")
	if r.code != 0 || r.out != "" || r.err != "No pools found.\n" {
		t.Errorf("get after delete: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	r = run("delete", "pool", pool)
	if r.code != ExitFailed {
		t.Errorf("delete again: exit %d, err %q", r.code, r.err)
	}
	r = run("delete", "pool", pool, "--ignore-not-found")
	if r.code != 0 {
		t.Errorf("delete --ignore-not-found: exit %d, err %q", r.code, r.err)
	}
}
