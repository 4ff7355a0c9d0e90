package hub_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/roostfleet/roost/hub"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// gauge returns the value of the metric name (without labels) in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// A follower whose log changes on disk while it runs is noticed by the
// online log verification at the leader's next checkpoint: it logs it,
// counts it, and reports itself unhealthy; the other members verify fine.
func TestLogVerificationNoticesADivergingFollower(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	first := startHub(t, dirs[0], hub.Options{NodeID: "hub-a", LogVerifyInterval: -1})
	waitFor(t, "admin.conf", func() bool { return fileExists(first.AdminConfigPath()) })
	admin := dial(t, first.AdminConfigPath(), first.APIAddr())
	ctx := context.Background()
	tok, err := admin.CreateJoinToken(ctx, &roostv1.CreateJoinTokenRequest{MaxUses: 2})
	if err != nil {
		t.Fatal(err)
	}
	regC := prometheus.NewRegistry()
	members := []*hub.Hub{first,
		startHub(t, dirs[1], hub.Options{NodeID: "hub-b", Join: first.APIAddr(), JoinToken: tok.GetToken(), LogVerifyInterval: -1}),
		startHub(t, dirs[2], hub.Options{NodeID: "hub-c", Join: first.APIAddr(), JoinToken: tok.GetToken(), LogVerifyInterval: -1, Registry: regC}),
	}
	waitFor(t, "3 voters", func() bool {
		ms, err := admin.ListMembers(ctx, &roostv1.ListMembersRequest{})
		return err == nil && len(ms.GetMembers()) == 3
	})
	applyClusters(t, admin, "early", 3)
	if err := first.Node().Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every member verified the first range", func() bool {
		for _, m := range members {
			if v := m.Node().LogVerification(); v.Verified < 1 || v.Failure != nil {
				return false
			}
		}
		return true
	})

	applyClusters(t, admin, "late", 5)
	waitFor(t, "hub-c applied late-4", func() bool { _, err := members[2].FSM().Get("Cluster", "late-4"); return err == nil })
	flipByte(t, newestFile(t, dirs[2]+"/raft/wal/*.wal"), "late-2")
	if err := first.Node().Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "hub-c's verification failed", func() bool { return members[2].Node().LogVerification().Failure != nil })
	t.Log(members[2].Node().LogVerification().Failure)
	for _, m := range members[:2] {
		waitFor(t, m.ID()+" verified the second range", func() bool { return m.Node().LogVerification().Verified >= 2 })
		if v := m.Node().LogVerification(); v.Failure != nil {
			t.Errorf("%s: %v", m.ID(), v.Failure)
		}
	}
	if g := gauge(t, regC, "roost_raft_log_verification_failed"); g != 1 {
		t.Errorf("roost_raft_log_verification_failed = %v on hub-c, want 1", g)
	}
	// Unhealthy as the others see it (its gRPC health service), and why
	// as it says itself.
	hubC := dial(t, first.AdminConfigPath(), members[2].APIAddr())
	for _, tc := range []struct {
		via  roostv1.HubServiceClient
		want string
	}{{admin, "NOT_SERVING"}, {hubC, "differs from the leader's"}} {
		waitFor(t, "hub-c listed Unhealthy: "+tc.want, func() bool {
			ms, err := tc.via.ListMembers(ctx, &roostv1.ListMembersRequest{})
			for _, m := range ms.GetMembers() {
				if m.GetId() == "hub-c" {
					return err == nil && m.GetHealth() == "Unhealthy" && strings.Contains(m.GetHealthMessage(), tc.want)
				}
			}
			return false
		})
	}
}

// The leader appends a checkpoint after the log grew, and none while the
// hub is idle (an idle hub's Raft index does not move).
func TestLogVerificationCheckpointsOnlyAfterWrites(t *testing.T) {
	dir := t.TempDir()
	h := startHub(t, dir, hub.Options{LogVerifyInterval: 50 * time.Millisecond})
	waitFor(t, "admin.conf", func() bool { return fileExists(h.AdminConfigPath()) })
	c := dial(t, h.AdminConfigPath(), h.APIAddr())
	applyClusters(t, c, "one", 1)
	waitFor(t, "a checkpoint verified", func() bool {
		v := h.Node().LogVerification()
		return v.Checkpoints >= 1 && v.Verified >= 1 && v.Failure == nil
	})
	var idle uint64
	waitFor(t, "the log to settle", func() bool {
		before := h.Node().LastIndex()
		time.Sleep(200 * time.Millisecond)
		idle = h.Node().LastIndex()
		return idle == before
	})
	time.Sleep(300 * time.Millisecond) // six more intervals
	if got := h.Node().LastIndex(); got != idle {
		t.Fatalf("the idle hub's last index moved from %d to %d", idle, got)
	}
}
