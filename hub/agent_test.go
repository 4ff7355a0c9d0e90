package hub_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/roostfleet/roost/internal/tlsconfig"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// agentFixture is a single-member hub with an admin client.
type agentFixture struct {
	t     *testing.T
	h     *hub.Hub
	admin roostv1.HubServiceClient
	cfg   *client.Config
}

func newAgentFixture(t *testing.T) *agentFixture {
	t.Helper()
	h := startHub(t, t.TempDir(), hub.Options{})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(h.AdminConfigPath()); return err == nil })
	cfg, err := client.LoadConfig(h.AdminConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	return &agentFixture{t: t, h: h, admin: dial(t, h.AdminConfigPath()), cfg: cfg}
}

// agentClient dials the hub as an agent: anonymous, or with cert and key.
func (f *agentFixture) agentClient(cert, key []byte) roostv1.AgentServiceClient {
	f.t.Helper()
	cfg := &client.Config{Hubs: f.cfg.Hubs, CertificateAuthority: f.cfg.CertificateAuthority, ClientCertificate: string(cert), ClientKey: string(key)}
	conn, err := client.Dial(context.Background(), cfg, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { conn.Close() })
	return roostv1.NewAgentServiceClient(conn)
}

func (f *agentFixture) token(req *roostv1.CreateEnrollmentTokenRequest) string {
	f.t.Helper()
	resp, err := f.admin.CreateEnrollmentToken(context.Background(), req)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.GetToken()
}

func (f *agentFixture) servers() int { return f.h.FSM().Count("Server") }

func enrollReq(t *testing.T, token, uuid string, macs ...string) (*roostv1.EnrollRequest, []byte) {
	t.Helper()
	csr, key, err := ca.NewCSR("ignored")
	if err != nil {
		t.Fatal(err)
	}
	return &roostv1.EnrollRequest{Token: token, CsrPem: csr, AgentVersion: "v0.1.0",
		Identity:  &roostv1.ServerIdentity{SystemUuid: uuid, PermanentMacs: macs},
		Inventory: &roostv1.Inventory{Cpu: &roostv1.CPUInfo{Cores: 8, Threads: 16}, MemoryBytes: 64 << 30, Arch: "amd64", Firmware: "UEFI"},
	}, key
}

const testUUID = "4c4c4544-0042-3510-8052-b4c04f4d4e31"

func TestEnrollTokenRules(t *testing.T) {
	f := newAgentFixture(t)
	ctx := context.Background()
	anon := f.agentClient(nil, nil)

	good := f.token(&roostv1.CreateEnrollmentTokenRequest{TtlSeconds: 3600, MaxUses: 1})
	req, _ := enrollReq(t, good, testUUID, "52:54:00:00:00:01")
	resp, err := anon.Enroll(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetServerName() != testUUID || len(resp.GetHubs()) != 1 || len(resp.GetCaBundlePem()) == 0 {
		t.Fatalf("response = %v", resp)
	}
	cert, err := tlsconfig.ParseCertificatePEM(resp.GetCertificatePem())
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != testUUID || tlsconfig.RoleOf(cert) != ca.RoleAgent {
		t.Errorf("certificate CN %q role %q", cert.Subject.CommonName, tlsconfig.RoleOf(cert))
	}
	if life := cert.NotAfter.Sub(cert.NotBefore); life < 24*time.Hour || life > 25*time.Hour {
		t.Errorf("certificate lifetime %v, want 24h (+ backdate)", life)
	}

	// A refusal writes nothing to Raft: the token is checked before the
	// enrollment is proposed.
	refused := func(token, want string) {
		t.Helper()
		before, index := f.servers(), f.h.Node().LastIndex()
		req, _ := enrollReq(t, token, "", "52:54:00:00:00:99")
		_, err := anon.Enroll(ctx, req)
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), want) {
			t.Errorf("enroll with %s: %v, want PermissionDenied containing %q", token, err, want)
		}
		if n := f.servers(); n != before {
			t.Errorf("refused enrollment left %d servers, want %d", n, before)
		}
		if i := f.h.Node().LastIndex(); i != index {
			t.Errorf("refused enrollment moved the Raft log from index %d to %d", index, i)
		}
	}
	refused(good, "used up (1/1 uses)")
	// A wrong secret and an unknown token get the same answer.
	refused(good[:7]+strings.Repeat("x", 16), state.EnrollmentTokenRefused)
	refused("zzzzzz.0123456789abcdef", state.EnrollmentTokenRefused)
	revoked := f.token(&roostv1.CreateEnrollmentTokenRequest{})
	if _, err := f.admin.RevokeEnrollmentToken(ctx, &roostv1.RevokeEnrollmentTokenRequest{Name: revoked[:6]}); err != nil {
		t.Fatal(err)
	}
	refused(revoked, "revoked at")
	short := f.token(&roostv1.CreateEnrollmentTokenRequest{TtlSeconds: 1})
	time.Sleep(1100 * time.Millisecond)
	refused(short, "expired at")

	// Malformed requests: InvalidArgument with field paths, no record.
	bad, _ := enrollReq(t, "nope", "not-a-uuid", "zz:zz")
	bad.Inventory.MemoryBytes = -1
	_, err = anon.Enroll(ctx, bad)
	e := apierror.FromError(err)
	if e == nil || e.Code != codes.InvalidArgument {
		t.Fatalf("malformed enroll: %v", err)
	}
	fields := map[string]bool{}
	for _, v := range e.Violations {
		fields[v.Field] = true
	}
	for _, want := range []string{"token", "identity.systemUuid", "identity.permanentMacs[0]", "inventory.memoryBytes"} {
		if !fields[want] {
			t.Errorf("no violation for %s in %v", want, e.Violations)
		}
	}

	// Operators' calls need an admin certificate; agents' calls an agent one.
	if _, err := anon.RenewCertificate(ctx, &roostv1.RenewCertificateRequest{CsrPem: req.CsrPem}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("anonymous renew: %v", err)
	}
}

