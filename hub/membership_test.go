package hub_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roostfleet/roost/internal/tlsconfig"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/api"
	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/syncbuf"
	"github.com/roostfleet/roost/version"
)

// threeMembers starts hub-a (bootstrap), hub-b and hub-c (joined) and
// returns them with their data dirs and an admin client on hub-a.
func threeMembers(t *testing.T) ([]*hub.Hub, []string, roostv1.HubServiceClient) {
	t.Helper()
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	first := startHub(t, dirs[0], hub.Options{NodeID: "hub-a"})
	waitFor(t, "admin.conf", func() bool { return fileExists(first.AdminConfigPath()) })
	admin := dial(t, first.AdminConfigPath(), first.APIAddr())
	tok, err := admin.CreateJoinToken(context.Background(), &roostv1.CreateJoinTokenRequest{MaxUses: 2})
	if err != nil {
		t.Fatal(err)
	}
	members := []*hub.Hub{first}
	for i, id := range []string{"hub-b", "hub-c"} {
		members = append(members, startHub(t, dirs[i+1], hub.Options{NodeID: id, Join: first.APIAddr(), JoinToken: tok.GetToken()}))
	}
	waitFor(t, "3 voters", func() bool {
		ms, err := admin.ListMembers(context.Background(), &roostv1.ListMembersRequest{})
		return err == nil && len(ms.GetMembers()) == 3
	})
	return members, dirs, admin
}

func fileExists(path string) bool { _, err := os.Stat(path); return err == nil }

// dataDirFiles lists what a data dir holds besides the lock file.
func dataDirFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "lock" {
			out = append(out, e.Name())
		}
	}
	return out
}

func joinToken(t *testing.T, admin roostv1.HubServiceClient) string {
	t.Helper()
	tok, err := admin.CreateJoinToken(context.Background(), &roostv1.CreateJoinTokenRequest{MaxUses: 1})
	if err != nil {
		t.Fatal(err)
	}
	return tok.GetToken()
}

func raftServers(t *testing.T, h *hub.Hub) map[string]string {
	t.Helper()
	servers, err := h.Node().Servers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range servers {
		out[string(s.ID)] = string(s.Address)
	}
	return out
}

