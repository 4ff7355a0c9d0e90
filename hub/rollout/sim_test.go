package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
	"github.com/roostfleet/roost/window"
)

// The simulation runs the real FSM, rollout controller and admission
// against simulated agents and a fake clock: servers boot, reboot (5–15
// min), fail on purpose, or go down on their own, while pools in three
// time zones move to a new release inside their windows.

type simConfig struct {
	pools, perPool int
	failingPools   int
	outages        int
	start          time.Time
	days           int
}

type simServer struct {
	name, machine, pool string
	rebooting           bool
	rebootEnd           time.Time
	fail                bool
	outageStart         time.Time
	outageEnd           time.Time
	inOutage            bool
	// hang: its reboots never end (it never reports again).
	hang bool
}

type simPool struct {
	name           string
	maxUnavailable int32
	settle         time.Duration
	windows        windowSet
	failing        bool
	servers        []*simServer
	// openings counts the window openings in which a reboot started.
	openings map[time.Time]bool
	doneAt   time.Time
}

type sim struct {
	t                     testing.TB
	cfg                   simConfig
	rng                   *rand.Rand
	f                     *state.FSM
	idx                   uint64
	now                   time.Time
	ctrl                  *Controller
	pools                 []*simPool
	byMachine             map[string]*simServer
	errs                  []string
	grants, starts, steps int
	// rules, when set, is the apply rules version of every command (0:
	// the oldest rules, as the simulation was written for).
	rules uint32
}

func (s *sim) apply(cmd *roostv1.Command) *state.ApplyResult {
	s.idx++
	cmd.Time = timestamppb.New(s.now)
	cmd.RulesVersion = s.rules
	data, err := proto.Marshal(cmd)
	if err != nil {
		s.t.Fatal(err)
	}
	return s.f.Apply(&raft.Log{Index: s.idx, Type: raft.LogCommand, Data: data}).(*state.ApplyResult)
}

func (s *sim) must(cmd *roostv1.Command) *state.ApplyResult {
	s.t.Helper()
	res := s.apply(cmd)
	if res.Err != nil {
		s.t.Fatalf("%T: %v", cmd.GetCommand(), res.Err)
	}
	return res
}

func (s *sim) violate(format string, a ...any) {
	if len(s.errs) < 20 {
		s.errs = append(s.errs, s.now.UTC().Format(time.RFC3339)+": "+fmt.Sprintf(format, a...))
	}
}

var simZones = []string{"Europe/Berlin", "America/New_York", "Asia/Tokyo"}

func newSim(t testing.TB, seed int64, cfg simConfig) *sim {
	return newSimWith(t, seed, cfg, nil)
}

