package state

import (
	"bytes"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// oneOfEach returns one object of every kind, as users or controllers
// would apply them (Pool last: it refers to the others).
func oneOfEach() []*roostv1.Object {
	return []*roostv1.Object{
		resource.Wrap(&roostv1.Server{Metadata: meta("srv-1", map[string]string{"rack": "r12"}),
			Spec: &roostv1.ServerSpec{SystemUuid: "4c4c4544-0000-1000-8000-000000000001"}}),
		clusterObj("prod", map[string]string{"env": "prod"}),
		machineClassObj("standard"),
		networkProfileObj("bonded"),
		windowObj("tue"),
		resource.Wrap(&roostv1.ImageRelease{Metadata: meta("2026.11.0", nil), Spec: &roostv1.ImageReleaseSpec{
			Version: "2026.11.0", Channels: []string{"stable"}, Components: map[string]string{"kubelet": "v1.34.4", "containerd": "2.1"},
			Kernel: &roostv1.Artifact{Sha256: strings.Repeat("a", 64), Size: 12 << 20}}}),
		resource.Wrap(&roostv1.EnrollmentToken{Metadata: meta("tok", nil), Spec: &roostv1.EnrollmentTokenSpec{
			SecretSha256: strings.Repeat("b", 64), MaxUses: 5, ExpiresAt: timestamppb.New(t0.Add(24 * time.Hour))}}),
		resource.Wrap(&roostv1.Lease{Metadata: meta("srv-1", nil), Spec: &roostv1.LeaseSpec{Server: "srv-1", FencingToken: 3}}),
		resource.Wrap(&roostv1.Machine{Metadata: meta("workers-0", nil), Spec: &roostv1.MachineSpec{Server: "srv-1", Pool: "workers"}}),
		resource.Wrap(&roostv1.Revision{Metadata: meta("srv-1-1", nil), Spec: &roostv1.RevisionSpec{Server: "srv-1", Number: 1, Machine: "workers-0",
			ImageRelease: "2026.11.0", Ignition: []byte(`{"ignition":{"version":"3.3.0"}}`)}, Status: &roostv1.RevisionStatus{Phase: "Good"}}),
		poolObj("workers", "prod", func(s *roostv1.PoolSpec) {
			s.NetworkProfile = "bonded"
			s.MaintenanceWindows = []string{"tue"}
			s.NodeLabels = map[string]string{"a": "1", "b": "2", "c": "3"}
		}),
	}
}

// tables reads every table of f through the public API.
type tables struct {
	objects map[string][]*roostv1.Object // by kind
	ca      *roostv1.CertificateAuthority
	members []*roostv1.HubMember
	tokens  []*roostv1.JoinToken
	index   uint64
}

func readTables(t *testing.T, f *FSM) tables {
	t.Helper()
	tb := tables{objects: map[string][]*roostv1.Object{}, ca: f.CA(), members: f.Members(), tokens: f.JoinTokens(), index: f.LastIndex()}
	for _, k := range resource.Kinds() {
		objs, idx, err := f.List(k.Name, "")
		if err != nil {
			t.Fatal(err)
		}
		if idx != tb.index {
			t.Fatalf("List index %d, LastIndex %d", idx, tb.index)
		}
		tb.objects[k.Name] = objs
	}
	return tb
}

func equalMsgs[M proto.Message](a, b []M) bool {
	return slices.EqualFunc(a, b, func(x, y M) bool { return proto.Equal(x, y) })
}

func compareTables(t *testing.T, got, want tables) {
	t.Helper()
	for _, k := range resource.Kinds() {
		if len(want.objects[k.Name]) == 0 {
			t.Errorf("test setup: no %s objects", k.Name)
		}
		if !equalMsgs(got.objects[k.Name], want.objects[k.Name]) {
			t.Errorf("%s table differs:\n got %v\nwant %v", k.Name, got.objects[k.Name], want.objects[k.Name])
		}
	}
	if want.ca == nil || !proto.Equal(got.ca, want.ca) {
		t.Errorf("CA = %v, want %v", got.ca, want.ca)
	}
	if len(want.members) == 0 || !equalMsgs(got.members, want.members) {
		t.Errorf("members = %v, want %v", got.members, want.members)
	}
	if len(want.tokens) == 0 || !equalMsgs(got.tokens, want.tokens) {
		t.Errorf("join tokens = %v, want %v", got.tokens, want.tokens)
	}
	if got.index != want.index {
		t.Errorf("LastIndex = %d, want %d", got.index, want.index)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(oneOfEach()...))
	h.mustApply(ext(h.objects(extensionObj("kubelet", "v1.34.4"), classWith("with-extensions", "kubelet"))))
	h.mustApply(initCACmd("-----BEGIN CERTIFICATE-----", "-----BEGIN PRIVATE KEY-----"))
	h.mustApply(putMemberCmd("hub-b", "10.0.0.2:7000", "10.0.0.2:7443"))
	h.mustApply(putMemberCmd("hub-a", "10.0.0.1:7000", "10.0.0.1:7443"))
	h.mustApply(putTokenCmd("jt-2", strings.Repeat("c", 64), t0.Add(time.Hour), 3))
	h.mustApply(putTokenCmd("jt-1", strings.Repeat("d", 64), time.Time{}, 0))
	h.mustApply(useTokenCmd("jt-2", strings.Repeat("c", 64)))
	h.apply(deleteCmd("Cluster", "prod")) // refused, but advances the index
	// Enrollment tokens and Servers written by their own commands, with
	// every new field set.
	h.mustApply(putEnrollTokenCmd("abcdef", tokSecret, func(s *roostv1.EnrollmentTokenSpec) {
		s.Pool, s.MaxUses, s.RequireApproval = "workers", 3, true
		s.ServerLabels = map[string]string{"rack": "r12"}
		s.ExpiresAt = timestamppb.New(t0.Add(time.Hour))
	}))
	h.mustApply(putEnrollTokenCmd("ghijkl", "ghijkl.0123456789abcdef"))
	h.mustApply(&roostv1.Command{Command: &roostv1.Command_RevokeEnrollmentToken{RevokeEnrollmentToken: &roostv1.RevokeEnrollmentToken{Name: "ghijkl"}}})
	h.mustApply(enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:01"}, inventory(16, 64)))
	h.mustApply(enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:02"}, inventory(16, 64)))
	h.mustApply(statusCmd(&roostv1.UpdateServerStatus{Name: uuidA, Connected: true, HasBootedRevision: true, BootedRevision: 2,
		HasAppliedGeneration: true, AppliedGeneration: 4, HasConditions: true, Conditions: []*roostv1.Condition{{Type: "NetworkReady", Status: "True"}}}))
	h.mustApply(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_APPROVE))
	h.mustApply(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_CORDON))
	h.mustApply(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_LABEL, func(c *roostv1.ModifyServer) { c.SetLabels = map[string]string{"gpu": "a100"} }))
	h.mustApply(&roostv1.Command{Command: &roostv1.Command_SetServerReachability{SetServerReachability: &roostv1.SetServerReachability{
		Changes: []*roostv1.ReachabilityChange{{Name: uuidA, LastSeen: timestamppb.New(t0)}}}}})
	// A Machine claimed by its own command, with every new field set.
	h.mustApply(enrollCmd(tokSecret, uuidB, []string{"52:54:00:00:00:03"}, inventory(16, 64)))
	h.mustApply(statusCmd(&roostv1.UpdateServerStatus{Name: uuidB, Connected: true}))
	h.mustApply(modifyCmd(uuidB, roostv1.ServerAction_SERVER_ACTION_APPROVE))
	h.mustApply(createMachinesCmd(true, newMachine("workers-b", uuidB, "workers")))
	h.mustApply(withRules(RulesEvents, recordEventsCmd(eventRecord("Pool", "workers", EventWarning, "DrainBlocked", "blocked"))))
	// A ReleaseFeed with a status, and a Channel.
	h.mustApply(withRules(RulesReleaseFeeds, h.objects(feedObj("upstream", nil, "beta"),
		resource.Wrap(&roostv1.Channel{Metadata: meta("stable", nil), Spec: &roostv1.ChannelSpec{Follows: "beta"}}))))
	h.mustApply(withRules(RulesReleaseFeeds, &roostv1.Command{Command: &roostv1.Command_UpdateReleaseFeedStatus{UpdateReleaseFeedStatus: &roostv1.UpdateReleaseFeedStatus{
		Feed: "upstream", Status: &roostv1.ReleaseFeedStatus{LastPoll: timestamppb.New(t0), Releases: []*roostv1.FeedRelease{{Version: "1", Channel: "beta", State: FeedImported}}}}}}))
	if m := getMachine(t, h.f, "workers-b"); m.GetStatus().GetCluster() != "prod" || len(m.GetStatus().GetConditions()) != 4 {
		t.Fatalf("test setup: machine %v", m)
	}
	want := readTables(t, h.f)
	if srv := getServer(t, h.f, uuidA); srv.GetStatus().GetInventory() == nil || !srv.GetSpec().GetUnschedulable() ||
		srv.GetStatus().GetReachability() != Unreachable || len(srv.GetStatus().GetConditions()) != 3 {
		t.Fatalf("test setup: server %v", srv)
	}

	data := snapshotBytes(t, h.f)
	restored := restoreNew(t, data)
	compareTables(t, readTables(t, restored), want)
	if again := snapshotBytes(t, restored); !bytes.Equal(again, data) {
		t.Error("snapshot bytes differ after restore")
	}
	// The refs index is rebuilt: a restored Cluster is still protected.
	rh := &harness{tb: t, f: restored, idx: h.idx}
	wantCode(t, rh.apply(deleteCmd("Cluster", "prod")).Err, codes.FailedPrecondition)

	// Restoring over a non-empty FSM discards its previous state.
	other := newHarness(t, Options{})
	other.mustApply(h.objects(clusterObj("zzz", nil)))
	other.mustApply(putMemberCmd("hub-z", "x", "y"))
	if err := other.f.Restore(ioNopCloser(data)); err != nil {
		t.Fatal(err)
	}
	compareTables(t, readTables(t, other.f), want)
}