// memberConn dials addr with member dir's member certificate, as members
// call each other.
func memberConn(t *testing.T, dir, addr string) *grpc.ClientConn {
	t.Helper()
	tlsDir := filepath.Join(dir, "tls")
	cert, key, pool, err := ca.ReadFiles(filepath.Join(tlsDir, "member.crt"), filepath.Join(tlsDir, "member.key"), filepath.Join(tlsDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tlsconfig.ClientTLS(cert, key, pool)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// A new member started with the ID of an existing one is refused before its
// token is used or anything is written; AddVoter refuses an ID at another
// Raft address and a Raft address under another ID, and accepts a retry.
func TestJoinRefusesAnIDOrRaftAddressInUse(t *testing.T) {
	members, dirs, admin := threeMembers(t)
	ctx := context.Background()
	before := raftServers(t, members[0])
	tok := joinToken(t, admin)

	dir := t.TempDir()
	_, err := hub.Start(ctx, fastRaft(hub.Options{DataDir: dir, APIAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
		NodeID: "hub-b", Join: members[0].APIAddr(), JoinToken: tok}))
	if code := apierror.Code(err); code != codes.FailedPrecondition {
		t.Fatalf("join as hub-b again: %v (code %v), want FailedPrecondition", err, code)
	}
	for _, want := range []string{`"hub-b"`, before["hub-b"], "--node-id", "roostctl hub remove hub-b"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("join as hub-b again: %q does not name %q", err, want)
		}
	}
	if files := dataDirFiles(t, dir); len(files) != 0 {
		t.Errorf("a refused join wrote %v to its data dir", files)
	}
	// The token was not used, and the same data dir joins under a free ID.
	joined := startHub(t, dir, hub.Options{NodeID: "hub-d", Join: members[0].APIAddr(), JoinToken: tok})
	waitFor(t, "hub-d in the configuration", func() bool { return raftServers(t, members[0])["hub-d"] == joined.Node().Addr() })
	after := raftServers(t, members[0])
	for id, addr := range before {
		if after[id] != addr {
			t.Errorf("member %s moved from %s to %q", id, addr, after[id])
		}
	}

	// AddVoter, as the leader receives it (here forwarded by hub-a).
	var leader *hub.Hub
	waitFor(t, "a leader", func() bool {
		for _, m := range append(members, joined) {
			if m.Node().IsLeader() {
				leader = m
				return true
			}
		}
		return false
	})
	mc := roostv1.NewMemberServiceClient(memberConn(t, dirs[0], leader.APIAddr()))
	fctx := metadata.AppendToOutgoingContext(ctx, "x-roost-forwarded", "hub-a")
	hubB := members[1]
	for _, tc := range []struct {
		req  *roostv1.AddVoterRequest
		want []string
	}{
		{&roostv1.AddVoterRequest{NodeId: "hub-b", RaftAddress: "127.0.0.1:1", ApiAddress: "127.0.0.1:2"}, []string{"hub-b", before["hub-b"], "--node-id", "roostctl hub remove hub-b"}},
		{&roostv1.AddVoterRequest{NodeId: "hub-x", RaftAddress: before["hub-c"], ApiAddress: "127.0.0.1:2"}, []string{"hub-c", before["hub-c"], "--raft-addr", "roostctl hub remove hub-c"}},
	} {
		tc.req.HubVersion, tc.req.RulesVersion = version.Version, state.RulesVersion
		_, err := mc.AddVoter(fctx, tc.req)
		if code := apierror.Code(err); code != codes.FailedPrecondition {
			t.Fatalf("AddVoter %s at %s: %v, want FailedPrecondition", tc.req.NodeId, tc.req.RaftAddress, err)
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("AddVoter %s at %s: %q does not name %q", tc.req.NodeId, tc.req.RaftAddress, err, want)
			}
		}
	}
	// A retry (same ID, same Raft address) succeeds.
	if _, err := mc.AddVoter(fctx, &roostv1.AddVoterRequest{NodeId: "hub-b", RaftAddress: hubB.Node().Addr(), ApiAddress: hubB.APIAddr(),
		HubVersion: version.Version, RulesVersion: state.RulesVersion}); err != nil {
		t.Fatalf("AddVoter retry of hub-b: %v", err)
	}
	after = raftServers(t, members[0])
	if len(after) != 4 || after["hub-b"] != before["hub-b"] || after["hub-c"] != before["hub-c"] {
		t.Fatalf("configuration after the refused AddVoters: %v", after)
	}
}

// A new member started at the Raft address of a member that is stopped but
// still in the configuration is refused by Join, before its token is used,
// a certificate issued or anything written; with the same token and
// another Raft address it joins.
func TestJoinAtAStoppedMembersRaftAddressRefused(t *testing.T) {
	members, _, admin := threeMembers(t)
	c := members[2]
	cRaft := c.Node().Addr()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	tok := joinToken(t, admin)
	dir := t.TempDir()
	_, err := hub.Start(context.Background(), fastRaft(hub.Options{DataDir: dir, APIAddr: "127.0.0.1:0", RaftAddr: cRaft,
		NodeID: "hub-x", Join: members[0].APIAddr(), JoinToken: tok}))
	if code := apierror.Code(err); code != codes.FailedPrecondition {
		t.Fatalf("join at hub-c's Raft address: %v (code %v), want FailedPrecondition", err, code)
	}
	for _, want := range []string{"Raft address " + cRaft + " is in use", "member hub-c", "--raft-addr", "roostctl hub remove hub-c"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("join at hub-c's Raft address: %q does not say %q", err, want)
		}
	}
	if files := dataDirFiles(t, dir); len(files) != 0 {
		t.Errorf("a refused join wrote %v to its data dir", files)
	}
	if got := raftServers(t, members[0]); len(got) != 3 || got["hub-c"] != cRaft {
		t.Errorf("configuration after the refused join: %v", got)
	}
	// The token was not used.
	joined := startHub(t, dir, hub.Options{NodeID: "hub-x", Join: members[0].APIAddr(), JoinToken: tok})
	waitFor(t, "hub-x in the configuration", func() bool { return raftServers(t, members[0])["hub-x"] == joined.Node().Addr() })
}

