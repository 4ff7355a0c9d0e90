package hub_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// TestForceNewClusterAfterLosingMajority: a 3-member hub loses two members
// for good; the survivor, restarted with ForceNewCluster, is the only
// member, keeps every object, takes writes, and forgets the lost members;
// restarted again without the flag it stays so.
func TestForceNewClusterAfterLosingMajority(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	first := startHub(t, dirs[0], hub.Options{NodeID: "hub-a"})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(first.AdminConfigPath()); return err == nil })
	adminConf := first.AdminConfigPath()
	admin := dial(t, adminConf, first.APIAddr())
	ctx := context.Background()
	tok, err := admin.CreateJoinToken(ctx, &roostv1.CreateJoinTokenRequest{MaxUses: 2})
	if err != nil {
		t.Fatal(err)
	}
	var lost []*hub.Hub
	for i, id := range []string{"hub-b", "hub-c"} {
		lost = append(lost, startHub(t, dirs[i+1], hub.Options{NodeID: id, Join: first.APIAddr(), JoinToken: tok.GetToken()}))
	}
	waitFor(t, "3 voters", func() bool {
		ms, err := admin.ListMembers(ctx, &roostv1.ListMembersRequest{})
		return err == nil && len(ms.GetMembers()) == 3
	})
	if _, err := admin.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{cluster("before", "v1.34.4")}}); err != nil {
		t.Fatal(err)
	}
	for _, h := range lost {
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	survivor := startHub(t, dirs[0], hub.Options{ForceNewCluster: true})
	c := dial(t, adminConf, survivor.APIAddr())
	waitFor(t, "one member left, the lost ones forgotten", func() bool {
		ms, err := c.ListMembers(ctx, &roostv1.ListMembersRequest{})
		return err == nil && len(ms.GetMembers()) == 1 && ms.GetMembers()[0].GetId() == "hub-a" && len(survivor.FSM().Members()) == 1
	})
	if _, err := c.Get(ctx, &roostv1.GetRequest{Kind: "Cluster", Name: "before"}); err != nil {
		t.Fatalf("the object written before the loss: %v", err)
	}
	if _, err := c.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{cluster("after", "v1.34.4")}}); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
	if err := survivor.Close(); err != nil {
		t.Fatal(err)
	}

	again := startHub(t, dirs[0], hub.Options{})
	c = dial(t, adminConf, again.APIAddr())
	for _, name := range []string{"before", "after"} {
		if _, err := c.Get(ctx, &roostv1.GetRequest{Kind: "Cluster", Name: name}); err != nil {
			t.Fatalf("after a plain restart, Cluster %s: %v", name, err)
		}
	}
	if ms, err := c.ListMembers(ctx, &roostv1.ListMembersRequest{}); err != nil || len(ms.GetMembers()) != 1 {
		t.Fatalf("members after a plain restart: %v %v", ms, err)
	}

	// The recovery is recorded in the data dir.
	marker := filepath.Join(dirs[0], "force-new-cluster.done")
	b, err := os.ReadFile(marker)
	if err != nil || !strings.Contains(string(b), "\ntime ") || !strings.Contains(string(b), "\nindex ") {
		t.Fatalf("%s: %q %v, want the time and the Raft index of the recovery", marker, b, err)
	}
	at := strings.TrimSpace(strings.SplitN(strings.SplitN(string(b), "\ntime ", 2)[1], "\n", 2)[0])

	// --force-new-cluster with --join on an empty data dir is refused before
	// the token is used or anything written.
	tok2, err := c.CreateJoinToken(ctx, &roostv1.CreateJoinTokenRequest{MaxUses: 1})
	if err != nil {
		t.Fatal(err)
	}
	joinDir := t.TempDir()
	_, err = hub.Start(ctx, fastRaft(hub.Options{DataDir: joinDir, APIAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0", NodeID: "hub-d",
		Join: again.APIAddr(), JoinToken: tok2.GetToken(), ForceNewCluster: true}))
	if err == nil || !strings.Contains(err.Error(), "--force-new-cluster and --join do not go together") {
		t.Fatalf("ForceNewCluster with Join on an empty data dir: %v", err)
	}
	if files := dataDirFiles(t, joinDir); len(files) != 0 {
		t.Errorf("a refused start wrote %v", files)
	}
	// The token is unused: the member joins with it.
	startHub(t, joinDir, hub.Options{NodeID: "hub-d", Join: again.APIAddr(), JoinToken: tok2.GetToken()})
	waitFor(t, "hub-d in the configuration", func() bool { return len(raftServers(t, again)) == 2 })

	// --force-new-cluster left on would drop hub-d: refused while the
	// marker exists, naming when it was used and what to do.
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = hub.Start(ctx, fastRaft(hub.Options{DataDir: dirs[0], APIAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0", ForceNewCluster: true}))
	if err == nil {
		t.Fatal("a second ForceNewCluster on the data dir started")
	}
	for _, want := range []string{"--force-new-cluster was already used", at, "remove --force-new-cluster", marker} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("a second ForceNewCluster: %q does not say %q", err, want)
		}
	}
	if err := hub.CheckForceNewCluster(dirs[0], "", true); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Errorf("CheckForceNewCluster with the marker: %v", err)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	if err := hub.CheckForceNewCluster(dirs[0], "", true); err != nil {
		t.Errorf("CheckForceNewCluster after the marker was deleted: %v", err)
	}

	// Nothing to recover in an empty data dir.
	if _, err := hub.Start(ctx, fastRaft(hub.Options{DataDir: t.TempDir(), APIAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0", ForceNewCluster: true})); err == nil ||
		!strings.Contains(err.Error(), "holds no Raft state to recover") {
		t.Errorf("ForceNewCluster on an empty data dir: %v", err)
	}
}
