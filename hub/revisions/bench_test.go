package revisions

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/roostfleet/roost/hub/controller"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// bigRelease is testRelease with a manifest of realistic size (a file
// list of some kB), created in the given channels.
func bigRelease(version string, channels ...string) *roostv1.ImageRelease {
	r := testRelease(version, nil, channels...)
	files := make([]string, 200)
	for i := range files {
		files[i] = fmt.Sprintf("/usr/lib/modules/6.6.%d/kernel/drivers/net/ethernet/driver-%03d.ko", i%7, i)
	}
	r.Spec.Manifest, _ = json.Marshal(map[string]any{"version": version, "files": files})
	return r
}

// bigFleet populates fl through real commands: 3 MachineClasses, 2
// NetworkProfiles, 2 Clusters, 12 ImageReleases in the channels stable
// and beta (two pinned by version), and pools Pools of perPool enrolled,
// connected and claimed Servers each. Pool i is "pool-%03d"; its Machines
// are "pool-%03d-%03d". Every fourth Pool belongs to a Cluster, every
// fifth follows beta, every seventh pins a version.
func bigFleet(fl *fleet, pools, perPool int) {
	fl.t.Helper()
	objs := []resource.Resource{
		&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "small"}, Spec: &roostv1.MachineClassSpec{KernelArgs: []string{"quiet"}}},
		&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "large"}, Spec: &roostv1.MachineClassSpec{KernelArgs: []string{"mitigations=off"},
			SshAuthorizedKeys: []string{sshKey}, InstallDisk: &roostv1.InstallDiskHints{MinSize: "100Gi"}}},
		&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "gpu"}, Spec: &roostv1.MachineClassSpec{WipeForeignDisks: true}},
		&roostv1.NetworkProfile{Metadata: &roostv1.ObjectMeta{Name: "flat"}, Spec: &roostv1.NetworkProfileSpec{
			Links: []*roostv1.Link{{Name: "eno1", Match: &roostv1.LinkMatch{Name: "enp1s0"}}}}},
		&roostv1.NetworkProfile{Metadata: &roostv1.ObjectMeta{Name: "bonded"}, Spec: &roostv1.NetworkProfileSpec{
			Links: []*roostv1.Link{{Name: "eno1", Match: &roostv1.LinkMatch{Name: "enp1s0"}}, {Name: "eno2", Match: &roostv1.LinkMatch{Name: "enp2s0"}}},
			Bonds: []*roostv1.Bond{{Name: "bond0", Members: []string{"eno1", "eno2"}, Mode: "802.3ad"}}}},
	}
	for _, name := range []string{"prod", "staging"} {
		objs = append(objs, &roostv1.Cluster{Metadata: &roostv1.ObjectMeta{Name: name}, Spec: &roostv1.ClusterSpec{
			ApiEndpoint: "https://10.0.0.1:6443", CaBundle: "-----BEGIN CERTIFICATE-----\n" + name + "\n-----END CERTIFICATE-----\n"}})
	}
	for i := 0; i < 12; i++ {
		ch := []string{"stable"}
		switch {
		case i == 11:
			ch = []string{"beta"}
		case i >= 9:
			ch = []string{"stable", "beta"}
		case i < 2:
			ch = nil
		}
		objs = append(objs, bigRelease(fmt.Sprintf("2026.%02d.0", i+1), ch...))
	}
	fl.objects(objs...)
	for p := 0; p < pools; p++ {
		fl.objects(bigPool(p, nil))
	}
	const secret = "abcdef.0123456789abcdef"
	fl.apply(&roostv1.Command{Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{
		Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: "abcdef"}, Spec: &roostv1.EnrollmentTokenSpec{SecretSha256: hashOf(secret)}},
		Uid:   fl.newUID()}}})
	for p := 0; p < pools; p++ {
		nm := &roostv1.CreateMachines{}
		for j := 0; j < perPool; j++ {
			server := bigServer(p, j)
			fl.apply(&roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{
				TokenName: "abcdef", SecretSha256: hashOf(secret),
				Identity:  &roostv1.ServerIdentity{SystemUuid: server, PermanentMacs: []string{fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", p/256, p%256, j/256, j%256)}},
				Inventory: &roostv1.Inventory{Cpu: &roostv1.CPUInfo{Threads: 16, Cores: 8, Sockets: 1}, MemoryBytes: 64 << 30, Firmware: "UEFI", Arch: "amd64"},
				Uid:       fl.newUID()}}})
			fl.apply(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{Name: server, Connected: true}}})
			nm.Machines = append(nm.Machines, &roostv1.NewMachine{Name: bigMachine(p, j), Uid: fl.newUID(), Server: server, Pool: bigPoolName(p)})
		}
		fl.apply(&roostv1.Command{Command: &roostv1.Command_CreateMachines{CreateMachines: nm}})
	}
}

