package fleetmetrics_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/fleetmetrics"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// fleet is an FSM fed with commands the way Raft applies them.
type fleet struct {
	t   testing.TB
	f   *state.FSM
	idx uint64
	now time.Time
}

const tokenSecret = "flttok.0123456789abcdef"

func newFleet(t testing.TB) *fleet {
	fl := &fleet{t: t, f: state.New(state.Options{}), now: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)}
	sum := sha256.Sum256([]byte(tokenSecret))
	fl.must(&roostv1.Command{Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{Uid: fl.uid("token", 0),
		Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: "flttok"}, Spec: &roostv1.EnrollmentTokenSpec{SecretSha256: hex.EncodeToString(sum[:])}}}}})
	return fl
}

// uid is a fixed UUID for object i of a kind.
func (fl *fleet) uid(kind string, i int) string {
	return fmt.Sprintf("00000000-0000-4000-%04x-%012d", len(kind)*7919%0xffff, i)
}

func (fl *fleet) must(c *roostv1.Command) {
	fl.t.Helper()
	c.Time = timestamppb.New(fl.now)
	data, err := proto.Marshal(c)
	if err != nil {
		fl.t.Fatal(err)
	}
	fl.idx++
	if res := fl.f.Apply(&raft.Log{Index: fl.idx, Type: raft.LogCommand, Data: data}).(*state.ApplyResult); res.Err != nil {
		fl.t.Fatalf("%T: %v", c.GetCommand(), res.Err)
	}
}

func (fl *fleet) apply(objs ...resource.Resource) {
	fl.t.Helper()
	a := &roostv1.ApplyObjects{}
	for i, o := range objs {
		a.Objects = append(a.Objects, resource.Wrap(o))
		a.Uids = append(a.Uids, fl.uid("object", int(fl.idx)*100+i))
	}
	fl.must(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: a}})
}

// server enrolls Server i (connected, so Available and Reachable) and
// returns its name.
func (fl *fleet) server(i int) string {
	fl.t.Helper()
	id := fmt.Sprintf("00000000-0000-4000-9000-%012d", i)
	sum := sha256.Sum256([]byte(tokenSecret))
	fl.must(&roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{TokenName: "flttok", SecretSha256: hex.EncodeToString(sum[:]),
		Uid: fl.uid("server", i), Identity: &roostv1.ServerIdentity{SystemUuid: id, PermanentMacs: []string{fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", i>>24&0xff, i>>16&0xff, i>>8&0xff, i&0xff)}},
		Inventory: &roostv1.Inventory{Cpu: &roostv1.CPUInfo{Cores: 8, Threads: 16}, MemoryBytes: 64 << 30, Arch: "amd64", Firmware: "UEFI"}}}})
	fl.must(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{Name: id, Connected: true}}})
	return id
}

func pool(name, cluster string) *roostv1.Pool {
	return &roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: name}, Spec: &roostv1.PoolSpec{Cluster: cluster,
		Rollout: &roostv1.RolloutPolicy{MaxUnavailable: &roostv1.IntOrString{Value: &roostv1.IntOrString_IntVal{IntVal: 5}}}}}
}

func prodCluster() *roostv1.Cluster {
	return &roostv1.Cluster{Metadata: &roostv1.ObjectMeta{Name: "prod"}, Spec: &roostv1.ClusterSpec{ApiEndpoint: "https://10.0.0.1:6443", KubernetesVersion: "v1.34.4"}}
}