// newSimWith is newSim; setup, if set, runs on the sim before anything is
// applied (to set the rules, a recorder).
func newSimWith(t testing.TB, seed int64, cfg simConfig, setup func(*sim)) *sim {
	s := &sim{t: t, cfg: cfg, rng: rand.New(rand.NewSource(seed)), f: state.New(state.Options{WatchRing: -1}), now: cfg.start, byMachine: map[string]*simServer{}}
	s.ctrl = &Controller{IsLeader: func() bool { return true }, FSM: s.f, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return s.now },
		Propose: func(_ context.Context, c *roostv1.Command) error { return s.apply(c).Err }}
	if setup != nil {
		setup(s)
	}
	objs := []*roostv1.Object{resource.Wrap(&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "std"}, Spec: &roostv1.MachineClassSpec{}})}
	// Per zone: a daily window at 02:30 for 2h (in Europe/Berlin the
	// start falls into the spring-forward gap on 2027-03-28) and a
	// weekend window at 22:00 for 4h crossing midnight.
	var windowNames [][]string
	for i, z := range simZones {
		daily := &roostv1.MaintenanceWindowSpec{Rrule: "FREQ=DAILY;BYHOUR=2;BYMINUTE=30", Duration: durationpb.New(2 * time.Hour), TimeZone: z}
		weekend := &roostv1.MaintenanceWindowSpec{Rrule: "FREQ=WEEKLY;BYDAY=SA,SU;BYHOUR=22;BYMINUTE=0", Duration: durationpb.New(4 * time.Hour), TimeZone: z}
		names := []string{fmt.Sprintf("daily-%d", i), fmt.Sprintf("weekend-%d", i)}
		objs = append(objs, resource.Wrap(&roostv1.MaintenanceWindow{Metadata: &roostv1.ObjectMeta{Name: names[0]}, Spec: daily}),
			resource.Wrap(&roostv1.MaintenanceWindow{Metadata: &roostv1.ObjectMeta{Name: names[1]}, Spec: weekend}))
		windowNames = append(windowNames, names)
	}
	failing := map[int]bool{}
	for len(failing) < cfg.failingPools {
		failing[s.rng.Intn(cfg.pools)] = true
	}
	for i := 0; i < cfg.pools; i++ {
		zone := i % len(simZones)
		names := windowNames[zone][:1+s.rng.Intn(2)]
		sp := &simPool{name: fmt.Sprintf("pool-%02d", i), failing: failing[i], openings: map[time.Time]bool{}}
		var mu *roostv1.IntOrString
		switch s.rng.Intn(4) {
		case 0:
			mu = &roostv1.IntOrString{Value: &roostv1.IntOrString_StrVal{StrVal: "10%"}}
		default:
			mu = &roostv1.IntOrString{Value: &roostv1.IntOrString_IntVal{IntVal: int32(1 + s.rng.Intn(3))}}
		}
		sp.settle = []time.Duration{0, 5 * time.Minute}[s.rng.Intn(2)]
		for _, n := range names {
			o := objs[1+2*zone]
			if n != names[0] {
				o = objs[2+2*zone]
			}
			w, err := window.Parse(o.GetMaintenanceWindow().GetSpec())
			if err != nil {
				t.Fatal(err)
			}
			sp.windows = append(sp.windows, w)
		}
		objs = append(objs, resource.Wrap(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: sp.name}, Spec: &roostv1.PoolSpec{
			MachineClass: "std", MaintenanceWindows: names, ImageChannel: "stable",
			Rollout: &roostv1.RolloutPolicy{MaxUnavailable: mu, Settle: durationpb.New(sp.settle), ReadyTimeout: durationpb.New(30 * time.Minute)}}}))
		s.pools = append(s.pools, sp)
	}
	objs = append(objs, release("2027.02.0"))
	uids := make([]string, len(objs))
	for i := range uids {
		uids[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
	}
	s.must(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{Objects: objs, Uids: uids}}})

	// Enroll every server, claim it for its pool, boot Revision 1 (the
	// old release) healthy.
	const secret = "simtok.0123456789abcdef"
	sum := sha256.Sum256([]byte(secret))
	s.must(&roostv1.Command{Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{Uid: "00000000-0000-4000-8000-100000000000",
		Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: "simtok"}, Spec: &roostv1.EnrollmentTokenSpec{SecretSha256: hex.EncodeToString(sum[:])}}}}})
	n := 0
	for pi, sp := range s.pools {
		nm := &roostv1.CreateMachines{}
		for j := 0; j < cfg.perPool; j++ {
			n++
			id := fmt.Sprintf("00000000-0000-4000-9000-%012d", n)
			s.must(&roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{TokenName: "simtok", SecretSha256: hex.EncodeToString(sum[:]),
				Uid: fmt.Sprintf("00000000-0000-4000-a000-%012d", n), Identity: &roostv1.ServerIdentity{SystemUuid: id, PermanentMacs: []string{fmt.Sprintf("52:54:%02x:00:%02x:%02x", pi, j/256, j%256)}},
				Inventory: &roostv1.Inventory{Cpu: &roostv1.CPUInfo{Cores: 8, Threads: 16}, MemoryBytes: 64 << 30, Arch: "amd64", Firmware: "UEFI"}}}})
			s.must(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{Name: id, Connected: true}}})
			srv := &simServer{name: id, machine: fmt.Sprintf("%s-%03d", sp.name, j), pool: sp.name}
			sp.servers = append(sp.servers, srv)
			s.byMachine[srv.machine] = srv
			nm.Machines = append(nm.Machines, &roostv1.NewMachine{Name: srv.machine, Uid: fmt.Sprintf("00000000-0000-4000-b000-%012d", n), Server: id, Pool: sp.name})
		}
		s.must(&roostv1.Command{Command: &roostv1.Command_CreateMachines{CreateMachines: nm}})
		for _, srv := range sp.servers {
			s.putRevision(srv, 1, "2027.02.0")
			s.report(srv, 1, "True", nil)
		}
		if sp.failing {
			sp.servers[s.rng.Intn(len(sp.servers))].fail = true
		}
	}
	// Servers that go down on their own for 3 hours, in pools that allow
	// more than one down.
	for k := 0; k < cfg.outages; k++ {
		sp := s.pools[s.rng.Intn(len(s.pools))]
		if o, _ := s.f.Get("Pool", sp.name); MaxUnavailable(o.GetPool()) < 2 {
			continue
		}
		srv := sp.servers[s.rng.Intn(len(sp.servers))]
		srv.outageStart = cfg.start.Add(time.Duration(s.rng.Intn(cfg.days*24)) * time.Hour)
		srv.outageEnd = srv.outageStart.Add(3 * time.Hour)
	}
	// The new release reaches the channel: every Machine gets Revision 2.
	s.must(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{
		Objects: []*roostv1.Object{release("2027.03.0")}, Uids: []string{"00000000-0000-4000-8000-200000000000"}}}})
	for _, sp := range s.pools {
		for _, srv := range sp.servers {
			s.putRevision(srv, 2, "2027.03.0")
		}
	}
	return s
}

