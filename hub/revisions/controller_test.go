package revisions

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

var fixedTime = time.Date(2026, 11, 3, 2, 0, 0, 0, time.UTC)

// fleet is a real FSM driven by commands applied directly (no Raft), and
// a Controller proposing into it.
type fleet struct {
	t   testing.TB
	f   *state.FSM
	idx uint64
	uid int
	log *lockedBuf
	c   *Controller
	// proposed counts PutRevision commands the controller proposed.
	proposed int
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func newFleet(t testing.TB) *fleet {
	fl := &fleet{t: t, f: state.New(state.Options{}), log: &lockedBuf{}}
	fl.c = &Controller{
		IsLeader: func() bool { return true },
		FSM:      fl.f,
		Propose: func(_ context.Context, c *roostv1.Command) error {
			fl.proposed++
			return fl.applyErr(c)
		},
		NewUID: fl.newUID,
		Log:    slog.New(slog.NewTextHandler(fl.log, nil)),
	}
	return fl
}

func (fl *fleet) newUID() string {
	fl.uid++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", fl.uid)
}

// applyErr applies c at the next index with the fixed time.
func (fl *fleet) applyErr(c *roostv1.Command) error {
	c.Time = timestamppb.New(fixedTime)
	data, err := proto.Marshal(c)
	if err != nil {
		return err
	}
	fl.idx++
	res := fl.f.Apply(&raft.Log{Index: fl.idx, Term: 1, Type: raft.LogCommand, Data: data}).(*state.ApplyResult)
	return res.Err
}

func (fl *fleet) apply(c *roostv1.Command) {
	fl.t.Helper()
	if err := fl.applyErr(c); err != nil {
		fl.t.Fatalf("apply %v: %v", c, err)
	}
}

func (fl *fleet) objects(objs ...resource.Resource) {
	fl.t.Helper()
	c := &roostv1.ApplyObjects{}
	for _, o := range objs {
		c.Objects = append(c.Objects, resource.Wrap(o))
		c.Uids = append(c.Uids, fl.newUID())
	}
	fl.apply(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: c}})
}

func (fl *fleet) step() {
	fl.t.Helper()
	if err := fl.c.Step(context.Background()); err != nil {
		fl.t.Fatalf("Step: %v", err)
	}
}

func hashOf(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// claim enrolls server, makes it Available and claims it as Machine name
// of pool ("" for standalone).
func (fl *fleet) claim(server, mac, name, pool string) {
	fl.t.Helper()
	const secret = "abcdef.0123456789abcdef"
	if _, err := fl.f.Get("EnrollmentToken", "abcdef"); err != nil {
		fl.apply(&roostv1.Command{Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{
			Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: "abcdef"}, Spec: &roostv1.EnrollmentTokenSpec{SecretSha256: hashOf(secret)}},
			Uid:   fl.newUID()}}})
	}
	fl.apply(&roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{
		TokenName: "abcdef", SecretSha256: hashOf(secret), Identity: &roostv1.ServerIdentity{SystemUuid: server, PermanentMacs: []string{mac}},
		Inventory: &roostv1.Inventory{Cpu: &roostv1.CPUInfo{Threads: 16, Cores: 8, Sockets: 1}, MemoryBytes: 64 << 30, Firmware: "UEFI", Arch: "amd64"},
		Uid:       fl.newUID()}}})
	fl.apply(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{Name: server, Connected: true}}})
	fl.apply(&roostv1.Command{Command: &roostv1.Command_CreateMachines{CreateMachines: &roostv1.CreateMachines{Machines: []*roostv1.NewMachine{
		{Name: name, Uid: fl.newUID(), Server: server, Pool: pool}}}}})
}

func (fl *fleet) revisions(server string) []*roostv1.Revision { return fl.f.Revisions(server) }

func (fl *fleet) numbers(server string) []int64 {
	var out []int64
	for _, r := range fl.revisions(server) {
		out = append(out, r.GetSpec().GetNumber())
	}
	return out
}