// A joined member that stopped before it recorded the join (DIR/joined)
// adds itself again when it restarts; that retry is not refused.
func TestJoinRetryAfterAddVoterSucceeds(t *testing.T) {
	members, dirs, _ := threeMembers(t)
	c := members[2]
	raftAddr := c.Node().Addr()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	joinedMarker := filepath.Join(dirs[2], "joined")
	if err := os.Remove(joinedMarker); err != nil {
		t.Fatal(err)
	}
	h, err := hub.Start(context.Background(), fastRaft(hub.Options{NodeID: "hub-c", DataDir: dirs[2], APIAddr: "127.0.0.1:0", RaftAddr: raftAddr,
		Join: members[0].APIAddr()}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	waitFor(t, "the join recorded again", func() bool { return fileExists(joinedMarker) })
}

// A leader that stops hands leadership over first: writes through another
// member go on while it drains its API (here held open by a watch).
func TestCloseLeaderHandsOverLeadership(t *testing.T) {
	members, dirs, _ := threeMembers(t)
	var leader *hub.Hub
	var others []*hub.Hub
	waitFor(t, "a leader", func() bool {
		leader, others = nil, nil
		for _, m := range members {
			if m.Node().IsLeader() {
				leader = m
			} else {
				others = append(others, m)
			}
		}
		return leader != nil
	})
	cfg := filepath.Join(dirs[0], "admin.conf")
	// A watch on the leader keeps its graceful stop waiting.
	c := dial(t, cfg, others[0].APIAddr())
	if _, err := c.Apply(context.Background(), &roostv1.ApplyRequest{Objects: []*roostv1.Object{cluster("before", "v1.34.4")}}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	w, err := dial(t, cfg, leader.APIAddr()).Watch(wctx, &roostv1.WatchRequest{Kind: "Cluster"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil { // the cluster "before": the watch is open
		t.Fatal(err)
	}

	start := time.Now()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); leader.Close() }()
	defer wg.Wait()
	time.Sleep(50 * time.Millisecond) // Close has begun
	var lastErr error
	for i := 0; time.Since(start) < 10*time.Second; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, lastErr = c.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{cluster(fmt.Sprintf("during-%d", i), "v1.34.4")}})
		cancel()
		if lastErr == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	if lastErr != nil {
		t.Fatalf("no write succeeded through %s after the leader's Close: %v", others[0].ID(), lastErr)
	}
	if took > 2*time.Second {
		t.Fatalf("the first write through %s succeeded %v after the leader's Close began, want < 2s", others[0].ID(), took)
	}
	t.Logf("write through %s succeeded %v after the leader's Close began", others[0].ID(), took.Round(time.Millisecond))
}

// A member removed from the hub refuses every call, saying so, and logs it
// once, also after a restart on its data dir.
func TestRemovedMemberRefusesCalls(t *testing.T) {
	members, dirs, admin := threeMembers(t)
	ctx := context.Background()
	if _, err := admin.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{cluster("prod", "v1.34.4")}}); err != nil {
		t.Fatal(err)
	}
	removed := members[2]
	cfg := filepath.Join(dirs[0], "admin.conf")

	// An agent with a stream open on hub-c.
	conf, err := client.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fx := &agentFixture{t: t, h: members[0], admin: admin, cfg: &client.Config{Hubs: []string{removed.APIAddr()}, CertificateAuthority: conf.CertificateAuthority}}
	etok, err := admin.CreateEnrollmentToken(ctx, &roostv1.CreateEnrollmentTokenRequest{TtlSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	ereq, key := enrollReq(t, etok.GetToken(), testUUID, "52:54:00:00:00:01")
	enrolled, err := fx.agentClient(nil, nil).Enroll(ctx, ereq)
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	stream, err := fx.agentClient(enrolled.GetCertificatePem(), key).Connect(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Hello{Hello: &roostv1.Hello{ServerName: enrolled.GetServerName(), AgentVersion: "v0.1.0"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // the heartbeat interval
		t.Fatal(err)
	}

	// And a Watch, which sees no event after the removal.
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	watch, err := dial(t, cfg, removed.APIAddr()).Watch(wctx, &roostv1.WatchRequest{Kind: "Cluster"})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := admin.RemoveMember(ctx, &roostv1.RemoveMemberRequest{Id: "hub-c"}); err != nil {
		t.Fatal(err)
	}
	check := func(h *hub.Hub) {
		t.Helper()
		// Without the client's retries on Unavailable, which would ask
		// the same member again (the only one given).
		conf, err := client.LoadConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := client.Dial(ctx, conf, []string{h.APIAddr()}, grpc.WithDisableRetry())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		c := roostv1.NewHubServiceClient(conn)
		// It finds it was removed within half a second (watchHealth).
		waitFor(t, "hub-c to refuse reads as removed", func() bool {
			_, err := c.Get(ctx, &roostv1.GetRequest{Kind: "Cluster", Name: "prod"})
			return apierror.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "was removed from the hub")
		})
		for name, call := range map[string]func() error{
			"Get":         func() error { _, err := c.Get(ctx, &roostv1.GetRequest{Kind: "Cluster", Name: "prod"}); return err },
			"List":        func() error { _, err := c.List(ctx, &roostv1.ListRequest{Kind: "Cluster"}); return err },
			"ListMembers": func() error { _, err := c.ListMembers(ctx, &roostv1.ListMembersRequest{}); return err },
			"Apply": func() error {
				_, err := c.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{cluster("x", "v1.34.4")}})
				return err
			},
		} {
			err := call()
			want := "this member (hub-c) was removed from the hub; its data dir is stale: wipe it and join again with a new token (roostctl hub join)"
			if apierror.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), want) {
				t.Errorf("%s on the removed member: %v, want Unavailable %q", name, err, want)
			}
		}
	}
	check(removed)
	// The open Watch ends once the member finds it was removed.
	for {
		_, err := watch.Recv()
		if err == nil {
			continue
		}
		if apierror.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "this member (hub-c) was removed from the hub") {
			t.Errorf("watch on the removed member: %v, want Unavailable saying it was removed", err)
		}
		break
	}
	// The open agent stream ends at the agent's next heartbeat.
	if err := stream.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Heartbeat{Heartbeat: &roostv1.Heartbeat{}}}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := stream.Recv()
		if err == nil {
			continue // desired state pushed before the removal
		}
		if apierror.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "this member (hub-c) was removed from the hub") {
			t.Errorf("agent stream on the removed member: %v, want Unavailable saying it was removed", err)
		}
		break
	}
	// The other members serve on.
	if _, err := dial(t, cfg, members[1].APIAddr()).Get(ctx, &roostv1.GetRequest{Kind: "Cluster", Name: "prod"}); err != nil {
		t.Fatal(err)
	}

	raftAddr := removed.Node().Addr()
	if err := removed.Close(); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	o := fastRaft(hub.Options{DataDir: dirs[2], APIAddr: "127.0.0.1:0", RaftAddr: raftAddr, HTTPAddr: "127.0.0.1:0"})
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	restarted, err := hub.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restarted.Close() })
	check(restarted)
	// Its /healthz says it was removed, not merely that it knows no leader.
	resp, err := http.Get("http://" + restarted.HTTPAddr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "this member (hub-c) was removed from the hub; its data dir is stale"; resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), want) {
		t.Errorf("/healthz of the removed member: %d %q, want 503 saying %q", resp.StatusCode, body, want)
	}
	time.Sleep(time.Second) // a few more checks
	if n := strings.Count(logs.String(), "level=ERROR msg=\"this member (hub-c) was removed from the hub"); n != 1 {
		t.Errorf("the restarted removed member logged its removal %d times, want once:\n%s", n, logs.String())
	}
}

