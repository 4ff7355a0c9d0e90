package state

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

func getPool(t *testing.T, f *FSM, name string) *roostv1.Pool {
	t.Helper()
	o, err := f.Get("Pool", name)
	if err != nil {
		t.Fatal(err)
	}
	return o.GetPool()
}

func TestApplyObjectsLifecycle(t *testing.T) {
	h := newHarness(t, Options{})
	objs := append(baseObjects(), poolObj("workers", "prod"))
	res := h.mustApply(h.objects(objs...))
	if got, want := actions(res), []string{"Cluster/prod=created", "MachineClass/standard=created", "Pool/workers=created"}; !slices.Equal(got, want) {
		t.Fatalf("actions = %v, want %v", got, want)
	}
	created := h.idx
	p := getPool(t, h.f, "workers")
	m := p.GetMetadata()
	if p.GetApiVersion() != resource.APIVersion || p.GetKind() != "Pool" {
		t.Errorf("apiVersion/kind = %q/%q", p.GetApiVersion(), p.GetKind())
	}
	if m.GetUid() != "00000000-0000-4000-8000-000000000003" || m.GetGeneration() != 1 ||
		m.GetCreateIndex() != created || m.GetModifyIndex() != created ||
		!m.GetCreationTimestamp().AsTime().Equal(timeAt(created)) {
		t.Errorf("metadata after create = %v", m)
	}

	type step struct {
		name       string
		obj        *roostv1.Object
		wantAction string
		wantGen    int64
		wantModify bool // modifyIndex moves to this step's index
	}
	withLabels := poolObj("workers", "prod")
	withLabels.GetPool().Metadata.Labels = map[string]string{"env": "prod"}
	withSpec := proto.Clone(withLabels).(*roostv1.Object)
	withSpec.GetPool().Spec.Replicas = proto.Int32(5)
	// Server-owned fields and status are ignored (a uid or modifyIndex
	// would be a precondition: TestApplyObjectsPreconditions).
	sneaky := proto.Clone(withSpec).(*roostv1.Object)
	sneaky.GetPool().Metadata.Generation = 99
	sneaky.GetPool().Metadata.CreateIndex = 1234
	sneaky.GetPool().ApiVersion = "other/v9"
	sneaky.GetPool().Status = &roostv1.PoolStatus{Machines: 7}
	withAnnotation := proto.Clone(withSpec).(*roostv1.Object)
	withAnnotation.GetPool().Metadata.Annotations = map[string]string{"note": "x"}
	emptyLabels := proto.Clone(withAnnotation).(*roostv1.Object)
	emptyLabels.GetPool().Metadata.Labels = map[string]string{}

	steps := []step{
		{"same again", poolObj("workers", "prod"), ActionUnchanged, 1, false},
		{"labels only", withLabels, ActionConfigured, 1, true},
		{"spec change", withSpec, ActionConfigured, 2, true},
		{"server fields and status ignored", sneaky, ActionUnchanged, 2, false},
		{"annotation", withAnnotation, ActionConfigured, 2, true},
		{"remove labels", emptyLabels, ActionConfigured, 2, true},
		{"spec back", poolObj("workers", "prod", func(s *roostv1.PoolSpec) {}), ActionConfigured, 3, true},
	}
	prevModify := created
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			res := h.mustApply(h.objects(s.obj))
			if got := res.Results[0].GetAction(); got != s.wantAction {
				t.Fatalf("action = %q, want %q", got, s.wantAction)
			}
			m := getPool(t, h.f, "workers").GetMetadata()
			if m.GetGeneration() != s.wantGen {
				t.Errorf("generation = %d, want %d", m.GetGeneration(), s.wantGen)
			}
			wantModify := prevModify
			if s.wantModify {
				wantModify = h.idx
			}
			if m.GetModifyIndex() != wantModify {
				t.Errorf("modifyIndex = %d, want %d", m.GetModifyIndex(), wantModify)
			}
			prevModify = m.GetModifyIndex()
			if m.GetUid() != "00000000-0000-4000-8000-000000000003" || m.GetCreateIndex() != created ||
				!m.GetCreationTimestamp().AsTime().Equal(timeAt(created)) {
				t.Errorf("creation metadata changed: %v", m)
			}
			if h.f.LastIndex() != h.idx {
				t.Errorf("LastIndex = %d, want %d", h.f.LastIndex(), h.idx)
			}
		})
	}
	if st := getPool(t, h.f, "workers").GetStatus(); st != nil {
		t.Errorf("status = %v, want none (incoming status is ignored)", st)
	}
}

