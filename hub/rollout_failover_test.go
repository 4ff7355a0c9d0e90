package hub_test

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// leaderOf returns the member that leads now, waiting for an election.
func leaderOf(t *testing.T, members []*hub.Hub) *hub.Hub {
	t.Helper()
	var l *hub.Hub
	waitFor(t, "a leader", func() bool {
		for _, m := range members {
			if m != nil && m.Node().IsLeader() {
				l = m
				return true
			}
		}
		return false
	})
	return l
}

// proposeOnLeader applies cmd through whichever member leads, retrying
// across an election.
func proposeOnLeader(t *testing.T, members []*hub.Hub, mu *sync.Mutex, cmd *roostv1.Command) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		var l *hub.Hub
		for _, m := range members {
			if m != nil && m.Node().IsLeader() {
				l = m
			}
		}
		mu.Unlock()
		if l != nil {
			cmd.Time = timestamppb.Now()
			data, err := proto.Marshal(cmd)
			if err != nil {
				return err
			}
			res, _, err := l.Node().Apply(context.Background(), data)
			if err == nil {
				return res.(*state.ApplyResult).Err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no leader took the command")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Issue 8, acceptance 3: the leader is killed in the middle of a rollout
// (3 members, simulated agents): the pool never has more reboots in flight
// than maxUnavailable, the rollout finishes under the new leader, and no
// Server is granted two Leases.
func TestRolloutSurvivesLeaderLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("3 hub members and 12 simulated agents; skipped under -short")
	}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	first := startHub(t, dirs[0], hub.Options{NodeID: "hub-a"})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(first.AdminConfigPath()); return err == nil })
	admin := dial(t, first.AdminConfigPath(), first.APIAddr())
	ctx := context.Background()
	jt, err := admin.CreateJoinToken(ctx, &roostv1.CreateJoinTokenRequest{MaxUses: 2})
	if err != nil {
		t.Fatal(err)
	}
	members := []*hub.Hub{first}
	for i, id := range []string{"hub-b", "hub-c"} {
		members = append(members, startHub(t, dirs[i+1], hub.Options{NodeID: id, Join: first.APIAddr(), JoinToken: jt.GetToken()}))
	}
	waitFor(t, "3 voters", func() bool {
		ms, err := admin.ListMembers(ctx, &roostv1.ListMembersRequest{})
		return err == nil && len(ms.GetMembers()) == 3
	})
	var addrs []string
	for _, m := range members {
		addrs = append(addrs, m.APIAddr())
	}
	admin = dial(t, first.AdminConfigPath(), addrs...)
	cfg, err := client.LoadConfig(first.AdminConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // guards members (the killed one becomes nil)
	propose := func(cmd *roostv1.Command) {
		t.Helper()
		if err := proposeOnLeader(t, members, &mu, cmd); err != nil {
			t.Fatal(err)
		}
	}

	const maxUnavailable, servers = 2, 12
	release := func(v string) *roostv1.Object {
		return resource.Wrap(&roostv1.ImageRelease{Metadata: &roostv1.ObjectMeta{Name: "v" + v}, Spec: &roostv1.ImageReleaseSpec{Version: v, Channels: []string{"stable"}}})
	}
	propose(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{Uids: []string{uuid.NewString(), uuid.NewString(), uuid.NewString()},
		Objects: []*roostv1.Object{
			resource.Wrap(&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "std"}, Spec: &roostv1.MachineClassSpec{}}),
			resource.Wrap(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "workers"}, Spec: &roostv1.PoolSpec{MachineClass: "std", ImageChannel: "stable",
				Rollout: &roostv1.RolloutPolicy{MaxUnavailable: &roostv1.IntOrString{Value: &roostv1.IntOrString_IntVal{IntVal: maxUnavailable}}, ReadyTimeout: durationpb.New(10 * time.Minute)}}}),
			release("1"),
		}}}})

	// Twelve Servers enroll through the API, are claimed for the pool and
	// run Revision 1 (release 1).
	tok, err := admin.CreateEnrollmentToken(ctx, &roostv1.CreateEnrollmentTokenRequest{TtlSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	type agent struct {
		id, machine string
		c           roostv1.AgentServiceClient
	}
	var agents []*agent
	fx := &agentFixture{t: t, h: first, admin: admin, cfg: &client.Config{Hubs: addrs, CertificateAuthority: cfg.CertificateAuthority}}
	for i := 0; i < servers; i++ {
		id := fmt.Sprintf("4c4c4544-0042-3510-8052-%012d", 100+i)
		req, key := enrollReq(t, tok.GetToken(), id, fmt.Sprintf("52:54:00:00:01:%02x", i))
		resp, err := fx.agentClient(nil, nil).Enroll(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		propose(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{Name: id, Connected: true}}})
		agents = append(agents, &agent{id: id, c: fx.agentClient(resp.GetCertificatePem(), key)})
	}
	for _, a := range agents {
		waitFor(t, "Server "+a.id+" Available", func() bool {
			return first.FSM().Count("Server") == servers && serverState(first, a.id) == state.ServerAvailable
		})
		ar, err := admin.AssignServers(ctx, &roostv1.AssignServersRequest{Pool: "workers", Servers: []string{a.id}})
		if err != nil {
			t.Fatal(err)
		}
		a.machine = ar.GetMachines()[0].GetMetadata().GetName()
	}
	putRev := func(a *agent, n int64, v string) {
		propose(&roostv1.Command{Command: &roostv1.Command_PutRevision{PutRevision: &roostv1.PutRevision{Uid: uuid.NewString(),
			Revision: &roostv1.Revision{Spec: &roostv1.RevisionSpec{Server: a.id, Machine: a.machine, Number: n, ImageVersion: v, Ignition: []byte(`{"ignition":{"version":"3.3.0"}}`)}}}}})
	}
	boot := func(a *agent, n int64, healthy string) error {
		return proposeOnLeader(t, members, &mu, &roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{
			Name: a.id, HasBootedRevision: n > 0, BootedRevision: n, HasConditions: true,
			Conditions: []*roostv1.Condition{{Type: state.AgentHealthy, Status: healthy, Reason: "Simulated"}}}}})
	}
	for _, a := range agents {
		putRev(a, 1, "1")
		if err := boot(a, 1, "True"); err != nil {
			t.Fatal(err)
		}
	}

	// Release 2: every Server gets Revision 2; the simulated agents ask
	// for Leases and "reboot" (0.5–1.5 s) when granted.
	propose(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{Uids: []string{uuid.NewString()}, Objects: []*roostv1.Object{release("2")}}}})
	for _, a := range agents {
		putRev(a, 2, "2")
	}
	var (
		logMu     sync.Mutex
		inFlight  int
		peak      int
		grants    = map[string][]uint64{}
		done      int
		violation []string
	)
	begin := time.Now()
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(i)))
			deadline := time.Now().Add(3 * time.Minute)
			for time.Now().Before(deadline) {
				resp, err := a.c.AcquireLease(context.Background(), &roostv1.AcquireLeaseRequest{Revision: 2})
				if err != nil || !resp.GetGranted() {
					time.Sleep(200 * time.Millisecond) // a hub moving, or the pool full
					continue
				}
				logMu.Lock()
				if fs := grants[a.id]; len(fs) == 0 || fs[len(fs)-1] != resp.GetFencingToken() {
					grants[a.id] = append(grants[a.id], resp.GetFencingToken())
				}
				inFlight++
				peak = max(peak, inFlight)
				if inFlight > maxUnavailable {
					violation = append(violation, fmt.Sprintf("%s granted with %d reboots in flight", a.id, inFlight))
				}
				logMu.Unlock()
				if err := boot(a, 0, "False"); err != nil { // going down
					t.Error(err)
				}
				time.Sleep(time.Duration(500+rng.Intn(1000)) * time.Millisecond)
				logMu.Lock()
				inFlight--
				logMu.Unlock()
				if err := boot(a, 2, "True"); err != nil { // up on Revision 2
					t.Error(err)
				}
				logMu.Lock()
				done++
				logMu.Unlock()
				return
			}
			t.Errorf("%s: no Lease within 3 minutes", a.id)
		}()
	}

	// Kill the leader once a few Servers moved.
	waitFor(t, "three Servers on release 2", func() bool { logMu.Lock(); defer logMu.Unlock(); return done >= 3 })
	mu.Lock()
	var killed string
	for i, m := range members {
		if m != nil && m.Node().IsLeader() {
			killed = m.ID()
			m.Close() // hands leadership to another member first
			members[i] = nil
			break // not the successor too
		}
	}
	mu.Unlock()
	killedAt := time.Since(begin)
	wg.Wait()
	newLeader := leaderOf(t, members)
	t.Logf("TIMING leader %s killed at %v; rollout of %d Servers finished in %v under %s; peak reboots in flight %d (maxUnavailable %d)",
		killed, killedAt.Round(100*time.Millisecond), servers, time.Since(begin).Round(100*time.Millisecond), newLeader.ID(), peak, maxUnavailable)
	for _, v := range violation {
		t.Error(v)
	}
	for _, a := range agents {
		if n := len(grants[a.id]); n != 1 {
			t.Errorf("%s was granted %d Leases (fencing tokens %v), want 1", a.id, n, grants[a.id])
		}
	}
	waitFor(t, "pool workers Idle on release 2", func() bool {
		o, err := newLeader.FSM().Get("Pool", "workers")
		ro := o.GetPool().GetStatus().GetRollout()
		return err == nil && ro.GetPhase() == state.RolloutIdle && ro.GetUpdated() == servers && ro.GetTargetVersion() == "2"
	})
}

func serverState(h *hub.Hub, id string) string {
	s, _ := h.FSM().ServerState(id)
	return s
}