func TestSnapshotOrder(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(oneOfEach()...))
	h.mustApply(h.objects(clusterObj("a", nil), clusterObj("z", nil)))
	snap := &roostv1.Snapshot{}
	if err := proto.Unmarshal(snapshotBytes(t, h.f), snap); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range snap.GetObjects() {
		_, k := resource.Unwrap(o)
		got = append(got, k.Name+"/"+resource.NameOf(o))
	}
	sorted := slices.Clone(got)
	slices.SortFunc(sorted, func(a, b string) int {
		ka, na, _ := strings.Cut(a, "/")
		kb, nb, _ := strings.Cut(b, "/")
		if c := strings.Compare(ka, kb); c != 0 {
			return c
		}
		return strings.Compare(na, nb)
	})
	if !slices.Equal(got, sorted) || len(got) != 13 {
		t.Errorf("snapshot objects %v, want sorted by kind then name", got)
	}
	if snap.GetLastIndex() != h.idx {
		t.Errorf("last_index = %d, want %d", snap.GetLastIndex(), h.idx)
	}
}

// TestSnapshotKeepsStatus restores a snapshot with fields ApplyObjects
// cannot set (status) and checks they survive byte for byte.
func TestSnapshotKeepsStatus(t *testing.T) {
	srv := &roostv1.Server{ApiVersion: resource.APIVersion, Kind: "Server",
		Metadata: &roostv1.ObjectMeta{Name: "srv-1", Uid: "u1", Generation: 2, CreateIndex: 3, ModifyIndex: 40,
			CreationTimestamp: timestamppb.New(t0)},
		Spec: &roostv1.ServerSpec{SystemUuid: "x"},
		Status: &roostv1.ServerStatus{AgentVersion: "v0.1.0", BootedRevision: 7, Health: "Healthy",
			Conditions: []*roostv1.Condition{{Type: "Ready", Status: "True", LastTransitionTime: timestamppb.New(t0)}}}}
	in := &roostv1.Snapshot{LastIndex: 41, Objects: []*roostv1.Object{resource.Wrap(srv)}}
	data := mustMarshalDet(t, in)
	f := restoreNew(t, data)
	got, err := f.Get("Server", "srv-1")
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got.GetServer(), srv) {
		t.Errorf("restored %v, want %v", got, srv)
	}
	if !bytes.Equal(snapshotBytes(t, f), data) {
		t.Error("snapshot bytes differ")
	}
}