// edgeFleet has Pool "edge" (no cluster, channel stable) with MachineClass
// "standard" and one claimed Server.
func edgeFleet(t *testing.T) *fleet {
	fl := newFleet(t)
	fl.objects(
		&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "standard"}, Spec: &roostv1.MachineClassSpec{KernelArgs: []string{"quiet"}}},
		&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "edge"}, Spec: &roostv1.PoolSpec{MachineClass: "standard", ImageChannel: "stable"}},
	)
	fl.claim(testServer, "52:54:00:00:00:01", "edge-1", "edge")
	return fl
}

func TestControllerRendersFirstRevision(t *testing.T) {
	fl := edgeFleet(t)
	// No ImageRelease yet: nothing rendered, a note logged once and
	// written once as the Machine's Provisioned message.
	fl.step()
	fl.step()
	if len(fl.revisions(testServer)) != 0 || fl.proposed != 1 {
		t.Fatalf("rendered without a release: %v (%d proposed, want the Provisioned message only)", fl.revisions(testServer), fl.proposed)
	}
	note := "no ImageRelease is in channel stable (pool edge follows it)"
	if n := strings.Count(fl.log.String(), note); n != 1 {
		t.Errorf("note logged %d times:\n%s", n, fl.log)
	}
	if c := state.FindCondition(fl.f.MachineOf(testServer).GetStatus().GetConditions(), state.MachineProvisioned); c.GetReason() != state.ReasonWaitingForRevision || c.GetMessage() != note {
		t.Errorf("Provisioned %v, want %s with message %q", c, state.ReasonWaitingForRevision, note)
	}
	// A release in another channel does not count.
	fl.objects(testRelease("2026.10.0", nil, "beta"))
	fl.step()
	if len(fl.revisions(testServer)) != 0 {
		t.Fatal("rendered a release of another channel")
	}

	fl.objects(testRelease("2026.11.0", nil, "stable"))
	fl.step()
	revs := fl.revisions(testServer)
	if len(revs) != 1 {
		t.Fatalf("revisions %v", revs)
	}
	r := revs[0]
	if r.GetSpec().GetNumber() != 1 || r.GetSpec().GetMachine() != "edge-1" || r.GetSpec().GetImageRelease() != "2026.11.0" ||
		r.GetStatus().GetPhase() != state.RevisionPending || r.GetMetadata().GetName() != state.RevisionName(testServer, 1) {
		t.Errorf("revision %v", r)
	}
	// What Step rendered is what Render renders from the same inputs.
	in, note := newView(fl.f.Reader()).inputs(fl.f.MachineOf(testServer), nil)
	if note != "" {
		t.Fatal(note)
	}
	if want := mustRender(t, in, 1); !proto.Equal(r.GetSpec(), want) {
		t.Errorf("spec\n got %v\nwant %v", r.GetSpec(), want)
	}
	if !strings.Contains(fl.log.String(), "revision controller: rendered") {
		t.Errorf("log:\n%s", fl.log)
	}

	// Nothing changed: nothing new, nothing proposed.
	before := fl.proposed
	fl.step()
	fl.step()
	if len(fl.revisions(testServer)) != 1 || fl.proposed != before {
		t.Fatalf("re-rendered with unchanged inputs: %v", fl.numbers(testServer))
	}
	// Status changes (the agent's reports) change nothing either.
	fl.apply(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{
		Name: testServer, HasBootedRevision: true, BootedRevision: 1, HasConditions: true,
		Conditions: []*roostv1.Condition{{Type: state.AgentHealthy, Status: "True"}}}}})
	fl.step()
	if len(fl.revisions(testServer)) != 1 {
		t.Fatalf("re-rendered after a status report: %v", fl.numbers(testServer))
	}
}