func TestAgentStreamRenewAndRevokedToken(t *testing.T) {
	f := newAgentFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	anon := f.agentClient(nil, nil)
	tok := f.token(&roostv1.CreateEnrollmentTokenRequest{RequireApproval: true, ServerLabels: map[string]string{"rack": "r12"}})
	req, key := enrollReq(t, tok, testUUID, "52:54:00:00:00:01")
	resp, err := anon.Enroll(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	name := resp.GetServerName()
	agent := f.agentClient(resp.GetCertificatePem(), key)

	// A revoked token does not matter once enrolled.
	if _, err := f.admin.RevokeEnrollmentToken(ctx, &roostv1.RevokeEnrollmentTokenRequest{Name: tok[:6]}); err != nil {
		t.Fatal(err)
	}

	// Renew: the name comes from the certificate.
	csr2, key2, _ := ca.NewCSR("someone-else")
	rr, err := agent.RenewCertificate(ctx, &roostv1.RenewCertificateRequest{CsrPem: csr2})
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := tlsconfig.ParseCertificatePEM(rr.GetCertificatePem()); c.Subject.CommonName != name {
		t.Errorf("renewed certificate is for %q", c.Subject.CommonName)
	}
	agent = f.agentClient(rr.GetCertificatePem(), key2)

	// A hello naming another server is refused.
	st, err := agent.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Hello{Hello: &roostv1.Hello{ServerName: "other"}}})
	if _, err := st.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("mismatched hello: %v", err)
	}
	// Admins cannot open agent streams.
	adminAgent := f.agentClient([]byte(f.cfg.ClientCertificate), []byte(f.cfg.ClientKey))
	st, _ = adminAgent.Connect(ctx)
	st.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Hello{Hello: &roostv1.Hello{ServerName: "admin"}}})
	if _, err := st.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("admin stream: %v", err)
	}

	// The real stream.
	st, err = agent.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Hello{Hello: &roostv1.Hello{ServerName: name, AgentVersion: "v0.1.0"}}}); err != nil {
		t.Fatal(err)
	}
	m1, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if iv := m1.GetHeartbeatIntervalSeconds(); iv != 10 {
		t.Errorf("heartbeat interval %d, want 10 (30 s min TTL / 3)", iv)
	}
	mm, err := st.Recv()
	if got := mm.GetMembers().GetApiAddresses(); err != nil || len(got) != 1 || got[0] != f.h.APIAddr() {
		t.Fatalf("second message %v, %v; want the hub members [%s]", mm, err, f.h.APIAddr())
	}
	m2, err := st.Recv()
	if err != nil || m2.GetDesired() == nil {
		t.Fatalf("third message %v, %v; want desired state", m2, err)
	}
	get := func() *roostv1.Server {
		o, err := f.h.FSM().Get("Server", name)
		if err != nil {
			t.Fatal(err)
		}
		return o.GetServer()
	}
	waitFor(t, "PendingApproval", func() bool { return get().GetStatus().GetState() == state.ServerPendingApproval })
	if get().GetMetadata().GetLabels()["rack"] != "r12" || get().GetMetadata().GetLabels()["roost.io/cpus"] != "16" {
		t.Errorf("labels = %v", get().GetMetadata().GetLabels())
	}
	if _, err := f.admin.UpdateServer(ctx, &roostv1.UpdateServerRequest{Name: name, Action: roostv1.ServerAction_SERVER_ACTION_APPROVE}); err != nil {
		t.Fatal(err)
	}

	// Heartbeats write nothing to Raft; a status change writes once; the
	// same status again writes nothing. The leader's controllers react to
	// the approval at once (change-driven), so count from when they are
	// done: no entry applied for 500 ms.
	idx := settledIndex(t, f.h)
	for i := 0; i < 20; i++ {
		if err := st.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Heartbeat{Heartbeat: &roostv1.Heartbeat{}}}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if got := f.h.Node().AppliedIndex(); got != idx {
		t.Errorf("20 heartbeats moved the Raft index %d → %d", idx, got)
	}
	status1 := &roostv1.AgentStatus{BootedRevision: 1, Conditions: []*roostv1.Condition{{Type: "NetworkReady", Status: "True"}}}
	for i := 0; i < 3; i++ {
		if err := st.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Status{Status: status1}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "booted revision", func() bool { return get().GetStatus().GetBootedRevision() == 1 })
	time.Sleep(300 * time.Millisecond)
	if got := f.h.Node().AppliedIndex(); got != idx+1 {
		t.Errorf("3 identical status reports moved the Raft index %d → %d, want one entry", idx, got)
	}
	if s := get(); s.GetStatus().GetState() != state.ServerAvailable || s.GetStatus().GetReachability() != state.Reachable {
		t.Errorf("status = %v", s.GetStatus())
	}

	// An invalid status ends the stream with InvalidArgument.
	st.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Status{Status: &roostv1.AgentStatus{BootedRevision: -1}}})
	for {
		if _, err := st.Recv(); err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("invalid status: %v", err)
			}
			break
		}
	}

	// Decommissioned servers are refused, and an open stream ends at its next beat.
	open, err := agent.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	open.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Hello{Hello: &roostv1.Hello{ServerName: name, AgentVersion: "v0.1.0", BootedRevision: 1}}})
	for i := 0; i < 2; i++ {
		if _, err := open.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.admin.UpdateServer(ctx, &roostv1.UpdateServerRequest{Name: name, Action: roostv1.ServerAction_SERVER_ACTION_DECOMMISSION}); err != nil {
		t.Fatal(err)
	}
	// A decommission cleans first: the stream asks the agent to wipe the
	// disks, and the Server is Decommissioned once it reports success.
	for {
		m, err := open.Recv()
		if err != nil {
			t.Fatalf("waiting for the cleaning instruction: %v", err)
		}
		if c := m.GetDesired().GetCleaning(); c != nil {
			if c.GetMode() != "metadata" || c.GetIndex() == 0 {
				t.Errorf("cleaning instruction %v", c)
			}
			if got, _ := f.h.FSM().ServerState(name); got != "Cleaning" {
				t.Errorf("state %q while cleaning for the decommission", got)
			}
			open.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_CleaningResult{CleaningResult: &roostv1.CleaningResult{
				Index: c.GetIndex(), Succeeded: true, Disks: []string{"/dev/vda: metadata: partition tables and signatures zeroed"}}}})
			break
		}
	}
	open.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Heartbeat{Heartbeat: &roostv1.Heartbeat{}}})
	for {
		if _, err := open.Recv(); err != nil {
			if status.Code(err) != codes.PermissionDenied {
				t.Errorf("open stream after decommission: %v, want PermissionDenied", err)
			}
			break
		}
	}
	st, _ = agent.Connect(ctx)
	st.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Hello{Hello: &roostv1.Hello{ServerName: name}}})
	if _, err := st.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("decommissioned stream: %v", err)
	}
	if _, err := agent.RenewCertificate(ctx, &roostv1.RenewCertificateRequest{CsrPem: csr2}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("decommissioned renew: %v", err)
	}
}