func TestRestoreRejects(t *testing.T) {
	good := &roostv1.Snapshot{LastIndex: 5, Objects: []*roostv1.Object{clusterObj("prod", nil)}}
	cases := []struct {
		name string
		data []byte
		opts Options
		text string
	}{
		{"garbage", []byte{0xff, 0xff, 0xff}, Options{}, "decoding"},
		{"too big", mustMarshalDet(t, good), Options{MaxSnapshotBytes: 10}, "larger than 10 bytes"},
		{"duplicate object", mustMarshalDet(t, &roostv1.Snapshot{Objects: []*roostv1.Object{clusterObj("a", nil), clusterObj("a", nil)}}), Options{}, "appears twice"},
		{"object without kind", mustMarshalDet(t, &roostv1.Snapshot{Objects: []*roostv1.Object{{}}}), Options{}, "no kind"},
		{"object without name", mustMarshalDet(t, &roostv1.Snapshot{Objects: []*roostv1.Object{clusterObj("", nil)}}), Options{}, "no name"},
		{"duplicate member", mustMarshalDet(t, &roostv1.Snapshot{Members: []*roostv1.HubMember{{Id: "a"}, {Id: "a"}}}), Options{}, "members[1]"},
		{"token without id", mustMarshalDet(t, &roostv1.Snapshot{JoinTokens: []*roostv1.JoinToken{{}}}), Options{}, "joinTokens[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.opts)
			h.mustApply(h.objects(clusterObj("keep", nil)))
			rc := &trackingCloser{Reader: bytes.NewReader(tc.data)}
			err := h.f.Restore(rc)
			if err == nil || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Restore error = %v, want one containing %q", err, tc.text)
			}
			if !rc.closed {
				t.Error("Restore did not close its reader")
			}
			if _, err := h.f.Get("Cluster", "keep"); err != nil || h.f.LastIndex() != 1 {
				t.Errorf("a failed Restore changed the state: %v, index %d", err, h.f.LastIndex())
			}
		})
	}
}