// TestApplyObjectsPreconditions checks metadata.modifyIndex and
// metadata.uid as preconditions of an apply: checked against the stored
// object inside the command, all or nothing, Aborted on a mismatch, also
// in a dry run.
func TestApplyObjectsPreconditions(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(append(baseObjects(), poolObj("workers", "prod"))...))
	read := getPool(t, h.f, "workers").GetMetadata() // as `get -o yaml` shows it
	uid, readIndex := read.GetUid(), read.GetModifyIndex()
	pool := func(modifyIndex uint64, uid string, replicas int32) *roostv1.Object {
		o := poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.Replicas = proto.Int32(replicas) })
		o.GetPool().Metadata.ModifyIndex = modifyIndex
		o.GetPool().Metadata.Uid = uid
		// What get -o yaml also shows; ignored.
		o.GetPool().Metadata.Generation, o.GetPool().Metadata.CreateIndex = 7, 3
		o.GetPool().Status = &roostv1.PoolStatus{Machines: 9}
		return o
	}
	unchanged := func(what string, f func()) {
		t.Helper()
		before := snapshotBytes(t, h.f)
		f()
		b := &roostv1.Snapshot{}
		_ = proto.Unmarshal(before, b)
		b.LastIndex = h.idx
		if !slices.Equal(snapshotBytes(t, h.f), mustMarshalDet(t, b)) {
			t.Errorf("%s changed the state", what)
		}
	}

	// The index read matches: applied, with the uid too.
	res := h.mustApply(h.objects(pool(readIndex, uid, 2)))
	if got := actions(res); !slices.Equal(got, []string{"Pool/workers=configured"}) {
		t.Fatalf("actions = %v", got)
	}
	p := getPool(t, h.f, "workers")
	if p.GetSpec().GetReplicas() != 2 || p.GetMetadata().GetModifyIndex() != h.idx || p.GetMetadata().GetGeneration() != 2 || p.GetStatus() != nil {
		t.Fatalf("after a matching precondition: %v", p)
	}
	now := h.idx

	// The same manifest again: the Pool changed since readIndex. Nothing
	// of the command is applied, not even the Cluster before it.
	unchanged("a stale modifyIndex", func() {
		e := wantCode(t, h.apply(h.objects(clusterObj("prod", map[string]string{"env": "x"}), pool(readIndex, uid, 3))).Err, codes.Aborted)
		want := fmt.Sprintf("pool/workers: modified since it was read (modifyIndex %d, now %d): "+
			"get it again and re-apply your change, or remove metadata.modifyIndex to overwrite", readIndex, now)
		if e.Message != want {
			t.Errorf("message = %q\nwant      %q", e.Message, want)
		}
		if len(e.Violations) != 1 || e.Violations[0].Field != "objects[1].metadata.modifyIndex" {
			t.Errorf("violations = %v", e.Violations)
		}
	})
	// A dry run checks it too.
	unchanged("a dry run with a stale modifyIndex", func() {
		c := h.objects(pool(readIndex, "", 3))
		c.GetApplyObjects().DryRun = true
		wantCode(t, h.apply(c).Err, codes.Aborted)
		c = h.objects(pool(now, "", 3))
		c.GetApplyObjects().DryRun = true
		if got := actions(h.mustApply(c)); !slices.Equal(got, []string{"Pool/workers=configured"}) {
			t.Errorf("dry run with the current modifyIndex: %v", got)
		}
	})
	// An unchanged object with a stale index is a conflict as well.
	unchanged("a stale modifyIndex of an unchanged object", func() {
		wantCode(t, h.apply(h.objects(pool(readIndex, "", 2))).Err, codes.Aborted)
	})
	// Another uid: the Pool was deleted and created again since.
	unchanged("another uid", func() {
		e := wantCode(t, h.apply(h.objects(pool(0, "0b6f3c2e-9a41-4c1e-8a57-3f0d2b9c1e01", 3))).Err, codes.Aborted)
		if !strings.HasPrefix(e.Message, "pool/workers: deleted and created again since it was read (uid 0b6f3c2e-9a41-4c1e-8a57-3f0d2b9c1e01, now "+uid+")") ||
			len(e.Violations) != 1 || e.Violations[0].Field != "objects[0].metadata.uid" {
			t.Errorf("uid mismatch: %v", e)
		}
	})
	// Several conflicts are all reported.
	unchanged("two conflicts", func() {
		cl := clusterObj("prod", nil)
		cl.GetCluster().Metadata.ModifyIndex = 99
		e := wantCode(t, h.apply(h.objects(cl, pool(readIndex, "", 3))).Err, codes.Aborted)
		if len(e.Violations) != 2 || !strings.HasPrefix(e.Message, "2 objects changed since they were read (cluster/prod, pool/workers)") {
			t.Errorf("two conflicts: %v", e)
		}
	})
	// Without preconditions an apply overwrites.
	if got := actions(h.mustApply(h.objects(pool(0, "", 4)))); !slices.Equal(got, []string{"Pool/workers=configured"}) {
		t.Errorf("no precondition: %v", got)
	}
	// The current index and uid: applied.
	h.mustApply(h.objects(pool(h.idx, uid, 5)))
	if r := getPool(t, h.f, "workers").GetSpec().GetReplicas(); r != 5 {
		t.Errorf("replicas = %d, want 5", r)
	}

	// A create with a modifyIndex: the object was deleted since it was
	// read (Aborted, in a dry run too).
	unchanged("a create with a modifyIndex", func() {
		o := poolObj("gone", "prod")
		o.GetPool().Metadata.ModifyIndex = 12
		e := wantCode(t, h.apply(h.objects(o)).Err, codes.Aborted)
		if e.Message != `pool/gone: deleted since it was read (modifyIndex 12): Pool "gone" does not exist: remove metadata.modifyIndex to create it again` {
			t.Errorf("message = %q", e.Message)
		}
		c := h.objects(o)
		c.GetApplyObjects().DryRun = true
		wantCode(t, h.apply(c).Err, codes.Aborted)
	})
	// A create ignores a uid, as in Kubernetes: the object gets its own.
	o := poolObj("fresh", "prod")
	o.GetPool().Metadata.Uid = "0b6f3c2e-9a41-4c1e-8a57-3f0d2b9c1e01"
	c := h.objects(o)
	h.mustApply(c)
	if got := getPool(t, h.f, "fresh").GetMetadata().GetUid(); got != c.GetApplyObjects().GetUids()[0] {
		t.Errorf("uid of a create = %q, want the command's %q", got, c.GetApplyObjects().GetUids()[0])
	}

	// A Pool paused by `rollout pause` stays paused through an apply with
	// a matching precondition (applyPoolOver still applies).
	h.mustApply(controlCmd("workers", roostv1.RolloutAction_ROLLOUT_ACTION_PAUSE, ""))
	res = h.mustApply(h.objects(pool(getPool(t, h.f, "workers").GetMetadata().GetModifyIndex(), uid, 6)))
	if !getPool(t, h.f, "workers").GetSpec().GetRollout().GetPaused() || len(res.Warnings) == 0 {
		t.Errorf("pause not kept (warnings %q): %v", res.Warnings, getPool(t, h.f, "workers").GetSpec())
	}
}

