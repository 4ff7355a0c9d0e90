package scheduler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// fakeHub applies proposed commands to an in-memory FSM, as Raft would.
type fakeHub struct {
	t        *testing.T
	f        *state.FSM
	idx      uint64
	leader   bool
	proposed []*roostv1.Command
	failNext error
	names    int
}

func newFakeHub(t *testing.T) *fakeHub {
	return &fakeHub{t: t, f: state.New(state.Options{}), leader: true}
}

func (h *fakeHub) apply(cmd *roostv1.Command) error {
	h.idx++
	cmd.Time = timestamppb.New(time.Date(2026, 11, 3, 2, 0, 0, 0, time.UTC).Add(time.Duration(h.idx) * time.Second))
	data, err := proto.Marshal(cmd)
	if err != nil {
		h.t.Fatal(err)
	}
	res := h.f.Apply(&raft.Log{Index: h.idx, Type: raft.LogCommand, Data: data}).(*state.ApplyResult)
	return res.Err
}

func (h *fakeHub) mustApply(cmd *roostv1.Command) {
	h.t.Helper()
	if err := h.apply(cmd); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHub) controller() *Controller {
	return &Controller{
		IsLeader: func() bool { return h.leader },
		Read:     func() (Snapshot, error) { return ReadFSM(h.f) },
		Propose: func(_ context.Context, c *roostv1.Command) error {
			h.proposed = append(h.proposed, c)
			if err := h.failNext; err != nil {
				h.failNext = nil
				return err
			}
			return h.apply(c)
		},
		NewName: func(pool string) string { h.names++; return fmt.Sprintf("%s-%d", pool, h.names) },
		NewUID:  func() string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", h.idx+100) },
	}
}

const secret = "abcdef.0123456789abcdef"

// server enrolls an Available Server named uuid with cpus CPUs.
func (h *fakeHub) server(uuid string, cpus int32) {
	if _, err := h.f.Get("EnrollmentToken", "abcdef"); err != nil {
		sum := sha256.Sum256([]byte(secret))
		h.mustApply(&roostv1.Command{Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{
			Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: "abcdef"}, Spec: &roostv1.EnrollmentTokenSpec{SecretSha256: hex.EncodeToString(sum[:])}},
			Uid:   "00000000-0000-4000-8000-00000000aaaa"}}})
	}
	sum := sha256.Sum256([]byte(secret))
	h.mustApply(&roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{
		TokenName: "abcdef", SecretSha256: hex.EncodeToString(sum[:]), Uid: "00000000-0000-4000-8000-" + uuid[24:],
		Identity:  &roostv1.ServerIdentity{SystemUuid: uuid, PermanentMacs: []string{"52:54:00:00:00:" + uuid[34:]}},
		Inventory: &roostv1.Inventory{Cpu: &roostv1.CPUInfo{Threads: cpus}, MemoryBytes: 64 << 30}}}})
	h.mustApply(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{Name: uuid, Connected: true}}})
}

func (h *fakeHub) pool(replicas *int32) {
	spec := &roostv1.PoolSpec{Cluster: "prod", MachineClass: "big", Replicas: replicas}
	objs := []*roostv1.Object{
		resource.Wrap(&roostv1.Cluster{Metadata: &roostv1.ObjectMeta{Name: "prod"}, Spec: &roostv1.ClusterSpec{ApiEndpoint: "https://10.0.0.1:6443"}}),
		resource.Wrap(&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "big"}, Spec: &roostv1.MachineClassSpec{ServerSelector: []string{"roost.io/cpus>=16"}}}),
		resource.Wrap(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "workers"}, Spec: spec}),
	}
	h.mustApply(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{Objects: objs,
		Uids: []string{"00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002", "00000000-0000-4000-8000-000000000003"}}}})
}

// members returns "machine=server" of the pool's Machines, by name.
func (h *fakeHub) members() []string {
	objs, _, err := h.f.List("Machine", "")
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.GetMachine().GetMetadata().GetName()+"="+o.GetMachine().GetSpec().GetServer()[34:])
	}
	return out
}

// replicaFailure is the workers Pool's ReplicaFailure condition, or nil.
func (h *fakeHub) replicaFailure() *roostv1.Condition {
	o, err := h.f.Get("Pool", "workers")
	if err != nil {
		h.t.Fatal(err)
	}
	return state.FindCondition(o.GetPool().GetStatus().GetConditions(), state.PoolReplicaFailure)
}