type trackingCloser struct {
	*bytes.Reader
	closed bool
}

func (c *trackingCloser) Close() error { c.closed = true; return nil }

// ---- determinism

// randomCommand draws one command from a small name space, so commands
// collide, refer to each other, create, configure and delete.
func randomCommand(r *rand.Rand, h *harness) *roostv1.Command {
	name := func(prefix string) string { return fmt.Sprintf("%s%d", prefix, r.Intn(4)) }
	labels := func() map[string]string {
		m := map[string]string{}
		for i := r.Intn(4); i > 0; i-- {
			m[fmt.Sprintf("k%d", r.Intn(6))] = fmt.Sprintf("v%d", r.Intn(3))
		}
		return m
	}
	object := func() *roostv1.Object {
		switch r.Intn(7) {
		case 0:
			o := clusterObj(name("c"), labels())
			o.GetCluster().Spec.KubernetesVersion = fmt.Sprintf("v1.3%d.0", r.Intn(3))
			return o
		case 1:
			o := machineClassObj(name("mc"))
			o.GetMachineClass().Metadata.Annotations = labels()
			return o
		case 2:
			o := windowObj(name("w"))
			o.GetMaintenanceWindow().Spec.Duration = durationpb.New(time.Duration(1+r.Intn(3)) * time.Hour)
			return o
		case 3:
			return networkProfileObj(name("np"))
		case 4:
			return resource.Wrap(&roostv1.ImageRelease{Metadata: meta(name("img"), labels()), Spec: &roostv1.ImageReleaseSpec{
				Components: labels(), Channels: []string{"stable"}}})
		default:
			o := poolObj(name("p"), name("c"), func(s *roostv1.PoolSpec) {
				s.MachineClass = name("mc")
				if r.Intn(2) == 0 {
					s.NetworkProfile = name("np")
				}
				for i := r.Intn(3); i > 0; i-- {
					s.MaintenanceWindows = append(s.MaintenanceWindows, name("w"))
				}
				s.NodeLabels = labels()
				s.Replicas = proto.Int32(int32(r.Intn(3)))
			})
			o.GetPool().Metadata.Labels = labels()
			return o
		}
	}
	kinds := []string{"Cluster", "MachineClass", "MaintenanceWindow", "NetworkProfile", "ImageRelease", "Pool"}
	var c *roostv1.Command
	switch n := r.Intn(24); {
	case n < 10:
		var objs []*roostv1.Object
		for i := 1 + r.Intn(4); i > 0; i-- {
			objs = append(objs, object())
		}
		c = h.objects(objs...)
		c.GetApplyObjects().DryRun = r.Intn(8) == 0
	case n < 13:
		k := kinds[r.Intn(len(kinds))]
		prefix := map[string]string{"Cluster": "c", "MachineClass": "mc", "MaintenanceWindow": "w",
			"NetworkProfile": "np", "ImageRelease": "img", "Pool": "p"}[k]
		c = deleteCmd(k, name(prefix))
	case n == 13:
		c = initCACmd(fmt.Sprint("cert", r.Intn(3)), "key")
	case n == 14:
		c = putMemberCmd(name("hub"), fmt.Sprintf("10.0.0.%d:7000", r.Intn(9)), "api")
	case n == 15:
		c = deleteMemberCmd(name("hub"))
	case n == 16:
		c = putTokenCmd(name("jt"), fmt.Sprint("s", r.Intn(2)), t0.Add(time.Duration(r.Intn(300))*time.Second), int32(r.Intn(3)))
	case n == 17:
		c = useTokenCmd(name("jt"), fmt.Sprint("s", r.Intn(2)))
	default:
		c = randomServerCommand(r)
	}
	return c
}