func TestApplyObjectsKeepsStatus(t *testing.T) {
	// Status can only come from the state itself (here: a restored
	// snapshot); ApplyObjects must carry it over on configure.
	snap := &roostv1.Snapshot{LastIndex: 10, Objects: []*roostv1.Object{
		clusterObj("prod", nil),
		resource.Wrap(&roostv1.Pool{ApiVersion: resource.APIVersion, Kind: "Pool",
			Metadata: &roostv1.ObjectMeta{Name: "workers", Uid: "u", Generation: 4, CreateIndex: 2, ModifyIndex: 9},
			Spec:     &roostv1.PoolSpec{Cluster: "prod"},
			Status:   &roostv1.PoolStatus{Machines: 3, ReadyMachines: 2}}),
	}}
	h := &harness{tb: t, f: restoreNew(t, mustMarshal(t, snap)), idx: 10}
	res := h.mustApply(h.objects(resource.Wrap(&roostv1.Pool{Metadata: meta("workers", nil),
		Spec: &roostv1.PoolSpec{Cluster: "prod", ImageChannel: "beta"}})))
	if res.Results[0].GetAction() != ActionConfigured {
		t.Fatalf("action = %v", res.Results[0])
	}
	p := getPool(t, h.f, "workers")
	if !proto.Equal(p.GetStatus(), &roostv1.PoolStatus{Machines: 3, ReadyMachines: 2}) {
		t.Errorf("status = %v, want kept", p.GetStatus())
	}
	if g := p.GetMetadata().GetGeneration(); g != 5 {
		t.Errorf("generation = %d, want 5", g)
	}
}