// TestCollectorMatchesState builds a small fleet with every kind of
// object the collector counts and checks each series against it.
func TestCollectorMatchesState(t *testing.T) {
	fl := newFleet(t)
	fl.apply(prodCluster(), pool("workers", "prod"), pool("spare", ""))
	var srv []string
	for i := range 5 {
		srv = append(srv, fl.server(i))
	}
	// workers-0, workers-1 in pool workers; edge-0 standalone; srv[3]
	// and srv[4] stay Available, srv[4] unreachable.
	fl.must(&roostv1.Command{Command: &roostv1.Command_CreateMachines{CreateMachines: &roostv1.CreateMachines{Machines: []*roostv1.NewMachine{
		{Name: "workers-0", Uid: fl.uid("machine", 0), Server: srv[0], Pool: "workers"},
		{Name: "workers-1", Uid: fl.uid("machine", 1), Server: srv[1], Pool: "workers"},
		{Name: "edge-0", Uid: fl.uid("machine", 2), Server: srv[2]},
	}}}})
	fl.must(&roostv1.Command{Command: &roostv1.Command_SetServerReachability{SetServerReachability: &roostv1.SetServerReachability{
		Changes: []*roostv1.ReachabilityChange{{Name: srv[4], Reachable: false, LastSeen: timestamppb.New(fl.now)}}}}})
	// Two Revisions of workers-0 (the first superseded), one of edge-0.
	for _, r := range []struct {
		server, machine string
		n               int64
	}{{srv[0], "workers-0", 1}, {srv[0], "workers-0", 2}, {srv[2], "edge-0", 1}} {
		fl.must(&roostv1.Command{Command: &roostv1.Command_PutRevision{PutRevision: &roostv1.PutRevision{Uid: fl.uid("revision", int(fl.idx)),
			Revision: &roostv1.Revision{Spec: &roostv1.RevisionSpec{Server: r.server, Machine: r.machine, Number: r.n, ImageVersion: "v1",
				Ignition: []byte(`{"ignition":{"version":"3.3.0"}}`)}}}}})
	}
	// A held Lease of workers-0 (Draining) and an expired one of edge-0.
	fl.must(&roostv1.Command{Command: &roostv1.Command_GrantLease{GrantLease: &roostv1.GrantLease{Server: srv[0], Revision: 2,
		ExpiresAt: timestamppb.New(fl.now.Add(time.Hour)), MaxUnavailable: 5, Uid: fl.uid("lease", 0), Phase: state.LeaseDraining}}})
	fl.must(&roostv1.Command{Command: &roostv1.Command_GrantLease{GrantLease: &roostv1.GrantLease{Server: srv[2], Revision: 1,
		ExpiresAt: timestamppb.New(fl.now.Add(time.Minute)), Uid: fl.uid("lease", 1)}}})
	fl.must(&roostv1.Command{Command: &roostv1.Command_UpdatePoolRollout{UpdatePoolRollout: &roostv1.UpdatePoolRollout{Pool: "workers",
		Status: &roostv1.RolloutStatus{Phase: state.RolloutProgressing, TargetVersion: "v2", Updated: 1, Total: 4, Unavailable: 2, FailedMachines: []string{"workers-1"}}}}})

	fl.must(&roostv1.Command{RulesVersion: state.RulesRemediation, Command: &roostv1.Command_SetConditions{SetConditions: &roostv1.SetConditions{Kind: "Pool", Name: "workers",
		Set: []*roostv1.Condition{{Type: state.PoolFrozen, Status: "True", Reason: state.ReasonClusterUnreachable, Message: "the API of Cluster prod is unreachable"}}}}})

	clock := fl.now.Add(10 * time.Minute) // edge-0's Lease has expired
	c := fleetmetrics.NewCollector(fl.f, func() time.Time { return clock })
	want := `
# HELP roost_leases Reboot Leases held now (not expired) by pool, cluster and phase (Draining, Granted).
# TYPE roost_leases gauge
roost_leases{cluster="prod",phase="Draining",pool="workers"} 1
# HELP roost_machines Machines by pool, cluster and phase (Requested, Scheduled, Provisioned, Joined, Ready, Destroyed); pool and cluster are empty for standalone Machines.
# TYPE roost_machines gauge
roost_machines{cluster="",phase="Scheduled",pool=""} 1
roost_machines{cluster="prod",phase="Scheduled",pool="workers"} 2
# HELP roost_pool_frozen 1 while the pool is Frozen by the safety controller (no replacement, no reboot), with the reason (TooManyUnhealthy, ClusterUnreachable, OverReplicated); 0 with reason "" otherwise.
# TYPE roost_pool_frozen gauge
roost_pool_frozen{cluster="",pool="spare",reason=""} 0
roost_pool_frozen{cluster="prod",pool="workers",reason="ClusterUnreachable"} 1
# HELP roost_pool_rollout_failed_machines Machines of the pool that failed on the rollout's target and are not acknowledged.
# TYPE roost_pool_rollout_failed_machines gauge
roost_pool_rollout_failed_machines{cluster="",pool="spare"} 0
roost_pool_rollout_failed_machines{cluster="prod",pool="workers"} 1
# HELP roost_pool_rollout_machines Machines of the pool the rollout counts.
# TYPE roost_pool_rollout_machines gauge
roost_pool_rollout_machines{cluster="",pool="spare"} 0
roost_pool_rollout_machines{cluster="prod",pool="workers"} 4
# HELP roost_pool_rollout_phase 1 for the pool's current rollout phase (Idle, Waiting, Progressing, Settling, Paused, Halted), 0 for the others.
# TYPE roost_pool_rollout_phase gauge
roost_pool_rollout_phase{cluster="",phase="Halted",pool="spare"} 0
roost_pool_rollout_phase{cluster="",phase="Idle",pool="spare"} 0
roost_pool_rollout_phase{cluster="",phase="Paused",pool="spare"} 0
roost_pool_rollout_phase{cluster="",phase="Progressing",pool="spare"} 0
roost_pool_rollout_phase{cluster="",phase="Settling",pool="spare"} 0
roost_pool_rollout_phase{cluster="",phase="Waiting",pool="spare"} 0
roost_pool_rollout_phase{cluster="prod",phase="Halted",pool="workers"} 0
roost_pool_rollout_phase{cluster="prod",phase="Idle",pool="workers"} 0
roost_pool_rollout_phase{cluster="prod",phase="Paused",pool="workers"} 0
roost_pool_rollout_phase{cluster="prod",phase="Progressing",pool="workers"} 1
roost_pool_rollout_phase{cluster="prod",phase="Settling",pool="workers"} 0
roost_pool_rollout_phase{cluster="prod",phase="Waiting",pool="workers"} 0
# HELP roost_pool_rollout_progress_ratio updated / total Machines of the pool's rollout, 0 to 1 (1 for an empty pool).
# TYPE roost_pool_rollout_progress_ratio gauge
roost_pool_rollout_progress_ratio{cluster="",pool="spare"} 1
roost_pool_rollout_progress_ratio{cluster="prod",pool="workers"} 0.25
# HELP roost_pool_rollout_unavailable_machines Machines of the pool not Ready or holding a reboot Lease.
# TYPE roost_pool_rollout_unavailable_machines gauge
roost_pool_rollout_unavailable_machines{cluster="",pool="spare"} 0
roost_pool_rollout_unavailable_machines{cluster="prod",pool="workers"} 2
# HELP roost_pool_rollout_updated_machines Machines of the pool Ready on a Revision of the rollout's target version.
# TYPE roost_pool_rollout_updated_machines gauge
roost_pool_rollout_updated_machines{cluster="",pool="spare"} 0
roost_pool_rollout_updated_machines{cluster="prod",pool="workers"} 1
# HELP roost_revisions Revisions by the pool and cluster of their Machine and phase (Pending, Booted, Good, Failed, Superseded).
# TYPE roost_revisions gauge
roost_revisions{cluster="",phase="Pending",pool=""} 1
roost_revisions{cluster="prod",phase="Pending",pool="workers"} 1
roost_revisions{cluster="prod",phase="Superseded",pool="workers"} 1
# HELP roost_servers Servers by the pool and cluster of the Machine claiming them (empty when unclaimed), lifecycle state and reachability (Reachable, Unreachable, or Unknown before the first heartbeat or once decommissioned).
# TYPE roost_servers gauge
roost_servers{cluster="",pool="",reachability="Reachable",state="Available"} 1
roost_servers{cluster="",pool="",reachability="Reachable",state="Claimed"} 1
roost_servers{cluster="",pool="",reachability="Unreachable",state="Available"} 1
roost_servers{cluster="prod",pool="workers",reachability="Reachable",state="Claimed"} 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c); n != 34 {
		t.Errorf("%d series, want 34", n)
	}
	// The collector registers cleanly next to the events.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fleetmetrics.NewEvents(reg)
	if _, err := reg.Gather(); err != nil {
		t.Error(err)
	}
}

// BenchmarkCollect10000Servers scrapes a fleet of 10,000 Servers in 20
// pools of 500 Machines, each with one Revision.
func BenchmarkCollect10000Servers(b *testing.B) {
	fl := newFleet(b)
	objs := []resource.Resource{prodCluster()}
	for p := range 20 {
		objs = append(objs, pool(fmt.Sprintf("pool-%02d", p), "prod"))
	}
	fl.apply(objs...)
	cm := &roostv1.CreateMachines{}
	for i := range 10000 {
		srv := fl.server(i)
		cm.Machines = append(cm.Machines, &roostv1.NewMachine{Name: fmt.Sprintf("m-%05d", i), Uid: fl.uid("machine", i), Server: srv, Pool: fmt.Sprintf("pool-%02d", i%20)})
		if len(cm.Machines) == 500 {
			fl.must(&roostv1.Command{Command: &roostv1.Command_CreateMachines{CreateMachines: cm}})
			cm = &roostv1.CreateMachines{}
		}
	}
	for i := range 10000 {
		fl.must(&roostv1.Command{Command: &roostv1.Command_PutRevision{PutRevision: &roostv1.PutRevision{Uid: fl.uid("revision", i),
			Revision: &roostv1.Revision{Spec: &roostv1.RevisionSpec{Server: fmt.Sprintf("00000000-0000-4000-9000-%012d", i), Machine: fmt.Sprintf("m-%05d", i),
				Number: 1, ImageVersion: "v1", Ignition: []byte(`{"ignition":{"version":"3.3.0"}}`)}}}}})
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(fleetmetrics.NewCollector(fl.f, nil))
	b.ResetTimer()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