func TestDeterminism(t *testing.T) {
	for seed := int64(1); seed <= 25; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			// Commands are encoded once and the same bytes go to both FSMs,
			// as Raft does.
			gen := newHarness(t, Options{})
			r := rand.New(rand.NewSource(seed))
			var logs [][]byte
			for i := 0; i < 150; i++ {
				c := randomCommand(r, gen)
				c.Time = timestamppb.New(timeAt(uint64(i + 1)))
				logs = append(logs, mustMarshal(t, c))
			}
			a, b := newHarness(t, Options{}), newHarness(t, Options{WatchRing: 3, WatchBuffer: 1})
			sub, _ := b.f.Subscribe("", 0) // watching must not change anything
			defer sub.Close()
			var created, failed int
			for i, data := range logs {
				ra, rb := a.applyRaw(data), b.applyRaw(data)
				if !equalMsgs(ra.Results, rb.Results) || apierror.Code(ra.Err) != apierror.Code(rb.Err) ||
					fmt.Sprint(ra.Err) != fmt.Sprint(rb.Err) {
					t.Fatalf("log %d: results differ: %v %v / %v %v", i+1, ra.Results, ra.Err, rb.Results, rb.Err)
				}
				if ra.Err != nil {
					failed++
				}
				for _, res := range ra.Results {
					if res.GetAction() == ActionCreated {
						created++
					}
				}
				if i%50 == 49 { // snapshots in the middle do not disturb either
					if !bytes.Equal(snapshotBytes(t, a.f), snapshotBytes(t, b.f)) {
						t.Fatalf("snapshots differ after log %d", i+1)
					}
				}
			}
			if created == 0 || failed == 0 {
				t.Errorf("weak random sequence: %d created, %d failed", created, failed)
			}
			sa, sb := snapshotBytes(t, a.f), snapshotBytes(t, b.f)
			if !bytes.Equal(sa, sb) {
				t.Fatal("snapshot bytes differ")
			}
			restored := restoreNew(t, sa)
			if !bytes.Equal(snapshotBytes(t, restored), sa) {
				t.Fatal("snapshot bytes differ after restore")
			}
			// The restored FSM continues exactly like the original.
			rh := &harness{tb: t, f: restored, idx: a.idx}
			more := rand.New(rand.NewSource(seed + 1000))
			for i := 0; i < 30; i++ {
				c := randomCommand(more, gen)
				c.Time = timestamppb.New(timeAt(a.idx + 1))
				data := mustMarshal(t, c)
				a.applyRaw(data)
				rh.applyRaw(data)
			}
			if !bytes.Equal(snapshotBytes(t, a.f), snapshotBytes(t, restored)) {
				t.Fatal("restored FSM diverged")
			}
		})
	}
}