func TestApplyObjectsRejected(t *testing.T) {
	noName := resource.Wrap(&roostv1.Cluster{Spec: &roostv1.ClusterSpec{}})
	cases := []struct {
		name   string
		setup  []*roostv1.Object
		cmd    func(h *harness) *roostv1.Command
		code   codes.Code
		fields []string
		// text is a substring of the error's text.
		text string
	}{
		{
			name: "one dangling reference in a batch of 3 stores none",
			cmd: func(h *harness) *roostv1.Command {
				return h.objects(clusterObj("prod", nil), machineClassObj("standard"),
					poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.NetworkProfile = "bonded" }))
			},
			code:   codes.FailedPrecondition,
			fields: []string{"objects[2].spec.networkProfile"},
			text:   `NetworkProfile "bonded" does not exist (create it first, or apply it in the same file)`,
		},
		{
			name:   "missing cluster",
			setup:  []*roostv1.Object{machineClassObj("standard")},
			cmd:    func(h *harness) *roostv1.Command { return h.objects(poolObj("workers", "prod")) },
			code:   codes.FailedPrecondition,
			fields: []string{"objects[0].spec.cluster"},
			text:   `objects[0].spec.cluster: Cluster "prod" does not exist (create it first, or apply it in the same file)`,
		},
		{
			name:  "every dangling reference is reported",
			setup: []*roostv1.Object{windowObj("tue")},
			cmd: func(h *harness) *roostv1.Command {
				return h.objects(poolObj("a", "prod", func(s *roostv1.PoolSpec) {
					s.MaintenanceWindows = []string{"tue", "wed"}
				}))
			},
			code:   codes.FailedPrecondition,
			fields: []string{"objects[0].spec.cluster", "objects[0].spec.machineClass", "objects[0].spec.maintenanceWindows[1]"},
		},
		{
			name:   "empty object",
			cmd:    func(h *harness) *roostv1.Command { return h.objects(clusterObj("prod", nil), &roostv1.Object{}) },
			code:   codes.InvalidArgument,
			fields: []string{"objects[1]"},
		},
		{
			name:   "no name",
			cmd:    func(h *harness) *roostv1.Command { return h.objects(noName) },
			code:   codes.InvalidArgument,
			fields: []string{"objects[0].metadata.name"},
		},
		{
			name:   "duplicate",
			cmd:    func(h *harness) *roostv1.Command { return h.objects(clusterObj("prod", nil), clusterObj("prod", nil)) },
			code:   codes.InvalidArgument,
			fields: []string{"objects[1].metadata.name"},
		},
		{
			name: "no uid for a new object",
			cmd: func(h *harness) *roostv1.Command {
				c := h.objects(clusterObj("prod", nil), clusterObj("dev", nil))
				c.GetApplyObjects().Uids = c.GetApplyObjects().Uids[:1]
				return c
			},
			code:   codes.InvalidArgument,
			fields: []string{"uids[1]"},
		},
		{
			name: "references may point forward in the same command",
			cmd: func(h *harness) *roostv1.Command {
				return h.objects(poolObj("workers", "prod"), machineClassObj("standard"), clusterObj("prod", nil))
			},
			code: codes.OK,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			if len(tc.setup) > 0 {
				h.mustApply(h.objects(tc.setup...))
			}
			before := snapshotBytes(t, h.f)
			res := h.apply(tc.cmd(h))
			if tc.code == codes.OK {
				if res.Err != nil {
					t.Fatal(res.Err)
				}
				return
			}
			e := wantCode(t, res.Err, tc.code)
			var fields []string
			for _, v := range e.Violations {
				fields = append(fields, v.Field)
			}
			if !slices.Equal(fields, tc.fields) {
				t.Errorf("violation fields = %v, want %v", fields, tc.fields)
			}
			if !strings.Contains(e.Error(), tc.text) {
				t.Errorf("error %q does not contain %q", e.Error(), tc.text)
			}
			if res.Results != nil {
				t.Errorf("results of a rejected command = %v", res.Results)
			}
			// Nothing changed but the applied index.
			after := restoreNew(t, snapshotBytes(t, h.f))
			if after.LastIndex() != h.idx {
				t.Errorf("LastIndex = %d, want %d", after.LastIndex(), h.idx)
			}
			b := &roostv1.Snapshot{}
			_ = proto.Unmarshal(before, b)
			b.LastIndex = h.idx
			if got := snapshotBytes(t, after); !slices.Equal(got, mustMarshalDet(t, b)) {
				t.Error("state changed by a rejected command")
			}
		})
	}
}

