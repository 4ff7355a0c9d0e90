package revisions

import (
	"context"
	"io"
	"log/slog"
	"testing"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// TestSourcesReachTheAffectedMachines: after each change, reconciling only
// the Machines the controller's sources map its events to leaves nothing
// for a fresh pass over every Machine to render, and a change of an
// object few Machines use reaches only those.
func TestSourcesReachTheAffectedMachines(t *testing.T) {
	fl := newFleet(t)
	fl.c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	const pools, perPool = 8, 3
	bigFleet(fl, pools, perPool)
	fl.objects(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "lonely"}, Spec: &roostv1.PoolSpec{MachineClass: "small", ImageChannel: "nightly"}})
	fl.claim(testServer, "52:54:00:00:00:01", "edge-host", "")
	fl.claim("4c4c4544-0042-3510-8052-b4c04f4d4e32", "52:54:00:00:00:02", "lonely-1", "lonely")
	fl.step()
	all := pools*perPool + 2
	ctx := context.Background()

	// change applies one change, reconciles the Machines its events map
	// to, and checks that a fresh pass finds nothing left; at most (≥ 0)
	// bounds the Machines reached.
	change := func(stage string, at int, apply func()) {
		t.Helper()
		type sub struct {
			keys func(*roostv1.WatchEvent) []string
			ch   <-chan *roostv1.WatchEvent
		}
		var subs []sub
		for _, src := range fl.c.sources() {
			s, err := fl.f.Subscribe(src.Kind, fl.f.LastIndex())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			subs = append(subs, sub{src.Keys, s.Events()})
		}
		apply()
		keys := map[string]bool{}
		for _, s := range subs {
			for more := true; more; {
				select {
				case ev := <-s.ch:
					for _, k := range s.keys(ev) {
						keys[k] = true
					}
				default:
					more = false
				}
			}
		}
		for k := range keys {
			if _, err := fl.c.Reconcile(ctx, k); err != nil {
				t.Fatalf("%s: Reconcile %s: %v", stage, k, err)
			}
		}
		var missed []string
		fresh := &Controller{IsLeader: func() bool { return true }, FSM: fl.f, NewUID: fl.newUID, Log: fl.c.Log,
			Propose: func(_ context.Context, c *roostv1.Command) error {
				missed = append(missed, c.GetPutRevision().GetRevision().GetSpec().GetMachine())
				return nil
			}}
		if err := fresh.Step(ctx); err != nil {
			t.Fatal(err)
		}
		if len(missed) != 0 {
			t.Errorf("%s: the events reached %d Machines and missed %v", stage, len(keys), missed)
		}
		if at >= 0 && len(keys) > at {
			t.Errorf("%s: the events reached %d Machines, want at most %d", stage, len(keys), at)
		}
	}
	change("pool node labels", perPool, func() { fl.objects(bigPool(1, map[string]string{"tier": "gold"})) })
	change("class", 3*perPool, func() {
		fl.objects(&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "large"}, Spec: &roostv1.MachineClassSpec{KernelArgs: []string{"mitigations=auto"}}})
	})
	change("profile", 4*perPool, func() {
		fl.objects(&roostv1.NetworkProfile{Metadata: &roostv1.ObjectMeta{Name: "flat"}, Spec: &roostv1.NetworkProfileSpec{
			Links: []*roostv1.Link{{Name: "eno1", Match: &roostv1.LinkMatch{Name: "enp9s0"}}}}})
	})
	change("cluster", 2*perPool, func() {
		fl.objects(&roostv1.Cluster{Metadata: &roostv1.ObjectMeta{Name: "prod"}, Spec: &roostv1.ClusterSpec{
			ApiEndpoint: "https://10.0.0.1:6443", CaBundle: "-----BEGIN CERTIFICATE-----\nprod2\n-----END CERTIFICATE-----\n"}})
	})
	change("promotion", all, func() {
		fl.apply(&roostv1.Command{Command: &roostv1.Command_PromoteImageRelease{PromoteImageRelease: &roostv1.PromoteImageRelease{
			Version: "2026.12.0", Channel: "stable"}}})
	})
	change("server label", 1, func() {
		fl.apply(&roostv1.Command{Command: &roostv1.Command_ModifyServer{ModifyServer: &roostv1.ModifyServer{
			Name: bigServer(2, 1), Action: roostv1.ServerAction_SERVER_ACTION_LABEL, SetLabels: map[string]string{"rack": "r7"}}}})
	})
	change("machine re-created on another Server", perPool, func() {
		fl.apply(&roostv1.Command{Command: &roostv1.Command_DeleteMachines{DeleteMachines: &roostv1.DeleteMachines{Names: []string{bigMachine(3, 0), bigMachine(3, 1)}}}})
		fl.apply(&roostv1.Command{Command: &roostv1.Command_CreateMachines{CreateMachines: &roostv1.CreateMachines{Machines: []*roostv1.NewMachine{
			{Name: bigMachine(3, 0), Uid: fl.newUID(), Server: bigServer(3, 1), Pool: bigPoolName(3)}}}}})
	})
	change("nightly release", -1, func() { fl.objects(bigRelease("2027.02.0", "nightly")) })
	if fl.c.notes["lonely-1"] != "" {
		t.Errorf("lonely-1: note %q after its release came", fl.c.notes["lonely-1"])
	}
}