// A member restarted on another Raft address than the hub has for it is
// refused, naming the address to use.
func TestRestartOnAnotherRaftAddressRefused(t *testing.T) {
	members, dirs, _ := threeMembers(t)
	b := members[1]
	raftAddr := b.Node().Addr()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := hub.Start(context.Background(), fastRaft(hub.Options{DataDir: dirs[1], APIAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0"}))
	if err == nil {
		t.Fatal("restart on another Raft address succeeded")
	}
	for _, want := range []string{"--raft-addr " + raftAddr, "roostctl hub remove hub-b"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("restart on another Raft address: %q does not name %q", err, want)
		}
	}
	h, err := hub.Start(context.Background(), fastRaft(hub.Options{DataDir: dirs[1], APIAddr: "127.0.0.1:0", RaftAddr: raftAddr}))
	if err != nil {
		t.Fatalf("restart on the same Raft address: %v", err)
	}
	t.Cleanup(func() { h.Close() })
}

// A join whose Raft port is taken fails before it uses its token or writes
// anything; so does a bootstrap.
func TestPortConflictBeforeJoinUsesNoToken(t *testing.T) {
	dir := t.TempDir()
	first := startHub(t, dir, hub.Options{NodeID: "hub-a"})
	waitFor(t, "admin.conf", func() bool { return fileExists(first.AdminConfigPath()) })
	admin := dial(t, first.AdminConfigPath(), first.APIAddr())
	tok := joinToken(t, admin)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	joinDir := t.TempDir()
	_, err = hub.Start(context.Background(), fastRaft(hub.Options{DataDir: joinDir, APIAddr: "127.0.0.1:0", RaftAddr: taken.Addr().String(),
		NodeID: "hub-b", Join: first.APIAddr(), JoinToken: tok}))
	if err == nil || !strings.Contains(err.Error(), "--raft-addr "+taken.Addr().String()) {
		t.Fatalf("join on a taken Raft port: %v, want an error naming --raft-addr", err)
	}
	if files := dataDirFiles(t, joinDir); len(files) != 0 {
		t.Errorf("a join that failed on its Raft port wrote %v", files)
	}
	bootDir := t.TempDir()
	if _, err := hub.Start(context.Background(), fastRaft(hub.Options{DataDir: bootDir, APIAddr: "127.0.0.1:0", RaftAddr: taken.Addr().String()})); err == nil {
		t.Fatal("bootstrap on a taken Raft port succeeded")
	}
	if files := dataDirFiles(t, bootDir); len(files) != 0 {
		t.Errorf("a bootstrap that failed on its Raft port wrote %v", files)
	}
	// The token is unused: the corrected join succeeds with it.
	startHub(t, joinDir, hub.Options{NodeID: "hub-b", Join: first.APIAddr(), JoinToken: tok})
}

func TestCheckJoinFlags(t *testing.T) {
	empty := t.TempDir()
	tok := "R1" + strings.Repeat("a", 64) + "::0123abcd." + strings.Repeat("b", 32)
	for _, tc := range []struct {
		join, token string
		want        []string // substrings of the error; nil: no error
	}{
		{"", "", nil},
		{"10.0.0.1:7443", tok, nil},
		{"", tok, []string{"--join-token", "--join", "bootstrap a new, separate hub"}},
		{"10.0.0.1:7443", "", []string{"--join 10.0.0.1:7443 needs --join-token", "roostctl hub join"}},
		{"10.0.0.1:7443", "R1nope", []string{"--join-token: malformed join token"}},
	} {
		err := hub.CheckJoinFlags(empty, tc.join, tc.token)
		if (err == nil) != (tc.want == nil) {
			t.Errorf("CheckJoinFlags(join %q, token %q) = %v, want error %v", tc.join, tc.token, err, tc.want != nil)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("CheckJoinFlags(join %q, token %q) = %q, does not say %q", tc.join, tc.token, err, w)
			}
		}
	}
	// Start refuses the same, before it writes anything.
	if _, err := hub.Start(context.Background(), fastRaft(hub.Options{DataDir: empty, APIAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0", JoinToken: tok})); err == nil ||
		!strings.Contains(err.Error(), "--join-token") {
		t.Fatalf("start with a join token but no --join: %v", err)
	}
	if files := dataDirFiles(t, empty); len(files) != 0 {
		t.Errorf("a refused start wrote %v", files)
	}
	// A data dir with Raft state ignores both.
	dir := t.TempDir()
	startHub(t, dir, hub.Options{})
	if err := hub.CheckJoinFlags(dir, "", tok); err != nil {
		t.Errorf("on a data dir with Raft state: %v", err)
	}
}

// A join with an unknown token or a wrong secret is refused with one
// message for both, before anything is proposed: the Raft log does not
// move and the token's uses are not counted.
func TestJoinRefusalWritesNothing(t *testing.T) {
	f := newAgentFixture(t)
	ctx := context.Background()
	resp, err := f.admin.CreateJoinToken(ctx, &roostv1.CreateJoinTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	good, err := api.ParseJoinToken(resp.GetToken())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := client.Dial(ctx, &client.Config{Hubs: f.cfg.Hubs, CertificateAuthority: f.cfg.CertificateAuthority}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	members := roostv1.NewMemberServiceClient(conn)
	csr, _, err := ca.NewCSR("hub-x")
	if err != nil {
		t.Fatal(err)
	}
	wrong, unknown := good, good
	wrong.Secret = strings.Repeat("0", 32)
	unknown.ID = "00000000"
	index := f.h.Node().LastIndex()
	for name, tok := range map[string]api.JoinToken{"wrong secret": wrong, "unknown token": unknown} {
		_, err := members.Join(ctx, &roostv1.JoinRequest{Token: tok.String(), NodeId: "hub-x", CsrPem: csr})
		if st := status.Convert(err); st.Code() != codes.FailedPrecondition || st.Message() != state.JoinTokenRefused {
			t.Errorf("join with a %s: %v, want FailedPrecondition %q", name, err, state.JoinTokenRefused)
		}
	}
	if i := f.h.Node().LastIndex(); i != index {
		t.Errorf("refused joins moved the Raft log from index %d to %d", index, i)
	}
	for _, jt := range f.h.FSM().JoinTokens() {
		if jt.GetUses() != 0 {
			t.Errorf("join token %s counts %d uses after refused joins", jt.GetId(), jt.GetUses())
		}
	}
}
