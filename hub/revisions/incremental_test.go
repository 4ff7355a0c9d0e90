package revisions

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// TestControllerIncrementalMatchesFresh: across a sequence of changes the
// controller, which skips Machines whose inputs it memoized, proposes
// exactly what a fresh controller (empty memo) proposes from the same
// state, and keeps the same notes.
func TestControllerIncrementalMatchesFresh(t *testing.T) {
	fl := newFleet(t)
	fl.c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	const pools, perPool = 8, 3
	bigFleet(fl, pools, perPool)
	// A standalone Machine with its own class, and a Pool without any
	// release in its channel (a note).
	fl.objects(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "lonely"}, Spec: &roostv1.PoolSpec{MachineClass: "small", ImageChannel: "nightly"}})
	fl.claim(testServer, "52:54:00:00:00:01", "edge-host", "")
	fl.claim("4c4c4544-0042-3510-8052-b4c04f4d4e32", "52:54:00:00:00:02", "lonely-1", "lonely")

	for _, k := range watchedKinds {
		if fl.f.Reader().Watch(k) == nil {
			t.Fatalf("no watch channel for kind %s", k)
		}
	}
	var got []*roostv1.RevisionSpec
	propose := func(_ context.Context, c *roostv1.Command) error {
		got = append(got, c.GetPutRevision().GetRevision().GetSpec())
		fl.proposed++
		return fl.applyErr(c)
	}
	fl.c.Propose = propose

	// check runs a fresh controller (proposing nothing) and then the
	// incremental one on the same state and compares what they propose
	// and note; evaluated (>= 0) is how many Machines the incremental one
	// must have planned. Then both must find nothing to do.
	check := func(stage string, evaluated int) {
		t.Helper()
		for round := 0; round < 2; round++ {
			var want []*roostv1.RevisionSpec
			fresh := &Controller{IsLeader: func() bool { return true }, FSM: fl.f, NewUID: fl.newUID, Log: fl.c.Log,
				Propose: func(_ context.Context, c *roostv1.Command) error {
					want = append(want, c.GetPutRevision().GetRevision().GetSpec())
					return nil
				}}
			if err := fresh.Step(context.Background()); err != nil {
				t.Fatalf("%s: fresh Step: %v", stage, err)
			}
			got = nil
			err := fl.c.Step(context.Background())
			if len(got) != len(want) {
				t.Fatalf("%s (round %d): proposed %d Revisions, a fresh controller %d", stage, round, len(got), len(want))
			}
			for i := range got {
				if !proto.Equal(got[i], want[i]) {
					t.Fatalf("%s (round %d): Revision %d\n got %v\nwant %v", stage, round, i, got[i], want[i])
				}
			}
			if round == 0 && evaluated >= 0 && fl.c.evaluated != evaluated {
				t.Errorf("%s: planned %d Machines, want %d", stage, fl.c.evaluated, evaluated)
			}
			for _, o := range fl.f.Reader().List("Machine") {
				name := o.GetMachine().GetMetadata().GetName()
				if fresh.notes[name] != fl.c.notes[name] {
					t.Errorf("%s: Machine %s: note %q, a fresh controller's %q", stage, name, fl.c.notes[name], fresh.notes[name])
				}
			}
			if err != nil {
				return // the failure stage: the next check proposes again
			}
			if round == 1 && len(got) != 0 {
				t.Fatalf("%s: a second Step proposed %d Revisions", stage, len(got))
			}
		}
	}
	all := pools*perPool + 2
	check("first", all)
	if len(fl.f.Revisions(bigServer(0, 0))) != 1 || fl.c.notes["lonely-1"] == "" {
		t.Fatalf("first Step: revisions %v, notes %v", fl.numbers(bigServer(0, 0)), fl.c.notes)
	}
	check("nothing changed", 0)

	// Pool spec change: its Machines render.
	fl.objects(bigPool(1, map[string]string{"tier": "gold"}))
	check("pool node labels", perPool)
	// A Pool change that renders nothing.
	p := bigPool(1, map[string]string{"tier": "gold"})
	p.Spec.Rollout = &roostv1.RolloutPolicy{FailureBudget: 2}
	fl.objects(p)
	check("pool rollout policy", perPool)
	// MachineClass change: the Machines of pools 1, 4, 7 ("large").
	fl.objects(&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "large"}, Spec: &roostv1.MachineClassSpec{KernelArgs: []string{"mitigations=auto"}}})
	check("class", 3*perPool)
	// NetworkProfile and Cluster changes.
	fl.objects(&roostv1.NetworkProfile{Metadata: &roostv1.ObjectMeta{Name: "flat"}, Spec: &roostv1.NetworkProfileSpec{
		Links: []*roostv1.Link{{Name: "eno1", Match: &roostv1.LinkMatch{Name: "enp9s0"}}}}})
	check("profile", 4*perPool)
	fl.objects(&roostv1.Cluster{Metadata: &roostv1.ObjectMeta{Name: "prod"}, Spec: &roostv1.ClusterSpec{
		ApiEndpoint: "https://10.0.0.1:6443", CaBundle: "-----BEGIN CERTIFICATE-----\nprod2\n-----END CERTIFICATE-----\n"}})
	check("cluster", 1*perPool) // pool 0 (pool 4 pins a version but is in staging)

	// A release promoted to stable: every stable Pool that pins nothing
	// moves to it (it is the newest created).
	fl.apply(&roostv1.Command{Command: &roostv1.Command_PromoteImageRelease{PromoteImageRelease: &roostv1.PromoteImageRelease{
		Version: "2026.12.0", Channel: "stable"}}})
	check("promotion", -1)
	// A release in no channel nobody pins: nothing renders.
	fl.objects(bigRelease("2027.01.0"))
	check("unused release", -1)

	// Server label change and a status-only change.
	fl.apply(&roostv1.Command{Command: &roostv1.Command_ModifyServer{ModifyServer: &roostv1.ModifyServer{
		Name: bigServer(2, 1), Action: roostv1.ServerAction_SERVER_ACTION_LABEL, SetLabels: map[string]string{"rack": "r7"}}}})
	check("server label", 1)
	fl.apply(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{
		Name: bigServer(2, 2), HasConditions: true, Conditions: []*roostv1.Condition{{Type: state.AgentHealthy, Status: "True"}}}}})
	check("server status", 1)

	// A Machine deleted and re-created with the same name, first on its
	// Server, then on another one. (Either changes the Pool's
	// status.machines: its Machines are planned, none renders.)
	fl.apply(&roostv1.Command{Command: &roostv1.Command_DeleteMachines{DeleteMachines: &roostv1.DeleteMachines{Names: []string{bigMachine(3, 0)}}}})
	check("machine deleted", perPool-1)
	fl.apply(&roostv1.Command{Command: &roostv1.Command_CreateMachines{CreateMachines: &roostv1.CreateMachines{Machines: []*roostv1.NewMachine{
		{Name: bigMachine(3, 0), Uid: fl.newUID(), Server: bigServer(3, 0), Pool: bigPoolName(3)}}}}})
	check("machine re-created", perPool)
	fl.apply(&roostv1.Command{Command: &roostv1.Command_DeleteMachines{DeleteMachines: &roostv1.DeleteMachines{Names: []string{bigMachine(3, 0), bigMachine(3, 1)}}}})
	fl.apply(&roostv1.Command{Command: &roostv1.Command_CreateMachines{CreateMachines: &roostv1.CreateMachines{Machines: []*roostv1.NewMachine{
		{Name: bigMachine(3, 0), Uid: fl.newUID(), Server: bigServer(3, 1), Pool: bigPoolName(3)}}}}})
	check("machine re-created on another Server", perPool-1)
	if l := fl.f.LatestRevision(bigServer(3, 1)); l.GetSpec().GetMachine() != bigMachine(3, 0) {
		t.Fatalf("latest of the other Server: %v", l.GetSpec())
	}

	// A Revision fails: not retried; a change after it renders.
	fl.apply(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{
		Name: bigServer(5, 0), HasBootedRevision: true, BootedRevision: 0,
		HasFailedRevisions: true, FailedRevisions: []*roostv1.FailedRevision{{Number: fl.f.LatestRevision(bigServer(5, 0)).GetSpec().GetNumber(), Reason: "kernel panic"}}}}})
	if l := fl.f.LatestRevision(bigServer(5, 0)); l.GetStatus().GetPhase() != state.RevisionFailed {
		t.Fatalf("test setup: latest %v", l.GetStatus())
	}
	check("revision failed", 1)
	fl.objects(bigPool(5, map[string]string{"after": "failure"}))
	check("change after a failure", perPool)

	// A Revision written by someone else (a former leader) with other
	// inputs: the Machine renders again.
	l := fl.f.LatestRevision(bigServer(7, 2)).GetSpec()
	other := proto.Clone(l).(*roostv1.RevisionSpec)
	other.Number, other.InputsSha256 = l.GetNumber()+1, hashOf("other")
	fl.apply(&roostv1.Command{Command: &roostv1.Command_PutRevision{PutRevision: &roostv1.PutRevision{
		Revision: &roostv1.Revision{Spec: other}, Uid: fl.newUID()}}})
	check("revision written by another", 1)
	if n := fl.f.LatestRevision(bigServer(7, 2)).GetSpec().GetNumber(); n != l.GetNumber()+2 {
		t.Fatalf("latest Revision %d, want %d", n, l.GetNumber()+2)
	}

	// The newest Revision deleted behind the controller's back.
	fl.apply(&roostv1.Command{Command: &roostv1.Command_DeleteObject{DeleteObject: &roostv1.DeleteObject{
		Kind: "Revision", Name: state.RevisionName(bigServer(7, 1), fl.f.LatestRevision(bigServer(7, 1)).GetSpec().GetNumber())}}})
	check("revision deleted", -1)

	// A Propose fails (once, for one Machine): that Machine is not
	// memoized and renders again on the next Step.
	failed := false
	fl.c.Propose = func(ctx context.Context, c *roostv1.Command) error {
		if !failed && c.GetPutRevision().GetRevision().GetSpec().GetMachine() == bigMachine(6, 1) {
			failed = true
			got = append(got, c.GetPutRevision().GetRevision().GetSpec())
			return errors.New("not the leader any more")
		}
		return propose(ctx, c)
	}
	fl.objects(bigPool(6, map[string]string{"propose": "fails"}))
	check("propose failed", perPool)
	if !failed {
		t.Fatal("test setup: no Propose failed")
	}
	check("after the failed propose", perPool)
	if l := fl.f.LatestRevision(bigServer(6, 1)); l.GetSpec().GetMachine() != bigMachine(6, 1) || !proto.Equal(l.GetSpec(), fl.f.LatestRevision(bigServer(6, 1)).GetSpec()) {
		t.Fatalf("latest %v", l.GetSpec())
	}
	fl.c.Propose = propose

	// A release reaches the lonely Pool's channel: its note gives way.
	fl.objects(bigRelease("2027.02.0", "nightly"))
	check("nightly release", -1)
	if fl.c.notes["lonely-1"] != "" || len(fl.f.Revisions("4c4c4544-0042-3510-8052-b4c04f4d4e32")) != 1 {
		t.Errorf("lonely-1: note %q", fl.c.notes["lonely-1"])
	}

	// A new leadership term forgets the memo: every Machine is planned.
	leading := false
	fl.c.IsLeader = func() bool { return leading }
	if err := fl.c.Step(context.Background()); err != nil || fl.c.memo != nil {
		t.Fatalf("follower Step = %v, memo kept: %v", err, fl.c.memo != nil)
	}
	leading = true
	check("new term", all-1) // one Machine less than at first
	// A restored state (new stored messages) is planned afresh too.
	snap, err := fl.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	defer snap.Release()
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	if err := fl.f.Restore(io.NopCloser(&sink.Buffer)); err != nil {
		t.Fatal(err)
	}
	check("restored", all-1)
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct{ bytes.Buffer }

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { return nil }
func (s *memSink) Cancel() error { return nil }
