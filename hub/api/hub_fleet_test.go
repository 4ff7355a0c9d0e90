package api

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/liveness"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// fleetFixture is an api.Server on an FSM that the test feeds commands
// directly (no Raft node: only the leader-side checks run).
type fleetFixture struct {
	t   *testing.T
	f   *state.FSM
	s   *Server
	idx uint64
	now time.Time
}

func newFleetFixture(t *testing.T) *fleetFixture {
	x := &fleetFixture{t: t, f: state.New(state.Options{}), now: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}
	clock := func() time.Time { return x.now }
	x.s = New(Config{FSM: x.f, Now: clock, Tracker: liveness.NewTracker(liveness.Config{MinTTL: 30 * time.Second, Now: clock})})
	return x
}

func (x *fleetFixture) apply(cmd *roostv1.Command) {
	x.t.Helper()
	x.idx++
	cmd.Time = timestamppb.New(x.now)
	data, err := proto.Marshal(cmd)
	if err != nil {
		x.t.Fatal(err)
	}
	if res := x.f.Apply(&raft.Log{Index: x.idx, Term: 1, Type: raft.LogCommand, Data: data}).(*state.ApplyResult); res.Err != nil {
		x.t.Fatalf("apply %v: %v", cmd, res.Err)
	}
}

// availableServer enrolls a Server whose agent connected (Available).
func (x *fleetFixture) availableServer(uuid string) string {
	x.t.Helper()
	const secret = "abcdef.0123456789abcdef"
	sum := sha256.Sum256([]byte(secret))
	if _, err := x.f.Get("EnrollmentToken", "abcdef"); err != nil {
		x.apply(&roostv1.Command{Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{
			Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: "abcdef"}, Spec: &roostv1.EnrollmentTokenSpec{SecretSha256: hex.EncodeToString(sum[:])}},
			Uid:   "00000000-0000-4000-8000-00000000aaaa"}}})
	}
	x.apply(&roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{
		TokenName: "abcdef", SecretSha256: hex.EncodeToString(sum[:]), Identity: &roostv1.ServerIdentity{SystemUuid: uuid},
		Uid: "00000000-0000-4000-8000-" + uuid[len(uuid)-12:]}}})
	x.apply(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{Name: uuid, Connected: true}}})
	return uuid
}

func wantRefusal(t *testing.T, what string, err error, code codes.Code, parts ...string) {
	t.Helper()
	if apierror.Code(err) != code {
		t.Errorf("%s: %v, want %v", what, err, code)
		return
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %q lacks %q", what, err, p)
		}
	}
}

// Deleting a Server that is still in service is refused unless forced,
// with the command that takes it out of service; a Decommissioned one may
// go; a Claimed one is refused with the command that releases it.
func TestCheckServerDelete(t *testing.T) {
	x := newFleetFixture(t)
	a := x.availableServer("4c4c4544-0042-3510-8052-00000000000a")

	err := x.s.checkServerDelete(a, false)
	wantRefusal(t, "delete an Available server", err, codes.FailedPrecondition,
		"Server "+a+" is Available and its agent is Reachable", "'roostctl server decommission "+a+"'", "'roostctl delete server "+a+" --force'")

	// While this member leads and hears the agent, the refusal says it is connected.
	x.s.tracker.StartLeading()
	x.s.tracker.Seen(a)
	x.now = x.now.Add(3 * time.Second)
	wantRefusal(t, "delete a connected server", x.s.checkServerDelete(a, false), codes.FailedPrecondition,
		"its agent is connected (last heartbeat 3s ago)")

	if err := x.s.checkServerDelete(a, true); err != nil {
		t.Errorf("--force: %v", err)
	}
	if err := x.s.checkServerDelete("nope", false); err != nil {
		t.Errorf("unknown server: %v, want nil (the delete answers NotFound)", err)
	}

	// Claimed: the Machine and the command that releases it, even with --force.
	x.apply(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{
		Objects: []*roostv1.Object{{Kind: &roostv1.Object_Pool{Pool: &roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "workers"}, Spec: &roostv1.PoolSpec{}}}}},
		Uids:    []string{"00000000-0000-4000-8000-00000000cccc"}}}})
	x.apply(&roostv1.Command{Command: &roostv1.Command_CreateMachines{CreateMachines: &roostv1.CreateMachines{Machines: []*roostv1.NewMachine{
		{Name: "workers-abcde", Uid: "00000000-0000-4000-8000-00000000dddd", Server: a, Pool: "workers"}}}}})
	for _, force := range []bool{false, true} {
		wantRefusal(t, "delete a claimed server", x.s.checkServerDelete(a, force), codes.FailedPrecondition,
			"claimed by Machine workers-abcde of Pool workers", "'roostctl pool unassign workers "+a+"'",
			"then decommission it ('roostctl server decommission "+a+"') and delete it")
	}
	x.apply(&roostv1.Command{Command: &roostv1.Command_DeleteMachines{DeleteMachines: &roostv1.DeleteMachines{Names: []string{"workers-abcde"}}}})

	x.apply(&roostv1.Command{Command: &roostv1.Command_ModifyServer{ModifyServer: &roostv1.ModifyServer{Name: a, Action: roostv1.ServerAction_SERVER_ACTION_DECOMMISSION}}})
	if err := x.s.checkServerDelete(a, false); err != nil {
		t.Errorf("delete a decommissioned server: %v", err)
	}
}

// An approval changes only a Server that awaits one.
func TestAwaitsApproval(t *testing.T) {
	cond := func(status string) *roostv1.Server {
		return &roostv1.Server{Status: &roostv1.ServerStatus{State: state.ServerPendingApproval,
			Conditions: []*roostv1.Condition{{Type: state.ConditionApproved, Status: status}}}}
	}
	for name, tc := range map[string]struct {
		srv  *roostv1.Server
		want bool
	}{
		"pending":                 {cond("False"), true},
		"approved":                {cond("True"), false},
		"no approval needed":      {&roostv1.Server{Status: &roostv1.ServerStatus{State: state.ServerClaimed}}, false},
		"decommissioned (refuse)": {&roostv1.Server{Status: &roostv1.ServerStatus{State: state.ServerDecommissioned}}, true},
	} {
		if got := awaitsApproval(tc.srv); got != tc.want {
			t.Errorf("%s: awaitsApproval = %v, want %v", name, got, tc.want)
		}
	}
}