func mustMarshalDet(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDryRun(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(baseObjects()...))
	sub, err := h.f.Subscribe("", h.idx)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	before := snapshotBytes(t, h.f)

	c := h.objects(clusterObj("prod", map[string]string{"env": "prod"}), poolObj("workers", "prod"), machineClassObj("standard"))
	c.GetApplyObjects().DryRun = true
	res := h.mustApply(c)
	if got, want := actions(res), []string{"Cluster/prod=configured", "Pool/workers=created", "MachineClass/standard=unchanged"}; !slices.Equal(got, want) {
		t.Errorf("dry-run actions = %v, want %v", got, want)
	}
	// Dry runs need no UIDs.
	c = h.objects(poolObj("other", "prod"))
	c.GetApplyObjects().Uids = nil
	c.GetApplyObjects().DryRun = true
	h.mustApply(c)
	// A dry run reports the errors the real apply would.
	c = h.objects(poolObj("bad", "staging"))
	c.GetApplyObjects().DryRun = true
	wantCode(t, h.apply(c).Err, codes.FailedPrecondition)

	b := &roostv1.Snapshot{}
	_ = proto.Unmarshal(before, b)
	b.LastIndex = h.idx
	if !slices.Equal(snapshotBytes(t, h.f), mustMarshalDet(t, b)) {
		t.Error("dry run changed the state")
	}
	select {
	case ev := <-sub.Events():
		t.Errorf("dry run published %v", ev)
	default:
	}
}

func TestDeleteObject(t *testing.T) {
	cases := []struct {
		name string
		kind string
		obj  string
		code codes.Code
		text string
	}{
		{"missing", "Pool", "nope", codes.NotFound, `Pool "nope" not found`},
		{"unknown kind", "Gizmo", "x", codes.InvalidArgument, "unknown kind"},
		{"no name", "Pool", "", codes.InvalidArgument, "no name"},
		{"cluster in use", "Cluster", "prod", codes.FailedPrecondition, `Cluster "prod" is used by Pool "a", Pool "workers": take it out of those Pools' specs (roostctl apply), or delete those Pools first`},
		{"window in use", "mw", "tue", codes.FailedPrecondition, `MaintenanceWindow "tue" is used by Pool "workers": take it out of those Pools' specs (roostctl apply), or delete those Pools first`},
		{"unused", "clusters", "dev", codes.OK, ""},
		{"pool by alias", "pl", "workers", codes.OK, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.mustApply(h.objects(clusterObj("prod", nil), clusterObj("dev", nil), machineClassObj("standard"), windowObj("tue"),
				poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.MaintenanceWindows = []string{"tue", "tue"} }),
				poolObj("a", "prod")))
			res := h.apply(deleteCmd(tc.kind, tc.obj))
			if tc.code == codes.OK {
				if res.Err != nil {
					t.Fatal(res.Err)
				}
				k := resource.MustLookup(tc.kind)
				if got := actions(res); !slices.Equal(got, []string{k.Name + "/" + tc.obj + "=deleted"}) {
					t.Errorf("results = %v", got)
				}
				_, err := h.f.Get(tc.kind, tc.obj)
				wantCode(t, err, codes.NotFound)
				return
			}
			e := wantCode(t, res.Err, tc.code)
			if !strings.Contains(e.Error(), tc.text) {
				t.Errorf("error %q does not contain %q", e.Error(), tc.text)
			}
		})
	}

	t.Run("after its users are gone", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.mustApply(h.objects(append(baseObjects(), poolObj("workers", "prod"))...))
		wantCode(t, h.apply(deleteCmd("Cluster", "prod")).Err, codes.FailedPrecondition)
		// Re-pointing the pool frees the cluster as well as deleting it.
		h.mustApply(h.objects(clusterObj("staging", nil), poolObj("workers", "staging")))
		h.mustApply(deleteCmd("Cluster", "prod"))
		h.mustApply(deleteCmd("Pool", "workers"))
		h.mustApply(deleteCmd("Cluster", "staging"))
		// Re-created objects get a new UID and start over.
		h.mustApply(h.objects(clusterObj("prod", nil), poolObj("workers", "prod")))
		m := getPool(t, h.f, "workers").GetMetadata()
		if m.GetGeneration() != 1 || m.GetCreateIndex() != h.idx || m.GetUid() == "00000000-0000-4000-8000-000000000003" {
			t.Errorf("re-created metadata = %v", m)
		}
	})
}

