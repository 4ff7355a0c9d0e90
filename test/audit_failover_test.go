package test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/api"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
	"github.com/roostfleet/roost/test/harness"
)

// auditCall is one mutating call the test made and what the audit log
// must say about it.
type auditCall struct {
	id, method, member, caller, role, code string
	// forwarded: sent to a follower, which forwards it to the leader.
	forwarded bool
}

// TestAuditFailoverRecordsEveryCallOnce is acceptance 2 of the day-2
// operations: three members in this process; users alice (admin) and bob
// (viewer) get certificates through CreateUser; alice's writes (Apply,
// Delete, CreateEnrollmentToken, RevokeEnrollmentToken) and bob's refused write are sent to the leader and to each follower
// (which forward them to the leader), each on a connection to that one
// member with a request ID of the test's; then the leader is killed and
// the same calls go to the new leader and to the remaining follower. The
// audit logs of all three members (ReadAudit of the two alive, the file
// of the killed one) must hold each request ID exactly once, on the
// member the call was sent to, with the user's name and role, the method
// and the outcome; no audited entry may be unaccounted for (bob's reads
// of the operations log, which a viewer may make, are not audited).
func TestAuditFailoverRecordsEveryCallOnce(t *testing.T) {
	c := harness.StartInProcess(t, harness.InProcessOptions{Voters: 3, FastRaft: true})
	ctx := harness.Context(t, 3*time.Minute)
	admin := c.Dial(t, nil)
	dir := t.TempDir()
	alice := userConfig(ctx, t, admin, dir, "alice", "admin")
	bob := userConfig(ctx, t, admin, dir, "bob", "viewer")

	var calls []auditCall
	var dead *hub.Hub // the killed leader
	seq := 0
	send := func(cfg string, h *hub.Hub, user, role string) {
		t.Helper()
		conn := harness.DialConfig(t, cfg, []string{h.APIAddr()})
		hc := roostv1.NewHubServiceClient(conn)
		do := func(method string, call func(ctx context.Context) error) {
			seq++
			id := fmt.Sprintf("audit-%s-%d", user, seq)
			err := call(client.WithRequestID(ctx, id))
			calls = append(calls, auditCall{id: id, method: "/roost.v1.HubService/" + method, member: h.ID(), caller: user, role: role,
				code: status.Code(err).String(), forwarded: !h.Node().IsLeader()})
			if user == "alice" && err != nil {
				t.Errorf("%s by alice on %s: %v", method, h.ID(), err)
			}
			if user == "bob" && status.Code(err) != codes.PermissionDenied {
				t.Errorf("%s by bob (viewer) on %s: %v, want PermissionDenied", method, h.ID(), err)
			}
		}
		if user == "bob" {
			// A viewer reads the operations log; reads are not audited
			// (an entry of it would be unaccounted for below).
			if _, err := hc.List(ctx, &roostv1.ListRequest{Kind: "Event", InvolvedObject: &roostv1.EventObject{Kind: "Pool", Name: "workers"}}); err != nil {
				t.Errorf("bob (viewer) lists Events on %s: %v", h.ID(), err)
			}
			do("CreateEnrollmentToken", func(ctx context.Context) error {
				_, err := hc.CreateEnrollmentToken(ctx, &roostv1.CreateEnrollmentTokenRequest{TtlSeconds: 3600})
				return err
			})
			return
		}
		window := fmt.Sprintf("audit-%d", seq)
		do("Apply", func(ctx context.Context) error {
			_, err := hc.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{resource.Wrap(&roostv1.MaintenanceWindow{
				ApiVersion: resource.APIVersion, Kind: "MaintenanceWindow", Metadata: &roostv1.ObjectMeta{Name: window},
				Spec: &roostv1.MaintenanceWindowSpec{Rrule: "FREQ=DAILY;BYHOUR=2", Duration: durationpb.New(time.Hour)}})}})
			return err
		})
		do("Delete", func(ctx context.Context) error {
			_, err := hc.Delete(ctx, &roostv1.DeleteRequest{Kind: "MaintenanceWindow", Name: window})
			return err
		})
		var token string
		do("CreateEnrollmentToken", func(ctx context.Context) error {
			resp, err := hc.CreateEnrollmentToken(ctx, &roostv1.CreateEnrollmentTokenRequest{TtlSeconds: 3600})
			token = resp.GetEnrollmentToken().GetMetadata().GetName()
			return err
		})
		do("RevokeEnrollmentToken", func(ctx context.Context) error {
			_, err := hc.RevokeEnrollmentToken(ctx, &roostv1.RevokeEnrollmentTokenRequest{Name: token})
			return err
		})
	}
	everyMember := func() {
		for _, h := range alive(c, dead) {
			send(alice, h, "alice", "admin")
			send(bob, h, "bob", "viewer")
		}
	}

	leader := c.Leader(ctx)
	everyMember()
	killed := slicesIndex(c.Hubs, leader)
	auditPath := filepath.Join(filepath.Dir(leader.AdminConfigPath()), "audit", "audit.log")
	c.Kill(killed)
	dead = leader
	next := c.Leader(ctx)
	if next == nil || next == leader {
		t.Fatal("no new leader after the kill")
	}
	harness.Report(t, "killed leader %s; %s leads", leader.ID(), next.ID())
	everyMember()

	// Collect the three logs.
	var entries []api.AuditEntry
	for _, h := range alive(c, dead) {
		resp, err := roostv1.NewHubServiceClient(harness.DialConfig(t, c.AdminConfig, []string{h.APIAddr()})).ReadAudit(ctx, &roostv1.ReadAuditRequest{Limit: 100000})
		if err != nil {
			t.Fatalf("ReadAudit on %s: %v", h.ID(), err)
		}
		if resp.GetMember() != h.ID() {
			t.Errorf("ReadAudit on %s answered for %s", h.ID(), resp.GetMember())
		}
		for _, line := range resp.GetEntries() {
			entries = append(entries, decodeAudit(t, line))
		}
	}
	f, err := os.Open(auditPath)
	if err != nil {
		t.Fatalf("the killed member's audit log: %v", err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		entries = append(entries, decodeAudit(t, sc.Text()))
	}
	f.Close()

	byID := map[string][]api.AuditEntry{}
	for _, e := range entries {
		if strings.HasPrefix(e.RequestID, "audit-") {
			byID[e.RequestID] = append(byID[e.RequestID], e)
		} else if e.Caller == "alice" || e.Caller == "bob" {
			t.Errorf("entry of %s without the test's request ID: %+v", e.Caller, e)
		}
	}
	for _, call := range calls {
		got := byID[call.id]
		if len(got) != 1 {
			t.Errorf("call %s (%s by %s on %s) appears %d times in the audit logs: %+v", call.id, call.method, call.caller, call.member, len(got), got)
			continue
		}
		e := got[0]
		if e.Method != call.method || e.Member != call.member || e.Caller != call.caller || e.Role != call.role || e.Code != call.code {
			t.Errorf("call %s: audit entry %+v, want method %s member %s caller %s role %s code %s", call.id, e, call.method, call.member, call.caller, call.role, call.code)
		}
		delete(byID, call.id)
	}
	var extra []string
	for id := range byID {
		extra = append(extra, id)
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("audit entries of no call of the test: %v", extra)
	}
	followers := 0
	for _, call := range calls {
		if call.forwarded {
			followers++
		}
	}
	if followers == 0 {
		t.Error("no call went to a follower")
	}
	harness.Report(t, "%d calls (%d sent to a follower), each once in the %d audit entries of 3 members", len(calls), followers, len(entries))
}

