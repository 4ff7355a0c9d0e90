package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/api"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// auditEntries reads a member's audit log.
func auditEntries(t *testing.T, h *hub.Hub) []api.AuditEntry {
	t.Helper()
	f, err := os.Open(filepath.Join(filepath.Dir(h.AdminConfigPath()), "audit", "audit.log"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []api.AuditEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e api.AuditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// TestAuditRecordsEachCallOnce: a write sent to a follower, which forwards
// it to the leader, is recorded once, on the follower, with the original
// caller and the outcome; refused calls are recorded, reads are not.
func TestAuditRecordsEachCallOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three hub members")
	}
	hubs, conns := threeMembers(t)
	follower := -1
	for i, h := range hubs {
		if !h.Node().IsLeader() {
			follower = i
		}
	}
	before := map[string]int{}
	for _, h := range hubs {
		before[h.ID()] = len(auditEntries(t, h))
	}
	ops := createUser(t, conns[follower], "ops", "operator")
	opsHub := roostv1.NewHubServiceClient(dialAs(t, ops, hubs[follower].APIAddr()))
	ctx := context.Background()
	if _, err := opsHub.RevokeEnrollmentToken(ctx, &roostv1.RevokeEnrollmentTokenRequest{Name: "nope"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("operator revokes a token: %v", err)
	}
	if _, err := opsHub.RolloutControl(ctx, &roostv1.RolloutControlRequest{Pool: "nope", Action: roostv1.RolloutAction_ROLLOUT_ACTION_PAUSE}); status.Code(err) != codes.NotFound {
		t.Fatalf("operator pauses a missing pool: %v", err)
	}
	if _, err := opsHub.List(ctx, &roostv1.ListRequest{Kind: "Pool"}); err != nil {
		t.Fatal(err)
	}
	if _, err := roostv1.NewHubServiceClient(conns[follower]).CreateJoinToken(ctx, &roostv1.CreateJoinTokenRequest{MaxUses: 1}); err != nil {
		t.Fatal(err)
	}

	count := map[string]int{}
	for i, h := range hubs {
		for _, e := range auditEntries(t, h)[before[h.ID()]:] {
			key := e.Method + " " + e.Caller + " " + e.Role + " " + e.Code
			count[key]++
			if i != follower {
				t.Errorf("%s recorded %s's call %s, which went to %s", h.ID(), e.Caller, e.Method, hubs[follower].ID())
			}
			if e.Member != h.ID() || e.Source == "" || e.Time.IsZero() {
				t.Errorf("entry %+v on %s lacks member, source or time", e, h.ID())
			}
		}
	}
	for _, want := range []string{
		"/roost.v1.HubService/RevokeEnrollmentToken ops operator PermissionDenied",
		"/roost.v1.HubService/RolloutControl ops operator NotFound",
		"/roost.v1.HubService/CreateJoinToken admin admin OK",
		"/roost.v1.HubService/CreateUser admin admin OK",
	} {
		if count[want] != 1 {
			t.Errorf("%q recorded %d times, want once (all: %v)", want, count[want], count)
		}
	}
	got, err := roostv1.NewHubServiceClient(conns[follower]).ReadAudit(ctx, &roostv1.ReadAuditRequest{User: "ops", Kind: "token"})
	if err != nil || got.GetMember() != hubs[follower].ID() || len(got.GetEntries()) != 1 {
		t.Errorf("ReadAudit of ops on tokens = %v, %v; want the one refused revocation", got, err)
	}
	if _, err := opsHub.ReadAudit(ctx, &roostv1.ReadAuditRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("an operator reads the audit log: %v", err)
	}
	for k := range count {
		if k == "/roost.v1.HubService/List ops operator OK" {
			t.Errorf("a read was audited")
		}
	}
}