func bigPoolName(p int) string   { return fmt.Sprintf("pool-%03d", p) }
func bigMachine(p, j int) string { return fmt.Sprintf("pool-%03d-%03d", p, j) }
func bigServer(p, j int) string  { return fmt.Sprintf("00000000-0000-4000-9000-%06d%06d", p, j) }
func bigPool(p int, nodeLabels map[string]string) *roostv1.Pool {
	s := &roostv1.PoolSpec{MachineClass: []string{"small", "large", "gpu"}[p%3], NetworkProfile: []string{"flat", "bonded"}[p%2],
		ImageChannel: "stable", NodeLabels: nodeLabels}
	if p%4 == 0 {
		s.Cluster = []string{"prod", "staging"}[p/4%2]
	}
	if p%5 == 0 {
		s.ImageChannel = "beta"
	}
	if p%7 == 0 {
		s.ImageVersion = "2026.08.0"
	}
	return &roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: bigPoolName(p)}, Spec: s}
}

// BenchmarkStep10000Machines measures the revision controller's Step over
// 10,000 claimed Servers in 200 Pools that all have their Revision.
func BenchmarkStep10000Machines(b *testing.B) {
	fl := newFleet(b)
	fl.c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	bigFleet(fl, 200, 50)
	fl.step()
	if fl.proposed != 10000 {
		b.Fatalf("first step proposed %d revisions", fl.proposed)
	}
	fl.step()
	step := func(b *testing.B, c *Controller) {
		if err := c.Step(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	// Nothing changed since the last step.
	b.Run("unchanged", func(b *testing.B) {
		before := fl.proposed
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			step(b, fl.c)
		}
		if fl.proposed != before {
			b.Fatalf("proposed %d revisions", fl.proposed-before)
		}
	})
	// A fresh controller (a new leader) over the same unchanged state.
	b.Run("fresh", func(b *testing.B) {
		before := fl.proposed
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			step(b, &Controller{IsLeader: fl.c.IsLeader, FSM: fl.c.FSM, Propose: fl.c.Propose, NewUID: fl.c.NewUID, Log: fl.c.Log})
		}
		if fl.proposed != before {
			b.Fatalf("proposed %d revisions", fl.proposed-before)
		}
	})
	// One Server's status changed (renders nothing).
	b.Run("oneServerStatus", func(b *testing.B) {
		before := fl.proposed
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			fl.apply(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{
				Name: bigServer(3, 7), HasConditions: true,
				Conditions: []*roostv1.Condition{{Type: "Bench", Status: "True", Reason: fmt.Sprint("R", fl.idx)}}}}})
			b.StartTimer()
			step(b, fl.c)
		}
		if fl.proposed != before {
			b.Fatalf("proposed %d revisions", fl.proposed-before)
		}
	})
	// One Pool's node labels changed: its 50 Machines get a new Revision.
	b.Run("onePoolChanged", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			before := fl.proposed
			fl.objects(bigPool(17, map[string]string{"bench": strings.Repeat("x", 1+i%5) + fmt.Sprint(fl.idx)}))
			b.StartTimer()
			step(b, fl.c)
			b.StopTimer()
			if fl.proposed-before != 50 {
				b.Fatalf("proposed %d revisions", fl.proposed-before)
			}
			b.StartTimer()
		}
	})
}

// BenchmarkReconcile10000Machines measures what Run does for one change
// in a fleet of 10,000 Machines: map the change event to its Machines (the
// controller's sources) and reconcile each of them, without a pass over
// the fleet.
func BenchmarkReconcile10000Machines(b *testing.B) {
	fl := newFleet(b)
	fl.c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	bigFleet(fl, 200, 50)
	fl.step()
	ctx := context.Background()
	sources := map[string]controller.Source{}
	for _, s := range fl.c.sources() {
		sources[s.Kind] = s
	}
	// reconcile runs the controller's work for a change of kind/name.
	reconcile := func(b *testing.B, kind, name string) {
		ev := &roostv1.WatchEvent{Type: roostv1.WatchEvent_TYPE_MODIFIED, Object: fl.f.Reader().Get(kind, name)}
		for _, k := range sources[kind].Keys(ev) {
			if _, err := fl.c.Reconcile(ctx, k); err != nil {
				b.Fatal(err)
			}
		}
	}
	// One Server's status changed (renders nothing).
	b.Run("oneServerStatus", func(b *testing.B) {
		before := fl.proposed
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			fl.apply(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{
				Name: bigServer(3, 7), HasConditions: true,
				Conditions: []*roostv1.Condition{{Type: "Bench", Status: "True", Reason: fmt.Sprint("R", fl.idx)}}}}})
			b.StartTimer()
			reconcile(b, "Server", bigServer(3, 7))
		}
		if fl.proposed != before {
			b.Fatalf("proposed %d revisions", fl.proposed-before)
		}
	})
	// One Pool's node labels changed: its 50 Machines get a new Revision.
	b.Run("onePoolChanged", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			before := fl.proposed
			fl.objects(bigPool(17, map[string]string{"bench": strings.Repeat("x", 1+i%5) + fmt.Sprint(fl.idx)}))
			b.StartTimer()
			reconcile(b, "Pool", bigPool(17, nil).GetMetadata().GetName())
			b.StopTimer()
			if fl.proposed-before != 50 {
				b.Fatalf("proposed %d revisions", fl.proposed-before)
			}
			b.StartTimer()
		}
	})
}