func TestMalformedCommands(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		code codes.Code
	}{
		{"garbage", []byte{0xff, 0xff, 0xff, 0x01}, codes.InvalidArgument},
		{"empty command", nil, codes.InvalidArgument},
		{"object with nil message", mustMarshal(t, &roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{
			Objects: []*roostv1.Object{{Kind: &roostv1.Object_Pool{}}}, Uids: []string{"u"}}}}), codes.InvalidArgument},
		{"apply without time", mustMarshal(t, (&harness{}).objects(clusterObj("prod", nil))), codes.InvalidArgument},
		{"nil delete", mustMarshal(t, &roostv1.Command{Command: &roostv1.Command_DeleteObject{}}), codes.InvalidArgument},
		{"nil init CA", mustMarshal(t, &roostv1.Command{Command: &roostv1.Command_InitCa{}}), codes.InvalidArgument},
		{"nil member", mustMarshal(t, &roostv1.Command{Command: &roostv1.Command_PutMember{}}), codes.InvalidArgument},
		{"nil member delete", mustMarshal(t, &roostv1.Command{Command: &roostv1.Command_DeleteMember{}}), codes.NotFound},
		{"nil token", mustMarshal(t, &roostv1.Command{Command: &roostv1.Command_PutJoinToken{}}), codes.InvalidArgument},
		{"nil token use", mustMarshal(t, &roostv1.Command{Command: &roostv1.Command_UseJoinToken{}}), codes.FailedPrecondition},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			res := h.applyRaw(tc.data)
			wantCode(t, res.Err, tc.code)
			if h.f.LastIndex() != h.idx {
				t.Errorf("LastIndex = %d, want %d", h.f.LastIndex(), h.idx)
			}
		})
	}

	t.Run("random bytes never panic", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.mustApply(h.objects(append(baseObjects(), poolObj("workers", "prod"))...))
		valid := mustMarshal(t, h.objects(poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.MaintenanceWindows = []string{"x"} })))
		for i := 0; i < 2000; i++ {
			data := slices.Clone(valid)
			data[i%len(data)] ^= byte(i*31 + 7)
			if i%3 == 0 {
				data = data[:i%len(data)]
			}
			_ = h.applyRaw(data) // any result, but no panic
		}
	})

	t.Run("non-command entries only advance the index", func(t *testing.T) {
		f := New(Options{})
		res := f.Apply(&raft.Log{Index: 7, Type: raft.LogNoop}).(*ApplyResult)
		if res.Err != nil || res.Index != 7 || f.LastIndex() != 7 {
			t.Errorf("result %+v, LastIndex %d", res, f.LastIndex())
		}
	})
}

