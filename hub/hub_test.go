package hub_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/version"
)

// fastRaft keeps elections short on loopback.
func fastRaft(o hub.Options) hub.Options {
	o.HeartbeatTimeout, o.ElectionTimeout, o.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	o.RaftLogOutput = io.Discard
	return o
}

func startHub(t *testing.T, dir string, o hub.Options) *hub.Hub {
	t.Helper()
	o.DataDir, o.APIAddr, o.RaftAddr = dir, "127.0.0.1:0", "127.0.0.1:0"
	h, err := hub.Start(context.Background(), fastRaft(o))
	if err != nil {
		t.Fatalf("start hub: %v", err)
	}
	t.Cleanup(func() { h.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return h
}

func dial(t *testing.T, cfgPath string, hubs ...string) roostv1.HubServiceClient {
	t.Helper()
	cfg, err := client.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := client.Dial(context.Background(), cfg, hubs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return roostv1.NewHubServiceClient(conn)
}

func cluster(name, version string) *roostv1.Object {
	return &roostv1.Object{Kind: &roostv1.Object_Cluster{Cluster: &roostv1.Cluster{
		Metadata: &roostv1.ObjectMeta{Name: name},
		Spec:     &roostv1.ClusterSpec{ApiEndpoint: "https://10.0.0.1:6443", KubernetesVersion: version},
	}}}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSingleMemberBootstrapApplyGet(t *testing.T) {
	dir := t.TempDir()
	h := startHub(t, dir, hub.Options{})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(h.AdminConfigPath()); return err == nil })
	c := dial(t, filepath.Join(dir, "admin.conf"))
	ctx := context.Background()
	resp, err := c.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{cluster("prod", "v1.34.4")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetResults()[0].GetAction(); got != "created" {
		t.Fatalf("action = %q, want created", got)
	}
	got, err := c.Get(ctx, &roostv1.GetRequest{Kind: "clusters", Name: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	if v := got.GetObject().GetCluster().GetSpec().GetKubernetesVersion(); v != "v1.34.4" {
		t.Fatalf("version = %q", v)
	}
	_, err = c.Get(ctx, &roostv1.GetRequest{Kind: "Cluster", Name: "nope"})
	if code := apierror.Code(err); code != codes.NotFound {
		t.Fatalf("get missing: code %v (%v), want NotFound", code, err)
	}
	_, err = c.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{cluster("Bad_Name", "")}})
	if code := apierror.Code(err); code != codes.InvalidArgument {
		t.Fatalf("apply invalid: code %v (%v), want InvalidArgument", code, err)
	}
	big := cluster("big", "v1.34.4")
	big.GetCluster().Metadata.Annotations = map[string]string{"blob": strings.Repeat("x", 300<<10)}
	_, err = c.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{big}})
	if e := apierror.FromError(err); e.Code != codes.InvalidArgument || len(e.Violations) != 1 || e.Violations[0].Field != "objects[0]" {
		t.Fatalf("apply of a 300 KiB object: %v, want InvalidArgument on objects[0]", err)
	}
}

func TestThreeMembersJoinForwardAndRemove(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	first := startHub(t, dirs[0], hub.Options{NodeID: "hub-a"})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(first.AdminConfigPath()); return err == nil })
	admin := dial(t, first.AdminConfigPath(), first.APIAddr())
	ctx := context.Background()
	tok, err := admin.CreateJoinToken(ctx, &roostv1.CreateJoinTokenRequest{MaxUses: 2})
	if err != nil {
		t.Fatal(err)
	}
	var members []*hub.Hub
	members = append(members, first)
	for i, id := range []string{"hub-b", "hub-c"} {
		members = append(members, startHub(t, dirs[i+1], hub.Options{NodeID: id, Join: first.APIAddr(), JoinToken: tok.GetToken()}))
	}
	waitFor(t, "3 voters", func() bool {
		ms, err := admin.ListMembers(ctx, &roostv1.ListMembersRequest{})
		return err == nil && len(ms.GetMembers()) == 3
	})
	// Every member records its roost-hub and apply rules versions, and the
	// hub applies the rules all of them implement.
	waitFor(t, "member versions", func() bool {
		ms, err := admin.ListMembers(ctx, &roostv1.ListMembersRequest{})
		if err != nil || ms.GetRulesVersion() != state.RulesVersion {
			return false
		}
		for _, m := range ms.GetMembers() {
			if m.GetHubVersion() != version.Version || m.GetRulesVersion() != state.RulesVersion || m.GetHealth() != "Healthy" {
				return false
			}
		}
		return true
	})
	// A follower restarted on another API address reports it to the
	// leader, so clients and forwarded calls find it.
	oldAPI, raftAddr := members[1].APIAddr(), members[1].Node().Addr()
	if err := members[1].Close(); err != nil {
		t.Fatal(err)
	}
	// A stopped member is listed as Unreachable (by whichever member answers).
	waitFor(t, "hub-b Unreachable", func() bool {
		ms, err := admin.ListMembers(ctx, &roostv1.ListMembersRequest{})
		for _, m := range ms.GetMembers() {
			if m.GetId() == "hub-b" {
				return err == nil && m.GetHealth() == "Unreachable" && m.GetHealthMessage() != ""
			}
		}
		return false
	})
	restarted, err := hub.Start(ctx, fastRaft(hub.Options{NodeID: "hub-b", DataDir: dirs[1], APIAddr: "127.0.0.1:0", RaftAddr: raftAddr}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restarted.Close() })
	members[1] = restarted
	waitFor(t, "hub-b's new API address in the state", func() bool {
		ms, err := admin.ListMembers(ctx, &roostv1.ListMembersRequest{})
		for _, m := range ms.GetMembers() {
			if m.GetId() == "hub-b" {
				return err == nil && m.GetApiAddress() == restarted.APIAddr() && m.GetApiAddress() != oldAPI
			}
		}
		return false
	})

	// A used-up token is refused.
	_, err = hub.Start(ctx, fastRaft(hub.Options{DataDir: t.TempDir(), APIAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0", Join: first.APIAddr(), JoinToken: tok.GetToken()}))
	if err == nil {
		t.Fatal("third use of a two-use join token was accepted")
	}

	// Writes through a follower are forwarded; linearizable reads anywhere see them.
	for i, m := range members {
		c := dial(t, first.AdminConfigPath(), m.APIAddr())
		name := fmt.Sprintf("via-%d", i)
		if _, err := c.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{cluster(name, "v1.34.4")}}); err != nil {
			t.Fatalf("apply via member %s: %v", m.ID(), err)
		}
		for _, r := range members {
			rc := dial(t, first.AdminConfigPath(), r.APIAddr())
			if _, err := rc.Get(ctx, &roostv1.GetRequest{Kind: "Cluster", Name: name}); err != nil {
				t.Fatalf("linearizable get of %s via %s: %v", name, r.ID(), err)
			}
		}
	}
	if _, err := admin.RemoveMember(ctx, &roostv1.RemoveMemberRequest{Id: "hub-c"}); err != nil {
		t.Fatal(err)
	}
	ms, err := admin.ListMembers(ctx, &roostv1.ListMembersRequest{})
	if err != nil || len(ms.GetMembers()) != 2 {
		t.Fatalf("members after remove: %v %v", ms, err)
	}
}