func TestControllerRerendersOnChange(t *testing.T) {
	fl := edgeFleet(t)
	fl.objects(testRelease("2026.11.0", nil, "stable"))
	fl.step()

	// Labels change: Revision 2.
	fl.apply(&roostv1.Command{Command: &roostv1.Command_ModifyServer{ModifyServer: &roostv1.ModifyServer{
		Name: testServer, Action: roostv1.ServerAction_SERVER_ACTION_LABEL, SetLabels: map[string]string{"rack": "r12"}}}})
	fl.step()
	if got := fl.numbers(testServer); len(got) != 2 || got[1] != 2 {
		t.Fatalf("revisions %v", got)
	}
	p := parseIgnition(t, fl.f.LatestRevision(testServer).GetSpec().GetIgnition())
	if !strings.Contains(p.files[MachineFactsPath], `"rack": "r12"`) {
		t.Errorf("machine.json lacks the label:\n%s", p.files[MachineFactsPath])
	}
	fl.step()
	if got := fl.numbers(testServer); len(got) != 2 {
		t.Fatalf("revisions %v", got)
	}

	// A newer release in the channel: Revision 3 with it.
	fl.objects(testRelease("2026.12.0", nil, "stable"))
	fl.step()
	if l := fl.f.LatestRevision(testServer); l.GetSpec().GetNumber() != 3 || l.GetSpec().GetImageRelease() != "2026.12.0" {
		t.Fatalf("latest %v", l.GetSpec())
	}
	// Tuning the pool's rollout policy does not re-render.
	fl.objects(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "edge"}, Spec: &roostv1.PoolSpec{MachineClass: "standard", ImageChannel: "stable",
		MaintenanceWindows: nil, Rollout: &roostv1.RolloutPolicy{FailureBudget: 1}}})
	fl.step()
	if got := fl.numbers(testServer); len(got) != 3 {
		t.Fatalf("a rollout policy change re-rendered: %v", got)
	}
}

func TestControllerHaltsAfterFailure(t *testing.T) {
	fl := edgeFleet(t)
	fl.objects(testRelease("2026.11.0", nil, "stable"))
	fl.step()
	fl.apply(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{
		Name: testServer, HasBootedRevision: true, BootedRevision: 0,
		HasFailedRevisions: true, FailedRevisions: []*roostv1.FailedRevision{{Number: 1, Reason: "kernel panic"}}}}})
	if l := fl.f.LatestRevision(testServer); l.GetStatus().GetPhase() != state.RevisionFailed {
		t.Fatalf("test setup: latest %v", l.GetStatus())
	}
	// Unchanged inputs: the hub does not retry a failed Revision.
	fl.step()
	fl.step()
	if got := fl.numbers(testServer); len(got) != 1 {
		t.Fatalf("retried a failed revision: %v", got)
	}
	// Changed inputs (a new release): Revision 2.
	fl.objects(testRelease("2026.11.1", nil, "stable"))
	fl.step()
	if l := fl.f.LatestRevision(testServer); l.GetSpec().GetNumber() != 2 || l.GetSpec().GetImageRelease() != "2026.11.1" {
		t.Fatalf("latest %v", l.GetSpec())
	}
}

func TestControllerStandaloneAndNotes(t *testing.T) {
	fl := newFleet(t)
	fl.claim(testServer, "52:54:00:00:00:01", "edge-host", "")
	fl.step()
	if !strings.Contains(fl.log.String(), "no ImageRelease yet (roostctl image push BUNDLE_DIR)") {
		t.Errorf("log:\n%s", fl.log)
	}
	// A release that cannot be rendered (no signed manifest): a note, no
	// error, no Revision.
	bad := testRelease("2026.11.0", nil)
	bad.Spec.Signature = ""
	fl.objects(bad)
	fl.step()
	if len(fl.revisions(testServer)) != 0 || !strings.Contains(fl.log.String(), "cannot render: ImageRelease 2026.11.0 has no signed manifest") {
		t.Fatalf("revisions %v, log:\n%s", fl.revisions(testServer), fl.log)
	}
	fl.objects(testRelease("2026.11.0", nil))
	fl.step()
	l := fl.f.LatestRevision(testServer)
	if l.GetSpec().GetNumber() != 1 || l.GetSpec().GetHostname() != "edge-host" {
		t.Fatalf("latest %v", l)
	}
	// The standalone Machine goes Ready once the agent boots it healthy.
	fl.apply(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{
		Name: testServer, HasBootedRevision: true, BootedRevision: 1, HasConditions: true,
		Conditions: []*roostv1.Condition{{Type: state.AgentHealthy, Status: "True"}}}}})
	if m := fl.f.MachineOf(testServer); m.GetStatus().GetPhase() != state.PhaseReady {
		t.Errorf("machine %v", m.GetStatus())
	}
}