// TestLivenessThroughFollowersAndFailover runs 3 members with a 2 s
// minimum TTL: an agent streaming to a follower stays Reachable (its
// heartbeats reach the leader's memory through ReportSeen), a silent one
// turns Unreachable, and killing the leader marks nobody Unreachable.
func TestLivenessThroughFollowersAndFailover(t *testing.T) {
	regs := map[string]*prometheus.Registry{}
	opts := func(id string) hub.Options {
		regs[id] = prometheus.NewRegistry()
		return hub.Options{NodeID: id, HeartbeatMinTTL: 2 * time.Second, Registry: regs[id]}
	}
	first := startHub(t, t.TempDir(), opts("hub-a"))
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(first.AdminConfigPath()); return err == nil })
	admin := dial(t, first.AdminConfigPath(), first.APIAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	jt, err := admin.CreateJoinToken(ctx, &roostv1.CreateJoinTokenRequest{MaxUses: 2})
	if err != nil {
		t.Fatal(err)
	}
	members := []*hub.Hub{first}
	for _, id := range []string{"hub-b", "hub-c"} {
		o := opts(id)
		o.Join, o.JoinToken = first.APIAddr(), jt.GetToken()
		members = append(members, startHub(t, t.TempDir(), o))
	}
	waitFor(t, "3 voters", func() bool {
		ms, err := admin.ListMembers(ctx, &roostv1.ListMembersRequest{})
		return err == nil && len(ms.GetMembers()) == 3
	})
	var leader, follower *hub.Hub
	waitFor(t, "a leader", func() bool {
		for _, m := range members {
			if m.Node().IsLeader() {
				leader = m
			}
		}
		return leader != nil
	})
	for _, m := range members {
		if m != leader {
			follower = m
			break
		}
	}
	cfg, _ := client.LoadConfig(first.AdminConfigPath())
	dialAs := func(addr string, cert, key []byte) roostv1.AgentServiceClient {
		c := &client.Config{Hubs: []string{addr}, CertificateAuthority: cfg.CertificateAuthority, ClientCertificate: string(cert), ClientKey: string(key)}
		conn, err := client.Dial(ctx, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return roostv1.NewAgentServiceClient(conn)
	}
	tokResp, err := admin.CreateEnrollmentToken(ctx, &roostv1.CreateEnrollmentTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Enroll two servers through the follower (forwarded to the leader).
	anon := dialAs(follower.APIAddr(), nil, nil)
	reqA, keyA := enrollReq(t, tokResp.GetToken(), testUUID, "52:54:00:00:00:01")
	respA, err := anon.Enroll(ctx, reqA)
	if err != nil {
		t.Fatal(err)
	}
	reqB, _ := enrollReq(t, tokResp.GetToken(), "", "52:54:00:00:00:02")
	respB, err := anon.Enroll(ctx, reqB)
	if err != nil {
		t.Fatal(err)
	}
	if len(respA.GetHubs()) != 3 {
		t.Errorf("hubs = %v, want all 3 members", respA.GetHubs())
	}

	agent := dialAs(follower.APIAddr(), respA.GetCertificatePem(), keyA)
	st, err := agent.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Hello{Hello: &roostv1.Hello{ServerName: respA.GetServerName()}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	beat := time.NewTicker(300 * time.Millisecond)
	defer beat.Stop()
	stopBeats := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopBeats:
				return
			case <-beat.C:
				st.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Heartbeat{Heartbeat: &roostv1.Heartbeat{}}})
			}
		}
	}()
	defer close(stopBeats)
	go func() {
		for {
			if _, err := st.Recv(); err != nil {
				return
			}
		}
	}()
	srv := func(m *hub.Hub, name string) *roostv1.ServerStatus {
		o, err := m.FSM().Get("Server", name)
		if err != nil {
			return nil
		}
		return o.GetServer().GetStatus()
	}
	waitFor(t, "A available (status forwarded by the follower)", func() bool {
		return srv(leader, respA.GetServerName()).GetState() == state.ServerAvailable
	})
	waitFor(t, "silent B unreachable", func() bool {
		return srv(leader, respB.GetServerName()).GetReachability() == state.Unreachable
	})
	if r := srv(leader, respA.GetServerName()).GetReachability(); r != state.Reachable {
		t.Fatalf("A (beating through a follower) is %s", r)
	}
	waitFor(t, "liveness metrics", func() bool {
		m := gather(t, regs[leader.ID()])
		return m["roost_servers_reachable"] == 1 && m["roost_servers_unreachable"] == 1 && m["roost_heartbeat_ttl_seconds"] == 2
	})
	if m := gather(t, regs[follower.ID()]); m["roost_agent_streams"] != 1 || m["roost_liveness_reports_total"] == 0 {
		t.Errorf("follower metrics: %v", m)
	}

	// Kill the leader; the agent's member survives. After a new leader's
	// grace period, A is still Reachable.
	killed := time.Now()
	leader.Close()
	var next *hub.Hub
	waitFor(t, "a new leader", func() bool {
		for _, m := range members {
			if m != leader && m.Node().IsLeader() {
				next = m
			}
		}
		return next != nil
	})
	t.Logf("new leader %s after %v", next.ID(), time.Since(killed))
	time.Sleep(4 * time.Second) // > ttl + jitter: the grace period is over
	if r := srv(next, respA.GetServerName()).GetReachability(); r != state.Reachable {
		t.Errorf("after failover A is %s", r)
	}
	if r := srv(next, respB.GetServerName()).GetReachability(); r != state.Unreachable {
		t.Errorf("after failover B is %s", r)
	}
}