func uuidN(n int) string { return fmt.Sprintf("4c4c4544-0042-3510-8052-0000000000%02d", n) }

func TestReplicas(t *testing.T) {
	h := newFakeHub(t)
	h.pool(proto.Int32(2))
	h.server(uuidN(3), 16)
	h.server(uuidN(1), 32)
	h.server(uuidN(2), 4) // does not match the selector
	h.server(uuidN(4), 16)
	h.mustApply(&roostv1.Command{Command: &roostv1.Command_ModifyServer{ModifyServer: &roostv1.ModifyServer{
		Name: uuidN(4), Action: roostv1.ServerAction_SERVER_ACTION_CORDON}}})
	c := h.controller()
	ctx := context.Background()

	barriers := 0
	c.Barrier = func(context.Context) error {
		barriers++
		if barriers == 1 {
			return errors.New("not yet")
		}
		return nil
	}
	h.leader = false
	if err := c.Step(ctx); err != nil || len(h.proposed) != 0 {
		t.Fatalf("a follower proposed %v (err %v)", h.proposed, err)
	}
	h.leader = true
	if err := c.Step(ctx); err == nil || len(h.proposed) != 0 {
		t.Fatalf("planned without a barrier: %v (err %v)", h.proposed, err)
	}
	if err := c.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(h.members()); got != "[workers-1=01 workers-2=03]" {
		t.Fatalf("members %s", got)
	}
	// Idempotent: nothing more to do.
	n := len(h.proposed)
	if err := c.Step(ctx); err != nil || len(h.proposed) != n {
		t.Fatalf("second step proposed %v (err %v)", h.proposed[n:], err)
	}

	if barriers != 2 {
		t.Errorf("%d barriers in one term, want 2 (one failed)", barriers)
	}

	// More replicas than matching Servers: claims what there is, no error,
	// and the Pool says at once why it stays short.
	h.mustApply(&roostv1.Command{Command: &roostv1.Command_ModifyServer{ModifyServer: &roostv1.ModifyServer{
		Name: uuidN(4), Action: roostv1.ServerAction_SERVER_ACTION_UNCORDON}}})
	h.setReplicas(5)
	if err := c.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(h.members()); got != "[workers-1=01 workers-2=03 workers-3=04]" {
		t.Fatalf("members %s", got)
	}
	want := "2 of 5 replicas; only 1 more Server can be claimed: 3 Servers match MachineClass big (roost.io/cpus>=16): 2 claimed by this Pool; " +
		"of the 4 enrolled, 1 does not match: roost.io/cpus>=16 excludes 1"
	cond := h.replicaFailure()
	if cond.GetStatus() != "True" || cond.GetReason() != state.ReasonNoMatchingServers || cond.GetMessage() != want {
		t.Fatalf("ReplicaFailure while claiming the last Server %v, want True %s %q", cond, state.ReasonNoMatchingServers, want)
	}
	since := cond.GetLastTransitionTime().AsTime()
	// The next step updates the counts (status unchanged: the transition
	// time stays), then nothing more is written.
	n = len(h.proposed)
	if err := c.Step(ctx); err != nil || len(h.proposed) != n+1 {
		t.Fatalf("step after the claim proposed %v (err %v), want the condition's new message", h.proposed[n:], err)
	}
	want = "3 of 5 replicas; no more Servers can be claimed: 3 Servers match MachineClass big (roost.io/cpus>=16): 3 claimed by this Pool; " +
		"of the 4 enrolled, 1 does not match: roost.io/cpus>=16 excludes 1"
	if cond := h.replicaFailure(); cond.GetMessage() != want || !cond.GetLastTransitionTime().AsTime().Equal(since) {
		t.Fatalf("ReplicaFailure %v, want %q since %v", cond, want, since)
	}
	n = len(h.proposed)
	if err := c.Step(ctx); err != nil || len(h.proposed) != n {
		t.Fatalf("step without candidates proposed %v (err %v)", h.proposed[n:], err)
	}
	// A cordoned Server is counted by cause.
	h.server(uuidN(5), 64)
	h.mustApply(&roostv1.Command{Command: &roostv1.Command_ModifyServer{ModifyServer: &roostv1.ModifyServer{
		Name: uuidN(5), Action: roostv1.ServerAction_SERVER_ACTION_CORDON}}})
	if err := c.Step(ctx); err != nil {
		t.Fatal(err)
	}
	want = "3 of 5 replicas; no more Servers can be claimed: 4 Servers match MachineClass big (roost.io/cpus>=16): 3 claimed by this Pool, 1 cordoned; " +
		"of the 5 enrolled, 1 does not match: roost.io/cpus>=16 excludes 1"
	if cond := h.replicaFailure(); cond.GetMessage() != want {
		t.Fatalf("ReplicaFailure %v, want %q", cond, want)
	}
	// A class without a selector selects every Server: said so, not "()".
	h.mustApply(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{Objects: []*roostv1.Object{
		resource.Wrap(&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "big"}, Spec: &roostv1.MachineClassSpec{}})}}}})
	if err := c.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if msg := h.replicaFailure().GetMessage(); !strings.Contains(msg, "5 enrolled (MachineClass big selects any Server): ") || strings.Contains(msg, "()") {
		t.Errorf("ReplicaFailure with an empty selector: %q", msg)
	}
	// Enough replicas: the condition goes.
	h.setReplicas(3)
	if err := c.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if cond := h.replicaFailure(); cond != nil {
		t.Fatalf("ReplicaFailure %v with 3 of 3 replicas, want none", cond)
	}
	h.setReplicas(5)

	// Shrinking releases the newest first.
	h.setReplicas(1)
	if err := c.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(h.members()); got != "[workers-1=01]" {
		t.Fatalf("members %s", got)
	}
	o, _ := h.f.Get("Server", uuidN(4))
	if o.GetServer().GetStatus().GetState() != state.ServerAvailable {
		t.Errorf("released server %v", o.GetServer().GetStatus())
	}

	// A failed proposal is reported and retried on the next step.
	h.setReplicas(2)
	h.failNext = errors.New("leadership lost")
	if err := c.Step(ctx); err == nil {
		t.Fatal("no error from a failed proposal")
	}
	if err := c.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(h.members()); got != 2 {
		t.Fatalf("members %v", h.members())
	}
}

func (h *fakeHub) setReplicas(n int32) {
	h.t.Helper()
	o, err := h.f.Get("Pool", "workers")
	if err != nil {
		h.t.Fatal(err)
	}
	p := proto.Clone(o.GetPool()).(*roostv1.Pool)
	p.Spec.Replicas = proto.Int32(n)
	h.mustApply(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{Objects: []*roostv1.Object{resource.Wrap(p)}}}})
}

func TestExplicitPoolsAreLeftAlone(t *testing.T) {
	h := newFakeHub(t)
	h.pool(nil)
	h.server(uuidN(1), 16)
	if err := h.controller().Step(context.Background()); err != nil || len(h.proposed) != 0 {
		t.Fatalf("proposed %v (err %v)", h.proposed, err)
	}
}

func TestPlanDeterministic(t *testing.T) {
	h := newFakeHub(t)
	h.pool(proto.Int32(2))
	for _, n := range []int{5, 2, 9, 1} {
		h.server(uuidN(n), 16)
	}
	snap, err := ReadFSM(h.f)
	if err != nil {
		t.Fatal(err)
	}
	// Input order does not matter.
	snap.Servers[0], snap.Servers[3] = snap.Servers[3], snap.Servers[0]
	name := func(string) string { return "m" }
	uid := func() string { return "u" }
	a, _ := Plan(snap, snap.Pools[0], name, uid)
	snap.Servers[1], snap.Servers[2] = snap.Servers[2], snap.Servers[1]
	b, _ := Plan(snap, snap.Pools[0], name, uid)
	if !proto.Equal(a, b) {
		t.Fatalf("plans differ: %v / %v", a, b)
	}
	var got []string
	for _, m := range a.GetCreateMachines().GetMachines() {
		got = append(got, m.GetServer()[34:])
	}
	if fmt.Sprint(got) != "[01 02]" {
		t.Errorf("claims %v", got)
	}
}