// randomServerCommand draws an enrollment-token or Server command over a
// small name space.
func randomServerCommand(r *rand.Rand) *roostv1.Command {
	tokens := []string{"aaaaaa.0123456789abcdef", "bbbbbb.0123456789abcdef"}
	secret := tokens[r.Intn(len(tokens))]
	uuids := []string{uuidA, "4c4c4544-0042-3510-8052-b4c04f4d4e32", ""}
	macs := [][]string{{"52:54:00:00:00:01"}, {"52:54:00:00:00:02", "52:54:00:00:00:03"}}
	servers := []string{uuidA, "4c4c4544-0042-3510-8052-b4c04f4d4e32"}
	srv := servers[r.Intn(len(servers))]
	switch r.Intn(9) {
	case 7:
		pool := []string{"", "p0", "p1"}[r.Intn(3)]
		return createMachinesCmd(r.Intn(2) == 0, &roostv1.NewMachine{Name: fmt.Sprint("m", r.Intn(3)),
			Uid: fmt.Sprintf("00000000-0000-4000-8000-%012d", r.Intn(1000)), Server: srv, Pool: pool})
	case 8:
		if r.Intn(2) == 0 {
			return deleteMachinesCmd([]string{"", "p0", "p1"}[r.Intn(3)], nil, []string{srv})
		}
		return deleteCmd("Machine", fmt.Sprint("m", r.Intn(3)))
	case 0:
		return putEnrollTokenCmd(strings.SplitN(secret, ".", 2)[0], secret, func(s *roostv1.EnrollmentTokenSpec) {
			s.MaxUses = int32(r.Intn(3))
			s.RequireApproval = r.Intn(2) == 0
			if r.Intn(2) == 0 {
				s.ExpiresAt = timestamppb.New(t0.Add(time.Duration(r.Intn(300)) * time.Second))
			}
		})
	case 1:
		return &roostv1.Command{Command: &roostv1.Command_RevokeEnrollmentToken{RevokeEnrollmentToken: &roostv1.RevokeEnrollmentToken{Name: strings.SplitN(secret, ".", 2)[0]}}}
	case 2, 3:
		c := enrollCmd(secret, uuids[r.Intn(len(uuids))], macs[r.Intn(len(macs))], inventory(int32(4<<r.Intn(4)), int64(8<<r.Intn(4))))
		c.GetEnrollServer().Uid = fmt.Sprintf("00000000-0000-4000-8000-%012d", r.Intn(1000))
		return c
	case 4:
		return statusCmd(&roostv1.UpdateServerStatus{Name: srv, Connected: r.Intn(2) == 0, HasBootedRevision: true, BootedRevision: int64(r.Intn(3)),
			HasConditions: r.Intn(2) == 0, Conditions: []*roostv1.Condition{{Type: "NetworkReady", Status: []string{"True", "False"}[r.Intn(2)]}}})
	case 5:
		return &roostv1.Command{Command: &roostv1.Command_SetServerReachability{SetServerReachability: &roostv1.SetServerReachability{
			Changes: []*roostv1.ReachabilityChange{{Name: srv, Reachable: r.Intn(2) == 0, LastSeen: timestamppb.New(t0.Add(time.Duration(r.Intn(100)) * time.Second))}}}}}
	default:
		return modifyCmd(srv, roostv1.ServerAction(1+r.Intn(6)), func(c *roostv1.ModifyServer) {
			c.SetLabels = map[string]string{"rack": fmt.Sprint("r", r.Intn(3))}
			c.RemoveLabels = []string{"gpu"}
		})
	}
}