// TestEnrollDuplicateUUIDAndReenroll: re-enrolling updates the same
// Server; another machine with the same UUID but other MACs is kept apart
// and both are flagged.
func TestEnrollDuplicateUUIDAndReenroll(t *testing.T) {
	f := newAgentFixture(t)
	ctx := context.Background()
	anon := f.agentClient(nil, nil)
	tok := f.token(&roostv1.CreateEnrollmentTokenRequest{})
	enroll := func(uuid string, macs ...string) string {
		t.Helper()
		req, _ := enrollReq(t, tok, uuid, macs...)
		resp, err := anon.Enroll(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetServerName()
	}
	a := enroll(strings.ToUpper(testUUID), "52:54:00:00:00:01", "52:54:00:00:00:02")
	if again := enroll(testUUID, "52:54:00:00:00:02", "52:54:00:00:00:01"); again != a || f.servers() != 1 {
		t.Fatalf("re-enroll named %q (first %q), %d servers", again, a, f.servers())
	}
	b := enroll(testUUID, "52:54:00:00:00:03")
	if b == a || !strings.HasPrefix(b, testUUID+"-") || len(b) != len(testUUID)+9 || f.servers() != 2 {
		t.Fatalf("duplicate UUID named %q, %d servers", b, f.servers())
	}
	for name, other := range map[string]string{a: b, b: a} {
		o, _ := f.h.FSM().Get("Server", name)
		found := false
		for _, c := range o.GetServer().GetStatus().GetConditions() {
			found = found || (c.GetType() == state.ConditionDuplicateUUID && c.GetStatus() == "True" && strings.Contains(c.GetMessage(), other))
		}
		if !found {
			t.Errorf("%s has no DuplicateUUID condition naming %s: %v", name, other, o.GetServer().GetStatus().GetConditions())
		}
	}
	// A placeholder UUID falls back to the MAC fingerprint.
	if c := enroll("03000200-0400-0500-0006-000700080009", "52:54:00:00:00:04"); !strings.HasPrefix(c, "mac-") || len(c) != 24 {
		t.Errorf("placeholder UUID named %q", c)
	}
}

// gather returns the value of every unlabelled gauge and counter in reg
// (labelled ones summed).
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[mf.GetName()] += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return out
}

