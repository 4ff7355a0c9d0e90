package remediation

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func int32p(n int32) *int32 { return &n }

func TestPolicyOf(t *testing.T) {
	mu := func(n int32) *roostv1.RolloutPolicy {
		return &roostv1.RolloutPolicy{MaxUnavailable: &roostv1.IntOrString{Value: &roostv1.IntOrString_IntVal{IntVal: n}}}
	}
	for _, tc := range []struct {
		name string
		spec *roostv1.PoolSpec
		want Policy
	}{
		{"defaults", &roostv1.PoolSpec{}, Policy{UnhealthyTimeout: 10 * time.Minute, MaxInFlight: 1, MaxUnhealthyPercent: 40}},
		{"set", &roostv1.PoolSpec{Rollout: mu(3), Remediation: &roostv1.RemediationPolicy{UnhealthyTimeout: durationpb.New(15 * time.Minute),
			OnFailedRevision: "replace", MaxInFlight: int32p(2)}, Safety: &roostv1.SafetyPolicy{MaxUnhealthyPercent: int32p(25)}},
			Policy{UnhealthyTimeout: 15 * time.Minute, ReplaceFailedRevision: true, MaxInFlight: 2, MaxUnhealthyPercent: 25}},
		{"maxInFlight capped by maxUnavailable", &roostv1.PoolSpec{Rollout: mu(2), Remediation: &roostv1.RemediationPolicy{MaxInFlight: int32p(5)}},
			Policy{UnhealthyTimeout: 10 * time.Minute, MaxInFlight: 2, MaxUnhealthyPercent: 40}},
		{"off", &roostv1.PoolSpec{Remediation: &roostv1.RemediationPolicy{MaxInFlight: int32p(0), OnFailedRevision: "hold"}},
			Policy{UnhealthyTimeout: 10 * time.Minute, MaxInFlight: 0, MaxUnhealthyPercent: 40}},
	} {
		if got := PolicyOf(&roostv1.Pool{Spec: tc.spec}); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// member builds a Machine of a pool: provisioned or not, Ready or not,
// on a Server reachable or not.
func testMember(name string, provisioned, ready, reachable bool) member {
	m := &roostv1.Machine{Metadata: &roostv1.ObjectMeta{Name: name}, Spec: &roostv1.MachineSpec{Server: "s-" + name}, Status: &roostv1.MachineStatus{}}
	if provisioned {
		m.Status.BootedRevision, m.Status.Revision = 1, 1
	}
	st := "False"
	if ready {
		st = "True"
	}
	m.Status.Conditions = []*roostv1.Condition{{Type: state.MachineReady, Status: st}}
	srv := &roostv1.Server{Metadata: &roostv1.ObjectMeta{Name: "s-" + name}, Status: &roostv1.ServerStatus{Reachability: state.Reachable}}
	if !reachable {
		srv.Status.Reachability = state.Unreachable
	}
	return member{m: m, server: srv}
}

func TestFreeze(t *testing.T) {
	pool := func(replicas *int32) *roostv1.Pool {
		return &roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "web"}, Spec: &roostv1.PoolSpec{Cluster: "prod", Replicas: replicas}}
	}
	healthy := func(n int) []member {
		var out []member
		for i := range n {
			out = append(out, testMember(string(rune('a'+i)), true, true, true))
		}
		return out
	}
	cluster := func(status, reason string) *roostv1.Cluster {
		return &roostv1.Cluster{Metadata: &roostv1.ObjectMeta{Name: "prod"}, Status: &roostv1.ClusterStatus{Conditions: []*roostv1.Condition{
			{Type: state.ClusterReachable, Status: status, Reason: reason, Message: "dial tcp: connection refused"}}}}
	}
	pol := Policy{MaxUnhealthyPercent: 40}
	tenDown := healthy(10)
	for i := range 4 {
		tenDown[i] = testMember(tenDown[i].name(), true, false, false)
	}
	fiveDown := healthy(10)
	for i := range 5 {
		fiveDown[i] = testMember(fiveDown[i].name(), true, false, false)
	}
	installing := healthy(10)
	for i := range 6 {
		installing[i] = testMember(installing[i].name(), false, false, true) // never provisioned: not unhealthy
	}
	for _, tc := range []struct {
		name   string
		v      *poolView
		reason string
	}{
		{"healthy", &poolView{pool: pool(int32p(10)), members: healthy(10), cluster: cluster("True", "Reachable")}, ""},
		{"40% down is not more than 40%", &poolView{pool: pool(int32p(10)), members: tenDown}, ""},
		{"50% down", &poolView{pool: pool(int32p(10)), members: fiveDown}, state.ReasonTooManyUnhealthy},
		{"first installs are not unhealthy", &poolView{pool: pool(int32p(10)), members: installing}, ""},
		{"cluster down", &poolView{pool: pool(int32p(10)), members: healthy(10), cluster: cluster("False", "Unreachable")}, state.ReasonClusterUnreachable},
		{"cluster without credentials", &poolView{pool: pool(int32p(10)), members: healthy(10), cluster: cluster("False", "NoCredentials")}, ""},
		{"over-replicated", &poolView{pool: pool(int32p(9)), members: healthy(10)}, state.ReasonOverReplicated},
		{"explicit members", &poolView{pool: pool(nil), members: healthy(10)}, ""},
		{"one of two down is not many", &poolView{pool: pool(int32p(2)), members: append(healthy(1), testMember("z", true, false, false))}, ""},
		{"two of three down", &poolView{pool: pool(int32p(3)), members: append(healthy(1), testMember("y", true, false, false), testMember("z", true, false, false))}, state.ReasonTooManyUnhealthy},
	} {
		reason, msg := freeze(tc.v, pol)
		if reason != tc.reason {
			t.Errorf("%s: freeze = %q (%s), want %q", tc.name, reason, msg, tc.reason)
		}
		if reason == state.ReasonClusterUnreachable && (!strings.Contains(msg, "Cluster prod") || strings.Contains(msg, "dial tcp")) {
			t.Errorf("%s: message %q: want the Cluster named and its volatile error left out", tc.name, msg)
		}
	}
}

func TestFailure(t *testing.T) {
	pol := Policy{UnhealthyTimeout: 10 * time.Minute, ReplaceFailedRevision: true}
	since := time.Date(2027, 5, 3, 9, 0, 0, 0, time.UTC)
	down := testMember("a", true, false, false)
	down.m.Status.Conditions[0].LastTransitionTime = timestampAt(since)
	if reason, _, due := down.failure(pol); reason != state.ReasonUnreachable || !due.Equal(since.Add(10*time.Minute)) {
		t.Errorf("unreachable: %q due %v", reason, due)
	}
	down.leased = true
	if reason, _, _ := down.failure(pol); reason != "" {
		t.Errorf("rebooting under a Lease: %q, want none (the rollout's readyTimeout judges it)", reason)
	}
	failed := testMember("b", true, true, true)
	failed.m.Status.Revision, failed.m.Status.FailedRevision = 2, 2
	if reason, _, _ := failed.failure(pol); reason != state.ReasonRevisionFailed {
		t.Errorf("failed revision with replace: %q", reason)
	}
	pol.ReplaceFailedRevision = false
	if reason, _, _ := failed.failure(pol); reason != "" {
		t.Errorf("failed revision with hold: %q", reason)
	}
}

func timestampAt(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }
