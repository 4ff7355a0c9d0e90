package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// fakeDrainer answers Drain from drains (by Server) and counts its calls.
type fakeDrainer struct {
	drains map[string]func() (bool, error)
	calls  int
}

func (d *fakeDrainer) CheckCluster(context.Context, *roostv1.Machine) error { return nil }

func (d *fakeDrainer) Drain(_ context.Context, m *roostv1.Machine, _ uint64) (bool, error) {
	d.calls++
	return d.drains[m.GetSpec().GetServer()]()
}

// gateFleet is an FSM with two workers of pool "workers" (Cluster prod,
// maxUnavailable 2) whose desired Revision is 2, and a Gate over it.
type gateFleet struct {
	t       *testing.T
	f       *state.FSM
	idx     uint64
	g       *Gate
	d       *fakeDrainer
	servers []string
}

func newGateFleet(t *testing.T) *gateFleet {
	gf := &gateFleet{t: t, f: state.New(state.Options{}), d: &fakeDrainer{drains: map[string]func() (bool, error){}}}
	const secret = "gattok.0123456789abcdef"
	sum := sha256.Sum256([]byte(secret))
	gf.must(&roostv1.Command{Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{Uid: "00000000-0000-4000-8000-100000000000",
		Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: "gattok"}, Spec: &roostv1.EnrollmentTokenSpec{SecretSha256: hex.EncodeToString(sum[:])}}}}})
	gf.must(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{
		Objects: []*roostv1.Object{
			resource.Wrap(&roostv1.Cluster{Metadata: &roostv1.ObjectMeta{Name: "prod"}, Spec: &roostv1.ClusterSpec{ApiEndpoint: "https://10.0.0.1:6443", KubernetesVersion: "v1.34.4"}}),
			resource.Wrap(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "workers"}, Spec: &roostv1.PoolSpec{Cluster: "prod",
				Rollout: &roostv1.RolloutPolicy{MaxUnavailable: &roostv1.IntOrString{Value: &roostv1.IntOrString_IntVal{IntVal: 2}}}}}),
		},
		Uids: []string{"00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"}}}})
	cm := &roostv1.CreateMachines{}
	for i := range 2 {
		id := fmt.Sprintf("00000000-0000-4000-9000-%012d", i)
		gf.must(&roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{TokenName: "gattok", SecretSha256: hex.EncodeToString(sum[:]),
			Uid: fmt.Sprintf("00000000-0000-4000-a000-%012d", i), Identity: &roostv1.ServerIdentity{SystemUuid: id, PermanentMacs: []string{fmt.Sprintf("52:54:00:00:00:%02x", i)}},
			Inventory: &roostv1.Inventory{Cpu: &roostv1.CPUInfo{Cores: 8, Threads: 16}, MemoryBytes: 64 << 30, Arch: "amd64", Firmware: "UEFI"}}}})
		gf.must(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{Name: id, Connected: true}}})
		cm.Machines = append(cm.Machines, &roostv1.NewMachine{Name: fmt.Sprintf("workers-%d", i), Uid: fmt.Sprintf("00000000-0000-4000-b000-%012d", i), Server: id, Pool: "workers"})
		gf.servers = append(gf.servers, id)
	}
	gf.must(&roostv1.Command{Command: &roostv1.Command_CreateMachines{CreateMachines: cm}})
	gf.g = &Gate{FSM: gf.f, Drainer: gf.d, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Propose: func(_ context.Context, c *roostv1.Command) error { return gf.apply(c) },
		Desired: func(string) *roostv1.DesiredState { return &roostv1.DesiredState{Revision: 2} },
		NewUID:  func() string { return fmt.Sprintf("00000000-0000-4000-c000-%012d", gf.idx) }}
	return gf
}

func (gf *gateFleet) apply(c *roostv1.Command) error {
	if c.Time == nil {
		c.Time = timestamppb.Now()
	}
	data, err := proto.Marshal(c)
	if err != nil {
		gf.t.Fatal(err)
	}
	gf.idx++
	if res := gf.f.Apply(&raft.Log{Index: gf.idx, Type: raft.LogCommand, Data: data}).(*state.ApplyResult); res.Err != nil {
		return res.Err
	}
	return nil
}

func (gf *gateFleet) must(c *roostv1.Command) {
	gf.t.Helper()
	if err := gf.apply(c); err != nil {
		gf.t.Fatalf("%T: %v", c.GetCommand(), err)
	}
}