// TestAgentLearnsNewMembers: a connected agent is told the hub's members
// when its stream opens and, at its next heartbeat, when a member joined.
func TestAgentLearnsNewMembers(t *testing.T) {
	f := newAgentFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, key := enrollReq(t, f.token(&roostv1.CreateEnrollmentTokenRequest{}), testUUID, "52:54:00:00:00:01")
	resp, err := f.agentClient(nil, nil).Enroll(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.agentClient(resp.GetCertificatePem(), key).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Hello{Hello: &roostv1.Hello{ServerName: resp.GetServerName()}}}); err != nil {
		t.Fatal(err)
	}
	members := func() []string {
		for {
			m, err := st.Recv()
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			if m.GetMembers() != nil {
				return m.GetMembers().GetApiAddresses()
			}
		}
	}
	if got := members(); len(got) != 1 || got[0] != f.h.APIAddr() {
		t.Fatalf("members %v, want [%s]", got, f.h.APIAddr())
	}
	jt, err := f.admin.CreateJoinToken(ctx, &roostv1.CreateJoinTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	second := startHub(t, t.TempDir(), hub.Options{Join: f.h.APIAddr(), JoinToken: jt.GetToken()})
	waitFor(t, "the new member's record", func() bool { return len(f.h.FSM().Members()) == 2 })
	// Beat as an agent does (faster): the hub reads its members at most
	// once a second, and tells the agent at a beat after the change.
	beating := make(chan struct{})
	defer close(beating)
	go func() {
		for {
			if st.Send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Heartbeat{Heartbeat: &roostv1.Heartbeat{SentAt: timestamppb.Now()}}}) != nil {
				return
			}
			select {
			case <-beating:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	want := []string{f.h.APIAddr(), second.APIAddr()}
	slices.Sort(want)
	if got := members(); !slices.Equal(got, want) {
		t.Fatalf("members after a join %v, want %v", got, want)
	}
}

// TestTokenLifetimeBounds: token lifetimes out of range (negative, longer
// than the bound, or large enough to overflow a time.Duration) are refused
// naming the field; the bounds themselves are accepted.
func TestTokenLifetimeBounds(t *testing.T) {
	f := newAgentFixture(t)
	ctx := context.Background()
	enrollMost, joinMost := int64(resource.MaxEnrollmentTokenTTL/time.Second), int64(resource.MaxJoinTokenTTL/time.Second)
	for _, ttl := range []int64{-1, joinMost + 1, enrollMost + 1, math.MaxInt64} {
		_, err := f.admin.CreateEnrollmentToken(ctx, &roostv1.CreateEnrollmentTokenRequest{TtlSeconds: ttl})
		if ttl == joinMost+1 {
			if err != nil {
				t.Errorf("enrollment token ttl %d: %v", ttl, err)
			}
		} else if status.Code(err) != codes.InvalidArgument || !strings.Contains(apierror.FromError(err).Error(), "ttlSeconds: must be 0 (never expires) to") {
			t.Errorf("enrollment token ttl %d: %v, want InvalidArgument naming ttlSeconds", ttl, err)
		}
		_, err = f.admin.CreateJoinToken(ctx, &roostv1.CreateJoinTokenRequest{TtlSeconds: ttl})
		if msg := apierror.FromError(err).Error(); status.Code(err) != codes.InvalidArgument || !strings.Contains(msg, "ttlSeconds: must be 0 (1 hour) to") || strings.Contains(msg, "maxUses") {
			t.Errorf("join token ttl %d: %v, want InvalidArgument naming ttlSeconds only", ttl, err)
		}
	}
	if _, err := f.admin.CreateEnrollmentToken(ctx, &roostv1.CreateEnrollmentTokenRequest{TtlSeconds: enrollMost}); err != nil {
		t.Errorf("enrollment token of the longest lifetime: %v", err)
	}
	if _, err := f.admin.CreateJoinToken(ctx, &roostv1.CreateJoinTokenRequest{TtlSeconds: joinMost}); err != nil {
		t.Errorf("join token of the longest lifetime: %v", err)
	}
}

// settledIndex waits until h applies no Raft entry for 500 ms (at most
// 20 s) and returns its applied index then.
func settledIndex(t *testing.T, h *hub.Hub) uint64 {
	t.Helper()
	idx, since := h.Node().AppliedIndex(), time.Now()
	waitFor(t, "no Raft entry applied for 500 ms", func() bool {
		if got := h.Node().AppliedIndex(); got != idx {
			idx, since = got, time.Now()
		}
		return time.Since(since) >= 500*time.Millisecond
	})
	return idx
}