func release(version string) *roostv1.Object {
	return resource.Wrap(&roostv1.ImageRelease{Metadata: &roostv1.ObjectMeta{Name: "v" + strings.ReplaceAll(version, ".", "-")},
		Spec: &roostv1.ImageReleaseSpec{Version: version, Channels: []string{"stable"}}})
}

func (s *sim) putRevision(srv *simServer, n int64, version string) {
	s.must(&roostv1.Command{Command: &roostv1.Command_PutRevision{PutRevision: &roostv1.PutRevision{
		Revision: &roostv1.Revision{Spec: &roostv1.RevisionSpec{Server: srv.name, Machine: srv.machine, Number: n, ImageVersion: version,
			Ignition: []byte(`{"ignition":{"version":"3.3.0"}}`)}},
		Uid: fmt.Sprintf("00000000-0000-4000-c%03d-%s", n, srv.name[len(srv.name)-12:])}}})
}

// report is the agent's status: booted n (0: unchanged), Healthy, failed.
func (s *sim) report(srv *simServer, n int64, healthy string, failed []*roostv1.FailedRevision) {
	u := &roostv1.UpdateServerStatus{Name: srv.name, HasConditions: true,
		Conditions: []*roostv1.Condition{{Type: state.AgentHealthy, Status: healthy, Reason: "Sim"}}}
	if n > 0 {
		u.HasBootedRevision, u.BootedRevision = true, n
	}
	if failed != nil {
		u.HasFailedRevisions, u.FailedRevisions = true, failed
	}
	s.must(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: u}})
}

func (s *sim) anyOpen() bool {
	for _, sp := range s.pools {
		if sp.windows.OpenAt(s.now) {
			return true
		}
	}
	return false
}

// nextEvent is the earliest instant after now at which something the
// rollout depends on changes: a window opens or closes, a reboot ends, an
// outage starts or ends, a pool's settle delay ends. Between events the
// state and every admission answer stay the same, so the simulation jumps
// from one to the next (agents polling more often would be refused
// identically).
func (s *sim) nextEvent() time.Time {
	next := s.now.Add(24 * time.Hour)
	consider := func(t time.Time) {
		if t.After(s.now) && t.Before(next) {
			next = t
		}
	}
	r := s.f.Reader()
	for _, sp := range s.pools {
		if t, ok := sp.windows.NextStart(s.now); ok {
			consider(t)
		}
		for _, w := range sp.windows {
			if o, ok := w.OpenAt(s.now); ok {
				consider(o.End)
			}
		}
		if st := r.Get("Pool", sp.name).GetPool().GetStatus().GetRollout().GetSettleUntil(); st != nil {
			consider(st.AsTime())
		}
		for _, srv := range sp.servers {
			if srv.rebooting {
				consider(srv.rebootEnd)
			}
			consider(srv.outageStart)
			consider(srv.outageEnd)
		}
	}
	return next
}

func (s *sim) run() {
	ctx := context.Background()
	end := s.cfg.start.Add(time.Duration(s.cfg.days) * 24 * time.Hour)
	for s.now.Before(end) {
		s.step(ctx)
		if s.allDone() {
			return
		}
		s.steps++
		s.now = s.nextEvent()
	}
}