func TestControllerPinnedVersion(t *testing.T) {
	fl := edgeFleet(t)
	fl.objects(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "edge"}, Spec: &roostv1.PoolSpec{MachineClass: "standard", ImageChannel: "stable", ImageVersion: "2026.10.0"}})
	fl.objects(testRelease("2026.11.0", nil, "stable"))
	fl.step()
	if len(fl.revisions(testServer)) != 0 || !strings.Contains(fl.log.String(), "no ImageRelease has version 2026.10.0 (pool edge pins it)") {
		t.Fatalf("revisions %v, log:\n%s", fl.numbers(testServer), fl.log)
	}
	// The pinned version wins over the channel (it is in none).
	fl.objects(testRelease("2026.10.0", nil))
	fl.step()
	if l := fl.f.LatestRevision(testServer); l.GetSpec().GetImageVersion() != "2026.10.0" {
		t.Fatalf("latest %v", l.GetSpec())
	}
}

func TestControllerNotLeader(t *testing.T) {
	fl := edgeFleet(t)
	fl.objects(testRelease("2026.11.0", nil, "stable"))
	leader := false
	barriers := 0
	fl.c.IsLeader = func() bool { return leader }
	fl.c.Barrier = func(context.Context) error { barriers++; return nil }
	fl.step()
	if len(fl.revisions(testServer)) != 0 || barriers != 0 {
		t.Fatal("a follower rendered")
	}
	leader = true
	fl.step()
	fl.step()
	if len(fl.revisions(testServer)) != 1 || barriers != 1 {
		t.Fatalf("leader: revisions %v, barriers %d", fl.numbers(testServer), barriers)
	}
	// A new term runs the barrier again; a failing barrier stops the step.
	leader = false
	fl.step()
	leader = true
	fl.c.Barrier = func(context.Context) error { barriers++; return errors.New("no quorum") }
	if err := fl.c.Step(context.Background()); err == nil || !strings.Contains(err.Error(), "no quorum") || barriers != 2 {
		t.Errorf("Step = %v, barriers %d", err, barriers)
	}
}

// TestControllerProposeRace: a render that loses a race (another
// Revision was put meanwhile) fails its PutRevision; the next step
// renders from fresh state.
func TestControllerProposeRace(t *testing.T) {
	fl := edgeFleet(t)
	fl.objects(testRelease("2026.11.0", nil, "stable"))
	propose := fl.c.Propose
	raced := false
	fl.c.Propose = func(ctx context.Context, c *roostv1.Command) error {
		if !raced {
			raced = true
			other := proto.Clone(c).(*roostv1.Command)
			other.GetPutRevision().Uid = fl.newUID()
			if err := propose(ctx, other); err != nil {
				return err
			}
		}
		return propose(ctx, c)
	}
	err := fl.c.Step(context.Background())
	if apierror.Code(err) != codes.FailedPrecondition || !strings.Contains(fmt.Sprint(err), "the next Revision is 2") {
		t.Fatalf("Step = %v", err)
	}
	fl.step()
	if got := fl.numbers(testServer); len(got) != 1 {
		t.Fatalf("revisions %v (the raced one has the same inputs)", got)
	}
}

func TestPickRelease(t *testing.T) {
	var objs []*roostv1.Object
	for i, r := range []*roostv1.ImageRelease{
		testRelease("2026.09.0", nil, "stable"),
		testRelease("2026.10.0", nil, "stable", "beta"),
		testRelease("2026.11.0-rc1", nil, "beta"),
		testRelease("2026.08.0", nil),
	} {
		r.Metadata.CreateIndex = uint64(10 + i)
		objs = append(objs, resource.Wrap(r))
	}
	// Listed by name, not creation: order must not matter.
	objs[0], objs[3] = objs[3], objs[0]
	for _, tc := range []struct{ version, channel, want string }{
		{"", "stable", "2026.10.0"},
		{"", "beta", "2026.11.0-rc1"},
		{"", "", "2026.08.0"}, // newest created of all
		{"", "nightly", ""},
		{"2026.09.0", "beta", "2026.09.0"}, // a pin wins over the channel
		{"2026.07.0", "stable", ""},
	} {
		got := PickRelease(objs, tc.version, tc.channel).GetMetadata().GetName()
		if got != tc.want {
			t.Errorf("PickRelease(%q, %q) = %q, want %q", tc.version, tc.channel, got, tc.want)
		}
	}
	if PickRelease(nil, "", "") != nil {
		t.Error("pickRelease of nothing")
	}
}