// alive lists the members of c not in dead, in order.
func alive(c *harness.InProcess, dead *hub.Hub) []*hub.Hub {
	var hs []*hub.Hub
	for _, h := range c.Hubs {
		if h != dead {
			hs = append(hs, h)
		}
	}
	return hs
}

func slicesIndex(hs []*hub.Hub, h *hub.Hub) int {
	for i, x := range hs {
		if x == h {
			return i
		}
	}
	return -1
}

// userConfig creates user name with role through the API and writes a
// client configuration for them (the key never leaves the test).
func userConfig(ctx context.Context, t *testing.T, admin roostv1.HubServiceClient, dir, name, role string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}, key)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := admin.CreateUser(ctx, &roostv1.CreateUserRequest{Name: name, Role: role,
		CsrPem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))})
	if err != nil {
		t.Fatalf("create user %s: %v", name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &client.Config{APIVersion: client.APIVersion, Kind: client.Kind, Hubs: []string{"127.0.0.1:1"},
		CertificateAuthority: resp.GetCaPem(), ClientCertificate: resp.GetCertificatePem(),
		ClientKey: string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))}
	path := filepath.Join(dir, name+".conf")
	if err := cfg.Write(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func decodeAudit(t *testing.T, line string) api.AuditEntry {
	t.Helper()
	var e api.AuditEntry
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		t.Fatalf("audit line %q: %v", line, err)
	}
	return e
}