func (s *sim) step(ctx context.Context) {
	// Agents report what happened since the last minute.
	for _, sp := range s.pools {
		for _, srv := range sp.servers {
			switch {
			case srv.rebooting && !s.now.Before(srv.rebootEnd):
				srv.rebooting = false
				healthy := "True"
				if srv.inOutage { // came back, but still broken
					healthy = "False"
				}
				if srv.fail {
					s.report(srv, 1, healthy, []*roostv1.FailedRevision{{Number: 2, Reason: "boot entry roost-rev-2 ran out of tries (3 failed boots); booted revision 1"}})
				} else {
					s.report(srv, 2, healthy, nil)
				}
			case !srv.inOutage && !srv.outageStart.IsZero() && !s.now.Before(srv.outageStart) && s.now.Before(srv.outageEnd):
				srv.inOutage = true
				s.report(srv, 0, "False", nil)
			case srv.inOutage && !s.now.Before(srv.outageEnd):
				srv.inOutage = false
				if !srv.rebooting {
					s.report(srv, 0, "True", nil)
				}
			}
		}
	}
	if err := s.ctrl.Step(ctx); err != nil {
		s.t.Fatalf("controller step: %v", err)
	}
	if s.ctrl.Recorder != nil {
		s.ctrl.Recorder.FlushNow(ctx)
	}
	// Agents with a pending Revision ask for a Lease, in random order,
	// until the pool refuses one (the others would be refused too).
	for _, sp := range s.pools {
		order := s.rng.Perm(len(sp.servers))
		for _, i := range order {
			srv := sp.servers[i]
			m := s.machine(srv.machine)
			if srv.rebooting || m.GetStatus().GetRevision() == m.GetStatus().GetBootedRevision() || m.GetStatus().GetFailedRevision() == m.GetStatus().GetRevision() {
				continue
			}
			ok, _ := s.ctrl.Admit(ctx, m)
			if !ok {
				break
			}
			o, _ := s.f.Get("Pool", sp.name)
			// A reboot may start only while fewer than maxUnavailable other
			// Machines are down, for any reason.
			var others []string
			for _, x := range sp.servers {
				if x != srv && (x.rebooting || x.inOutage) {
					others = append(others, x.machine)
				}
			}
			if int32(len(others)) >= MaxUnavailable(o.GetPool()) {
				s.violate("pool %s: %s admitted while %d were down (%s), maxUnavailable %d", sp.name, srv.machine, len(others), strings.Join(others, ","), MaxUnavailable(o.GetPool()))
			}
			res := s.apply(&roostv1.Command{Command: &roostv1.Command_GrantLease{GrantLease: &roostv1.GrantLease{Server: srv.name, Revision: m.GetStatus().GetRevision(),
				ExpiresAt: timestamppb.New(s.now.Add(30 * time.Minute)), MaxUnavailable: MaxUnavailable(o.GetPool()), Uid: fmt.Sprintf("lease-%d", s.idx)}}})
			if res.Err != nil {
				break
			}
			s.grants++
			// The reboot starts now: it must be inside a window, and the
			// pool must stay within maxUnavailable.
			if !sp.windows.OpenAt(s.now) {
				s.violate("pool %s: reboot of %s started outside its windows", sp.name, srv.machine)
			}
			for _, w := range sp.windows {
				if op, ok := w.OpenAt(s.now); ok {
					sp.openings[op.Start] = true
				}
			}
			srv.rebooting, srv.rebootEnd = true, s.now.Add(time.Duration(5+s.rng.Intn(11))*time.Minute)
			if srv.hang {
				srv.rebootEnd = s.now.Add(100 * 24 * time.Hour)
			}
			s.starts++
			s.report(srv, 0, "False", nil)
		}
		s.checkCapacity(sp)
	}
}

// machine reads Machine name (shared with the store: read only).
func (s *sim) machine(name string) *roostv1.Machine {
	o := s.f.Reader().Get("Machine", name)
	if o == nil {
		s.t.Fatalf("Machine %s is gone", name)
	}
	return o.GetMachine()
}

// checkCapacity: never more reboots in flight in a pool than
// maxUnavailable. (Servers down on their own may add to them: the
// rollout cannot stop an outage, it only counts it before a reboot.)
func (s *sim) checkCapacity(sp *simPool) {
	o, _ := s.f.Get("Pool", sp.name)
	maxU := MaxUnavailable(o.GetPool())
	var names []string
	for _, srv := range sp.servers {
		if srv.rebooting {
			names = append(names, srv.machine)
		}
	}
	if int32(len(names)) > maxU {
		s.violate("pool %s: %d rebooting (%s), maxUnavailable %d", sp.name, len(names), strings.Join(names, ","), maxU)
	}
}