// TestControllerRendersWorker: a Machine claimed for a Pool of a Cluster
// renders the kubelet; Cluster settings that render nothing do not make a
// new Revision, those that do make one.
func TestControllerRendersWorker(t *testing.T) {
	fl := newFleet(t)
	cluster := func(mod func(*roostv1.ClusterSpec)) *roostv1.Cluster {
		s := &roostv1.ClusterSpec{ApiEndpoint: "https://10.0.0.1:6443", CaBundle: "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"}
		if mod != nil {
			mod(s)
		}
		return &roostv1.Cluster{Metadata: &roostv1.ObjectMeta{Name: "prod"}, Spec: s}
	}
	fl.objects(cluster(nil),
		&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "workers"}, Spec: &roostv1.PoolSpec{Cluster: "prod", ImageChannel: "stable",
			NodeLabels: map[string]string{"tier": "gold", "node-role.kubernetes.io/worker": ""}}},
		testRelease("2026.11.0", nil, "stable"))
	fl.claim(testServer, "52:54:00:00:00:01", "workers-1", "workers")
	if c := fl.f.MachineOf(testServer).GetStatus().GetCluster(); c != "prod" {
		t.Fatalf("Machine status.cluster %q", c)
	}
	fl.step()
	if got := fl.numbers(testServer); len(got) != 1 {
		t.Fatalf("revisions %v", got)
	}
	p := parseIgnition(t, fl.f.LatestRevision(testServer).GetSpec().GetIgnition())
	unit, ok := p.units[KubeletUnit]
	if !ok || !strings.Contains(*unit.Contents, "--node-labels=roost.io/arch=amd64,roost.io/cpus=16,roost.io/firmware=uefi,roost.io/machine=workers-1,roost.io/memory-gib=64,roost.io/pool=workers,tier=gold\n") {
		t.Fatalf("kubelet unit %+v", unit)
	}
	if !strings.Contains(p.files[KubeletConfigPath], "providerID: roost://"+testServer+"\n") {
		t.Errorf("kubelet.yaml:\n%s", p.files[KubeletConfigPath])
	}
	if !strings.Contains(fl.log.String(), `node label left out" machine=workers-1 label=node-role.kubernetes.io/worker`) {
		t.Errorf("log:\n%s", fl.log)
	}

	// The hub's settings for the Cluster: no new Revision.
	fl.objects(cluster(func(s *roostv1.ClusterSpec) {
		s.DrainTimeout = durationpb.New(20 * time.Minute)
		s.Join = &roostv1.ClusterJoin{BootstrapTokenTtl: durationpb.New(2 * time.Hour)}
	}))
	fl.step()
	if got := fl.numbers(testServer); len(got) != 1 {
		t.Fatalf("re-rendered for the drain timeout or token TTL: %v", got)
	}
	// The cluster DNS: Revision 2 with it.
	fl.objects(cluster(func(s *roostv1.ClusterSpec) { s.Join = &roostv1.ClusterJoin{ClusterDns: []string{"10.96.0.10"}} }))
	fl.step()
	if got := fl.numbers(testServer); len(got) != 2 {
		t.Fatalf("revisions %v", got)
	}
	p = parseIgnition(t, fl.f.LatestRevision(testServer).GetSpec().GetIgnition())
	if !strings.Contains(p.files[KubeletConfigPath], "clusterDNS:\n- 10.96.0.10\n") {
		t.Errorf("kubelet.yaml:\n%s", p.files[KubeletConfigPath])
	}
}
