package test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/test/harness"
)

// TestSnapshotSaveAndRestore: on a running 3-member hub, `roostctl hub
// snapshot save` writes the state (checked by `inspect`); after a Pool is
// deleted and another created, `restore` through a follower brings every
// member back to the saved state, with the members unchanged. A damaged
// file and a snapshot of another hub (another CA) are refused, changing
// nothing.
func TestSnapshotSaveAndRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test (real roost-hub and roostctl): run `make test-root`")
	}
	harness.CtlBinary(t)
	c := harness.StartCluster(t, 3, harness.ClusterOptions{})
	cfg := c.AdminConfig
	harness.MustCtl(t, cfg, "apply", "-f", allManifest(t))
	_, token := harness.CreateToken(t, cfg, "--ttl", "1h")
	before := settledAll(t, cfg)

	dir := t.TempDir()
	file := filepath.Join(dir, "hub.snap")
	r := harness.MustCtl(t, cfg, "hub", "snapshot", "save", file)
	harness.Report(t, "save: %s", strings.TrimSpace(r.Stdout))
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot file: %v, %v", st, err)
	}
	r = harness.MustCtl(t, cfg, "hub", "snapshot", "inspect", file)
	if !strings.Contains(r.Stdout, "(verified)") || !strings.Contains(r.Stdout, "Pool:") {
		t.Fatalf("inspect:\n%s", r.Stdout)
	}
	if r := harness.Ctl(t, cfg, "hub", "snapshot", "save", file); r.Code != 2 {
		t.Errorf("save over an existing file: %s", r)
	}

	// Change the state: revoke the token, delete a Pool, create another.
	harness.RevokeToken(t, cfg, token)
	pool := firstName(t, before["Pool"])
	harness.MustCtl(t, cfg, "delete", "pool", pool)
	extra := filepath.Join(dir, "extra.yaml")
	if err := os.WriteFile(extra, []byte("apiVersion: roost.io/v1\nkind: Pool\nmetadata:\n  name: after-the-snapshot\nspec: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	harness.MustCtl(t, cfg, "apply", "-f", extra)

	// A damaged file is refused by inspect and restore.
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(dir, "damaged.snap")
	bad := append([]byte(nil), data...)
	bad[len(bad)-10] ^= 0xff
	if err := os.WriteFile(damaged, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"inspect", "restore"} {
		if r := harness.Ctl(t, cfg, "hub", "snapshot", cmd, damaged); r.Code != 2 || !strings.Contains(r.Stderr, "damaged") {
			t.Errorf("%s of a damaged file: %s", cmd, r)
		}
	}
	// A snapshot of another hub is refused.
	other := harness.StartCluster(t, 1, harness.ClusterOptions{})
	otherFile := filepath.Join(dir, "other.snap")
	harness.MustCtl(t, other.AdminConfig, "hub", "snapshot", "save", otherFile)
	if r := harness.Ctl(t, cfg, "hub", "snapshot", "restore", otherFile); r.Code != 1 || !strings.Contains(r.Stderr, "another CA") {
		t.Errorf("restore of another hub's snapshot: %s", r)
	}

	// A dry run says what the restore would undo, and changes nothing.
	r = harness.MustCtl(t, cfg, "hub", "snapshot", "restore", file, "--dry-run")
	if !strings.Contains(r.Stdout, "nothing was changed") || !strings.Contains(r.Stderr, "revoked since the snapshot is active again ("+token+")") {
		t.Errorf("dry run: %s", r)
	}
	if r := harness.MustCtl(t, cfg, "get", "pool", "after-the-snapshot", "-o", "name"); strings.TrimSpace(r.Stdout) != "pool/after-the-snapshot" {
		t.Errorf("the dry run changed the state: %s", r)
	}

	// Restore through a follower.
	leader := c.Leader(t)
	var follower *harness.Member
	for _, m := range c.Members {
		if m != leader {
			follower = m
			break
		}
	}
	r = harness.MustCtl(t, cfg, "--hub", follower.APIAddr, "hub", "snapshot", "restore", file)
	harness.Report(t, "restore via %s: %s", follower.NodeID, strings.TrimSpace(r.Stdout))
	if !strings.Contains(r.Stderr, "Warning from hub: 1 enrollment token revoked since the snapshot is active again") {
		t.Errorf("restore did not warn about the revoked token: %s", r)
	}

	// Every member holds the saved Pools again (read locally, stale).
	for _, m := range c.Members {
		hc := c.Client(t, m.APIAddr)
		err := harness.Poll(harness.Context(t, 30*time.Second), func() error {
			ctx := harness.Context(t, 5*time.Second)
			got, err := hc.List(ctx, &roostv1.ListRequest{Kind: "Pool", Consistency: roostv1.Consistency_CONSISTENCY_STALE})
			if err != nil {
				return err
			}
			var names []string
			for _, o := range got.GetObjects() {
				names = append(names, o.GetPool().GetMetadata().GetName())
			}
			if strings.Join(names, ",") != pool {
				return fmt.Errorf("member %s holds Pools %v, want [%s]", m.NodeID, names, pool)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	after := settledAll(t, cfg)
	for _, k := range appliableKinds {
		if after[k.Kind] != before[k.Kind] {
			t.Errorf("%s after the restore:\n%s\nwant:\n%s", k.Kind, after[k.Kind], before[k.Kind])
		}
	}
	if r := harness.MustCtl(t, cfg, "hub", "members", "-o", "json"); strings.Count(r.Stdout, `"id"`) != 3 {
		t.Errorf("members after the restore:\n%s", r.Stdout)
	}
}

// firstName is metadata.name of the first object in `roostctl get -o yaml`
// output.
func firstName(t *testing.T, yaml string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  name: (\S+)$`).FindStringSubmatch(yaml)
	if m == nil {
		t.Fatalf("no metadata.name in:\n%s", yaml)
	}
	return m[1]
}

// TestRestoreReregistersServers: Servers enrolled after a snapshot was
// saved are not in it; after its restore their agents, whose streams the
// hub ends (NotFound), record them again with their certificates, and they
// wait for an operator's approval.
func TestRestoreReregistersServers(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test (real roost-hub, roostctl and the agent simulator): run `make test-root`")
	}
	harness.CtlBinary(t)
	c := harness.StartCluster(t, 1, harness.ClusterOptions{})
	cfg := c.AdminConfig
	secret, _ := harness.CreateToken(t, cfg, "--ttl", "1h", "--uses", "2")
	file := filepath.Join(t.TempDir(), "hub.snap")
	harness.MustCtl(t, cfg, "hub", "snapshot", "save", file)

	sim := harness.StartProc(t, "simulate", harness.AgentBinary(t), "simulate", "--count", "2",
		"--hub", strings.Join(c.APIAddrs(), ","), "--ca", harness.WriteCA(t, cfg), "--token", secret, "--seed", "7", "--log-level", "warn", "--progress", "100ms")
	if _, err := sim.WaitCounter("connected", func(v int64) bool { return v == 2 }, time.Minute); err != nil {
		t.Fatal(err)
	}
	r := harness.MustCtl(t, cfg, "hub", "snapshot", "restore", file)
	if !strings.Contains(r.Stderr, "Warning from hub: 2 Servers enrolled since the snapshot are not in it") {
		t.Errorf("restore did not warn about the Servers enrolled since: %s", r)
	}
	start := time.Now()
	hc := c.Client(t)
	if err := harness.WaitUntil(90*time.Second, func() error {
		servers, err := tryListServers(hc)
		if err != nil {
			return err
		}
		pending := 0
		for _, s := range servers {
			for _, cd := range s.GetStatus().GetConditions() {
				if s.GetStatus().GetState() == "PendingApproval" && cd.GetType() == "Approved" && cd.GetReason() == "Reregistered" {
					pending++
				}
			}
		}
		if pending != 2 {
			return fmt.Errorf("%d of %d Servers re-registered and PendingApproval, want 2", pending, len(servers))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	harness.Report(t, "the 2 Servers enrolled after the snapshot re-registered in %v", time.Since(start).Round(time.Millisecond))
	// Approved, they are Available and the agents stay connected.
	for _, s := range listServers(t, hc) {
		harness.MustCtl(t, cfg, "server", "approve", s.GetMetadata().GetName())
	}
	if err := harness.WaitUntil(30*time.Second, func() error {
		for _, s := range listServers(t, hc) {
			if st := s.GetStatus().GetState(); st != "Available" {
				return fmt.Errorf("server %s is %s", s.GetMetadata().GetName(), st)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The simulator prints its counters every 100 ms and an agent may be
	// between its re-registration and its reconnect: wait for both.
	if err := harness.WaitUntil(10*time.Second, func() error {
		if n, _ := sim.Counter("connected"); n != 2 {
			return fmt.Errorf("connected = %d after the approval, want 2", n)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}