// TestRestartFromSnapshotAndLog restarts a member whose state is part
// snapshot, part log, and checks every object (with its server-set
// metadata) comes back identical.
func TestRestartFromSnapshotAndLog(t *testing.T) {
	dir := t.TempDir()
	o := hub.Options{DataDir: dir, APIAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0"}
	h, err := hub.Start(context.Background(), fastRaft(o))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(h.AdminConfigPath()); return err == nil })
	apply := func(name string) {
		c := dial(t, h.AdminConfigPath(), h.APIAddr())
		if _, err := c.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{cluster(name, "v1.34.4")}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		apply(fmt.Sprintf("before-%d", i))
	}
	if err := h.Node().Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	for i := 0; i < 5; i++ {
		apply(fmt.Sprintf("after-%d", i))
	}
	// The cluster controller records each new Cluster's status at once;
	// the restarted leader finds nothing to change.
	waitFor(t, "cluster statuses", func() bool { return clustersHaveStatus(h, 10) })
	want, idx, err := h.FSM().List("Cluster", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	h2, err := hub.Start(context.Background(), fastRaft(o))
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if err := h2.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "log replay", func() bool { return h2.FSM().LastIndex() >= idx })
	got, _, err := h2.FSM().List("Cluster", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(got) != 10 {
		t.Fatalf("after restart: %d clusters, want %d", len(got), len(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("object %d differs after restart:\n got %v\nwant %v", i, got[i], want[i])
		}
	}
}

func TestDataDirLockedAndPortConflictLeavesNoState(t *testing.T) {
	dir := t.TempDir()
	h := startHub(t, dir, hub.Options{})
	_, err := hub.Start(context.Background(), fastRaft(hub.Options{DataDir: dir, APIAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0"}))
	if err == nil || !strings.Contains(err.Error(), "in use by another roost-hub") {
		t.Fatalf("second hub on the same data dir: err = %v, want in use", err)
	}
	// First start with a taken Raft port: fails, and a retry with a free
	// port bootstraps normally.
	dir2 := t.TempDir()
	_, err = hub.Start(context.Background(), fastRaft(hub.Options{DataDir: dir2, APIAddr: "127.0.0.1:0", RaftAddr: h.Node().Addr()}))
	if err == nil {
		t.Fatal("start on a taken Raft port succeeded")
	}
	startHub(t, dir2, hub.Options{})
}

// clustersHaveStatus says whether h holds n Clusters, each with its
// status recorded by the cluster controller.
func clustersHaveStatus(h *hub.Hub, n int) bool {
	objs, _, err := h.FSM().List("Cluster", "")
	if err != nil || len(objs) != n {
		return false
	}
	for _, o := range objs {
		if len(o.GetCluster().GetStatus().GetConditions()) == 0 {
			return false
		}
	}
	return true
}