func (s *sim) allDone() bool {
	for _, sp := range s.pools {
		o, _ := s.f.Get("Pool", sp.name)
		ph := o.GetPool().GetStatus().GetRollout().GetPhase()
		if ph != state.RolloutIdle && ph != state.RolloutHalted {
			return false
		}
		if ph == state.RolloutIdle && sp.doneAt.IsZero() {
			sp.doneAt = s.now
		}
	}
	return true
}

// verify checks the end state: failing pools halted with their failed
// Machine named, every other pool finished (all Machines on the new
// release) within the expected number of window openings.
func (s *sim) verify() {
	for _, sp := range s.pools {
		o, _ := s.f.Get("Pool", sp.name)
		ro := o.GetPool().GetStatus().GetRollout()
		if sp.failing {
			if ro.GetPhase() != state.RolloutHalted || len(ro.GetFailedMachines()) != 1 {
				s.violate("failing pool %s: phase %s, failed %v", sp.name, ro.GetPhase(), ro.GetFailedMachines())
			}
			continue
		}
		if ro.GetPhase() != state.RolloutIdle || ro.GetUpdated() != int32(len(sp.servers)) {
			s.violate("pool %s did not finish: phase %s (%s), updated %d/%d", sp.name, ro.GetPhase(), ro.GetReason(), ro.GetUpdated(), len(sp.servers))
			continue
		}
		// Each opening of at least 2h fits at least one reboot lane of
		// 2h / (15 min reboot + settle + 2 min of polling).
		perOpening := int(math.Floor((2 * time.Hour).Minutes() / (15 + sp.settle.Minutes() + 2)))
		want := int(math.Ceil(float64(len(sp.servers))/float64(perOpening))) + 1
		if len(sp.openings) > want {
			s.violate("pool %s used %d window openings, expected at most %d", sp.name, len(sp.openings), want)
		}
	}
}

func TestRolloutSimulation(t *testing.T) {
	cfg := simConfig{pools: 40, perPool: 50, failingPools: 3, outages: 10, start: time.Date(2027, 3, 24, 0, 0, 0, 0, time.UTC), days: 21}
	seeds := 20
	if testing.Short() {
		cfg.pools, cfg.perPool, seeds = 9, 10, 2
	}
	if v := os.Getenv("ROOST_SIM_SCALE"); v != "" {
		fmt.Sscanf(v, "%dx%d", &cfg.pools, &cfg.perPool)
	}
	if v := os.Getenv("ROOST_SIM_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("ROOST_SIM_SEEDS=%q: want a count ≥ 1", v)
		}
		seeds = n
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			t.Parallel()
			begin := time.Now()
			s := newSim(t, seed, cfg)
			s.run()
			s.verify()
			var openings []int
			for _, sp := range s.pools {
				openings = append(openings, len(sp.openings))
			}
			sort.Ints(openings)
			t.Logf("seed %d: %d servers, %d pools, %d reboots, %d steps; finished %s; openings per pool %d..%d; %v wall",
				seed, cfg.pools*cfg.perPool, cfg.pools, s.starts, s.steps, s.now.Sub(cfg.start).Round(time.Minute), openings[0], openings[len(openings)-1], time.Since(begin).Round(time.Millisecond))
			for _, e := range s.errs {
				t.Error(e)
			}
		})
	}
}

// BenchmarkPlan10000Servers200Pools measures one planning pass of the
// rollout controller over 10,000 servers in 200 pools (every Machine has
// a new Revision pending): reading the state and planning every pool.
func BenchmarkPlan10000Servers200Pools(b *testing.B) {
	cfg := simConfig{pools: 200, perPool: 50, start: time.Date(2027, 3, 24, 2, 0, 0, 0, time.UTC), days: 1}
	s := newSim(b, 1, cfg)
	now := cfg.start.Add(45 * time.Minute)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		views, err := s.ctrl.Views("")
		if err != nil {
			b.Fatal(err)
		}
		for _, v := range views {
			Plan(v, now)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/10000, "µs/server")
}
