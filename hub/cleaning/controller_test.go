package cleaning

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

var t0 = time.Date(2026, 11, 3, 2, 0, 0, 0, time.UTC)

// rig is a real FSM applying commands at consecutive indexes, one second
// apart from t0, with the cleaning rules.
type rig struct {
	t        *testing.T
	f        *state.FSM
	idx      uint64
	proposed []*roostv1.Command
	now      time.Time
	failNext error
}

func newRig(t *testing.T) *rig { return &rig{t: t, f: state.New(state.Options{})} }

func (r *rig) apply(cmd *roostv1.Command) *state.ApplyResult {
	r.t.Helper()
	r.idx++
	cmd.RulesVersion = state.RulesCleaning
	cmd.Time = timestamppb.New(t0.Add(time.Duration(r.idx) * time.Second))
	data, err := proto.Marshal(cmd)
	if err != nil {
		r.t.Fatal(err)
	}
	res := r.f.Apply(&raft.Log{Index: r.idx, Type: raft.LogCommand, Data: data}).(*state.ApplyResult)
	if res.Err != nil {
		r.t.Fatal(res.Err)
	}
	return res
}

func (r *rig) controller() *Controller {
	return &Controller{FSM: r.f, Now: func() time.Time { return r.now },
		Propose: func(_ context.Context, c *roostv1.Command) error {
			r.proposed = append(r.proposed, c)
			if err := r.failNext; err != nil {
				r.failNext = nil
				return err
			}
			r.apply(c)
			return nil
		}}
}

const uuidA = "4c4c4544-0042-3510-8052-b4c04f564433"

// failedCleaning enrolls uuidA, claims it for a pool, releases it and
// records a failed cleaning; it returns the failure's time.
func (r *rig) failedCleaning() time.Time {
	sum := sha256.Sum256([]byte("abcdef.0123456789abcdef"))
	r.apply(&roostv1.Command{Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{
		Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: "abcdef"}, Spec: &roostv1.EnrollmentTokenSpec{SecretSha256: hex.EncodeToString(sum[:])}},
		Uid:   "00000000-0000-4000-8000-00000000aaaa"}}})
	r.apply(&roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{
		TokenName: "abcdef", SecretSha256: hex.EncodeToString(sum[:]), Uid: "00000000-0000-4000-8000-000000000010",
		Identity:  &roostv1.ServerIdentity{SystemUuid: uuidA, PermanentMacs: []string{"52:54:00:00:00:01"}},
		Inventory: &roostv1.Inventory{Cpu: &roostv1.CPUInfo{Threads: 16}, MemoryBytes: 64 << 30}}}})
	r.apply(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{Name: uuidA, Connected: true}}})
	r.apply(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{Objects: []*roostv1.Object{
		resource.Wrap(&roostv1.Cluster{Metadata: &roostv1.ObjectMeta{Name: "prod"}, Spec: &roostv1.ClusterSpec{ApiEndpoint: "https://10.0.0.1:6443"}}),
		resource.Wrap(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "workers"}, Spec: &roostv1.PoolSpec{Cluster: "prod"}}),
	}, Uids: []string{"00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"}}}})
	r.apply(&roostv1.Command{Command: &roostv1.Command_CreateMachines{CreateMachines: &roostv1.CreateMachines{Machines: []*roostv1.NewMachine{{
		Name: "workers-abcde", Uid: "00000000-0000-4000-8000-000000000020", Server: uuidA, Pool: "workers"}}}}})
	rel := r.apply(&roostv1.Command{Command: &roostv1.Command_DeleteMachines{DeleteMachines: &roostv1.DeleteMachines{Pool: "workers", Servers: []string{uuidA}}}})
	r.apply(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{Name: uuidA,
		CleaningResult: &roostv1.CleaningResult{Index: rel.Index, Error: "wipe /dev/vdb: read-only file system"}}}})
	return t0.Add(time.Duration(r.idx) * time.Second)
}

func (r *rig) server() *roostv1.ServerStatus {
	o, err := r.f.Get("Server", uuidA)
	if err != nil {
		r.t.Fatal(err)
	}
	return o.GetServer().GetStatus()
}

func TestRetryBackoff(t *testing.T) {
	for n, want := range map[int32]time.Duration{0: time.Minute, 1: time.Minute, 2: 2 * time.Minute, 3: 4 * time.Minute, 7: time.Hour, 100: time.Hour} {
		if got := RetryBackoff(n); got != want {
			t.Errorf("RetryBackoff(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestReconcileRetriesAfterBackoff(t *testing.T) {
	r := newRig(t)
	failed := r.failedCleaning()
	c := r.controller()
	ctx := context.Background()

	// Before the backoff: nothing proposed, called again when it ends.
	r.now = failed.Add(20 * time.Second)
	res, err := c.Reconcile(ctx, uuidA)
	if err != nil || res.RequeueAfter != 40*time.Second || len(r.proposed) != 0 {
		t.Fatalf("early: %v, %v, %d proposals", res, err, len(r.proposed))
	}
	// A failed proposal is an error (retried by the queue with backoff).
	r.now = failed.Add(time.Minute)
	r.failNext = errors.New("not the leader")
	if _, err := c.Reconcile(ctx, uuidA); err == nil || !strings.Contains(err.Error(), "retrying the cleaning of Server "+uuidA) {
		t.Fatalf("failed proposal: %v", err)
	}
	// Due: a new attempt.
	res, err = c.Reconcile(ctx, uuidA)
	if err != nil || res.RequeueAfter != 0 {
		t.Fatal(res, err)
	}
	st := r.server()
	if st.GetState() != state.ServerCleaning || st.GetCleaning().GetAttempts() != 2 || st.GetCleaning().GetIndex() != r.idx {
		t.Fatalf("after the retry: %v", st)
	}
	if a := r.proposed[len(r.proposed)-1].GetModifyServer().GetAction(); a != roostv1.ServerAction_SERVER_ACTION_CLEAN {
		t.Errorf("proposed %v", a)
	}
	// Cleaning: nothing to do (idempotent).
	n := len(r.proposed)
	if res, err := c.Reconcile(ctx, uuidA); err != nil || res.RequeueAfter != 0 || len(r.proposed) != n {
		t.Fatalf("while cleaning: %v, %v", res, err)
	}
	// The second failure waits twice as long.
	r.apply(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{Name: uuidA,
		CleaningResult: &roostv1.CleaningResult{Index: st.GetCleaning().GetIndex(), Error: "again"}}}})
	r.now = t0.Add(time.Duration(r.idx) * time.Second)
	if res, err := c.Reconcile(ctx, uuidA); err != nil || res.RequeueAfter != 2*time.Minute {
		t.Fatalf("second failure: %v, %v", res, err)
	}
	// Gone and unknown Servers are done.
	if res, err := c.Reconcile(ctx, "nope"); err != nil || res.RequeueAfter != 0 {
		t.Fatal(res, err)
	}
}