// A scale-down asks PrepareRelease about the surplus Machines first and
// releases them only once it says they are drained; a failed drain
// postpones the release to a later step.
func TestScaleDownWaitsForDrains(t *testing.T) {
	h := newFakeHub(t)
	h.pool(proto.Int32(2))
	h.server(uuidN(1), 16)
	h.server(uuidN(2), 16)
	c := h.controller()
	ctx := context.Background()
	if err := c.Step(ctx); err != nil {
		t.Fatal(err)
	}
	var asked [][]string
	answer := struct {
		done bool
		err  error
	}{}
	c.PrepareRelease = func(_ context.Context, ms []*roostv1.Machine) (bool, error) {
		var names []string
		for _, m := range ms {
			names = append(names, m.GetMetadata().GetName())
		}
		asked = append(asked, names)
		return answer.done, answer.err
	}
	h.setReplicas(1)
	for _, a := range []struct {
		done bool
		err  error
	}{{false, nil}, {false, errors.New("draining Node w2 before the release of Machine workers-2 failed")}} {
		answer.done, answer.err = a.done, a.err
		if err := c.Step(ctx); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(h.members()); got != "[workers-1=01 workers-2=02]" {
			t.Fatalf("released before the drain (%v): %s", a, got)
		}
	}
	answer.done, answer.err = true, nil
	if err := c.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(h.members()); got != "[workers-1=01]" {
		t.Fatalf("members after the drain %s", got)
	}
	if fmt.Sprint(asked) != "[[workers-2] [workers-2] [workers-2]]" {
		t.Errorf("PrepareRelease asked about %v", asked)
	}
}

// A Machine marked Remediating (hub/remediation) does not count toward
// replicas: the pool claims another Server for it, keeps it, and a later
// surplus release never picks it as a surplus member.
func TestRemediatingMachineIsReplaced(t *testing.T) {
	h := newFakeHub(t)
	h.pool(proto.Int32(2))
	h.server(uuidN(1), 16)
	h.server(uuidN(2), 16)
	h.server(uuidN(3), 16)
	c := h.controller()
	ctx := context.Background()
	if err := c.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(h.members()); got != "[workers-1=01 workers-2=02]" {
		t.Fatalf("members %s", got)
	}
	h.mustApply(&roostv1.Command{RulesVersion: state.RulesRemediation, Command: &roostv1.Command_SetConditions{SetConditions: &roostv1.SetConditions{
		Kind: "Machine", Name: "workers-1", Set: []*roostv1.Condition{{Type: state.MachineRemediating, Status: "True", Reason: state.ReasonUnreachable}}}}})
	if err := c.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(h.members()); got != "[workers-1=01 workers-2=02 workers-3=03]" {
		t.Fatalf("members after the mark %s, want a replacement on 03 and workers-1 kept", got)
	}
	if c := h.replicaFailure(); c != nil {
		t.Errorf("ReplicaFailure %v", c)
	}
	if err := c.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(h.members()); got != "[workers-1=01 workers-2=02 workers-3=03]" {
		t.Errorf("members on the next step %s: nothing is surplus", got)
	}
}

// Run claims a Server for a Pool short of replicas when the Server
// enrolls after the Pool was reconciled: the Server's event keys the
// short Pool (shortPools), and a full Pool is not reconciled for it.
func TestRunClaimsServersAsTheyEnroll(t *testing.T) {
	h := newFakeHub(t)
	var mu sync.Mutex
	c := h.controller()
	c.FSM, c.Read = h.f, nil
	propose := c.Propose
	c.Propose = func(ctx context.Context, cmd *roostv1.Command) error {
		mu.Lock()
		defer mu.Unlock()
		return propose(ctx, cmd)
	}
	two := int32(2)
	h.pool(&two)
	h.server(uuidN(1), 32)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitMembers := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for len(h.members()) != want {
			if time.Now().After(deadline) {
				t.Fatalf("members %v, want %d", h.members(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitMembers(1)
	if got := c.shortPools(); strings.Join(got, ",") != "workers" {
		t.Errorf("short Pools %v with 1 of 2 replicas", got)
	}
	mu.Lock()
	h.server(uuidN(2), 32)
	mu.Unlock()
	waitMembers(2)
	deadline := time.Now().Add(10 * time.Second)
	for len(c.shortPools()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("short Pools %v with 2 of 2 replicas", c.shortPools())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