func (gf *gateFleet) acquire(server string) *roostv1.AcquireLeaseResponse {
	gf.t.Helper()
	resp, err := gf.g.AcquireLease(context.Background(), server, 2)
	if err != nil {
		gf.t.Fatal(err)
	}
	return resp
}

func (gf *gateFleet) lease(server string) *roostv1.LeaseSpec {
	o, err := gf.f.Get("Lease", server)
	if err != nil {
		return nil
	}
	return o.GetLease().GetSpec()
}

// A worker's Lease is recorded Draining by the request; the gate's
// Reconcile, not the agent's polls, drains the Node and grants it.
func TestGateDrainsThenGrants(t *testing.T) {
	gf := newGateFleet(t)
	srv := gf.servers[0]
	done := false
	gf.d.drains[srv] = func() (bool, error) { return done, nil }
	ctx := context.Background()

	if r := gf.acquire(srv); r.GetGranted() || !strings.Contains(r.GetReason(), "draining") {
		t.Fatalf("first request: %v", r)
	}
	l := gf.lease(srv)
	if l.GetPhase() != state.LeaseDraining || gf.d.calls != 0 {
		t.Fatalf("after the request: Lease %v, %d drain calls; want Draining and none (the loop drains)", l, gf.d.calls)
	}
	res, err := gf.g.Reconcile(ctx, srv)
	if err != nil || res.RequeueAfter != drainCheck || gf.d.calls != 1 {
		t.Fatalf("Reconcile while draining = %v, %v (%d drain calls)", res, err, gf.d.calls)
	}
	// Polling while the drain runs writes nothing and drains nothing.
	before := gf.f.LastIndex()
	if r := gf.acquire(srv); r.GetGranted() || r.GetRetryAfterSeconds() != drainPollAfter {
		t.Fatalf("poll while draining: %v", r)
	}
	if gf.f.LastIndex() != before || gf.d.calls != 1 {
		t.Fatalf("a poll while draining wrote %d entries and drained %d times", gf.f.LastIndex()-before, gf.d.calls-1)
	}
	done = true
	if res, err := gf.g.Reconcile(ctx, srv); err != nil || res.RequeueAfter != 0 {
		t.Fatalf("Reconcile once drained = %v, %v", res, err)
	}
	if got := gf.lease(srv); got.GetPhase() != state.LeaseGranted || got.GetFencingToken() != l.GetFencingToken() {
		t.Fatalf("after the drain: Lease %v, want Granted with fencing token %d", got, l.GetFencingToken())
	}
	r := gf.acquire(srv)
	if !r.GetGranted() || r.GetFencingToken() != l.GetFencingToken() {
		t.Fatalf("request after the drain: %v", r)
	}
	// A granted Lease is no business of the loop.
	if _, err := gf.g.Reconcile(ctx, srv); err != nil || gf.d.calls != 2 {
		t.Fatalf("Reconcile of a Granted Lease: %v, %d drain calls", err, gf.d.calls)
	}
}

// A failed drain releases the Lease; the Server's next request hears why
// (once), and the one after starts over.
func TestGateReleasesAfterAFailedDrain(t *testing.T) {
	gf := newGateFleet(t)
	srv := gf.servers[1]
	gf.d.drains[srv] = func() (bool, error) { return false, errors.New("PodDisruptionBudget web-pdb allows no disruption") }
	ctx := context.Background()
	gf.acquire(srv)
	if _, err := gf.g.Reconcile(ctx, srv); err != nil {
		t.Fatal(err)
	}
	if l := gf.lease(srv); l != nil {
		t.Fatalf("Lease %v held after the failed drain", l)
	}
	r := gf.acquire(srv)
	if r.GetGranted() || !strings.Contains(r.GetReason(), "drain failed, the Lease was released: PodDisruptionBudget web-pdb") ||
		r.GetRetryAfterSeconds() != drainRetryAfter {
		t.Fatalf("request after the failed drain: %v", r)
	}
	if l := gf.lease(srv); l != nil {
		t.Fatalf("the failure report took a Lease: %v", l)
	}
	if r := gf.acquire(srv); r.GetGranted() || gf.lease(srv).GetPhase() != state.LeaseDraining {
		t.Fatalf("the next request: %v, Lease %v; want a new Draining Lease", r, gf.lease(srv))
	}
}