// TestApplyObjectsPreconditionsHubWrites: a manifest read before the hub
// wrote only the object's status (its modifyIndex moved on, its spec
// generation, labels and annotations did not) applies; once anyone changed
// the spec or the labels, or without a generation, the stale modifyIndex
// refuses it. A create warns that the manifest's uid is ignored.
func TestApplyObjectsPreconditionsHubWrites(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(append(baseObjects(), poolObj("workers", "prod"))...))
	read := proto.Clone(getPool(t, h.f, "workers").GetMetadata()).(*roostv1.ObjectMeta)
	writes := 0
	statusWrite := func() { // what the rollout controller writes
		t.Helper()
		before := getPool(t, h.f, "workers").GetMetadata()
		writes++
		h.mustApply(&roostv1.Command{Command: &roostv1.Command_UpdatePoolRollout{UpdatePoolRollout: &roostv1.UpdatePoolRollout{
			Pool: "workers", Status: &roostv1.RolloutStatus{Phase: "Progressing", Reason: fmt.Sprintf("write %d", writes)}}}})
		after := getPool(t, h.f, "workers").GetMetadata()
		if after.GetModifyIndex() == before.GetModifyIndex() || after.GetGeneration() != before.GetGeneration() {
			t.Fatalf("status write: metadata %v → %v, want a new modifyIndex only", before, after)
		}
	}
	edit := func(md *roostv1.ObjectMeta, replicas int32, labels map[string]string) *roostv1.Command {
		o := poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.Replicas = proto.Int32(replicas) })
		m := proto.Clone(md).(*roostv1.ObjectMeta)
		if labels != nil {
			m.Labels = labels
		}
		o.GetPool().Metadata = m
		return h.objects(o)
	}

	statusWrite()
	if got := actions(h.mustApply(edit(read, 4, nil))); !slices.Equal(got, []string{"Pool/workers=configured"}) {
		t.Fatalf("after a status-only write: %v, want configured", got)
	}
	if r := getPool(t, h.f, "workers").GetSpec().GetReplicas(); r != 4 {
		t.Fatalf("replicas = %d, want 4", r)
	}
	// the copy read before that apply: the spec generation moved on
	wantCode(t, h.apply(edit(read, 5, nil)).Err, codes.Aborted)

	read = proto.Clone(getPool(t, h.f, "workers").GetMetadata()).(*roostv1.ObjectMeta)
	statusWrite()
	noGen := proto.Clone(read).(*roostv1.ObjectMeta)
	noGen.Generation = 0
	wantCode(t, h.apply(edit(noGen, 6, nil)).Err, codes.Aborted)
	// labels that are not the stored ones: someone else's label change
	// cannot be told from the manifest's own
	wantCode(t, h.apply(edit(read, 6, map[string]string{"team": "a"})).Err, codes.Aborted)
	if got := actions(h.mustApply(edit(read, 6, nil))); !slices.Equal(got, []string{"Pool/workers=configured"}) {
		t.Fatalf("same generation and labels: %v", got)
	}

	// a create ignores the manifest's uid and says so
	o := poolObj("spare", "prod")
	o.GetPool().Metadata.Uid = "0b6f3c2e-0000-4000-8000-000000000001"
	res := h.mustApply(h.objects(o))
	if !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "pool/spare: created with a new uid") }) {
		t.Fatalf("warnings = %q", res.Warnings)
	}
	if u := getPool(t, h.f, "spare").GetMetadata().GetUid(); u == o.GetPool().Metadata.Uid {
		t.Fatalf("the manifest's uid was stored")
	}
}

// TestFreeHint: a refused delete says how to free the object.
func TestFreeHint(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		users []string
		want  string
	}{
		{"Pool", []string{`Machine "workers-abc12"`}, "release its servers first ('roostctl pool unassign workers SERVER...'"},
		{"MachineClass", []string{`Pool "workers"`, `Machine "host-1"`}, "take it out of those Pools' and Machines' specs"},
		{"MaintenanceWindow", []string{`Pool "workers"`}, "take it out of those Pools' specs (roostctl apply), or delete those Pools first"},
		{"NetworkProfile", []string{`Machine "host-1"`}, "delete or release those Machines first"},
		{"Server", []string{`Lease "x"`}, "delete or change them first"},
	} {
		if got := freeHint(tc.kind, "workers", tc.users); !strings.HasPrefix(got, tc.want) {
			t.Errorf("freeHint(%s, %v) = %q, want it to start with %q", tc.kind, tc.users, got, tc.want)
		}
	}
}
