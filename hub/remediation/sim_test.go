package remediation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
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

	"github.com/roostfleet/roost/hub/rollout"
	"github.com/roostfleet/roost/hub/scheduler"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// The remediation simulation runs the real FSM with the real pool
// (hub/scheduler), remediation, safety and rollout controllers against
// simulated agents, a simulated Revision renderer and a fake clock that
// moves one step (a minute) at a time. A fleet of ≥ 2,000 servers: Pool
// "web" of 20 replicas under test, filler Pools of 50 replicas, and a few
// spare Servers. Each scenario starts from a fresh fleet.

const (
	simStep    = time.Minute
	simInstall = 5 * time.Minute // a first install, from Revision to booted
	simReboot  = 5 * time.Minute
	webPool    = "web"
	webSize    = 20
)

type remSim struct {
	t    testing.TB
	rng  *rand.Rand
	f    *state.FSM
	idx  uint64
	now  time.Time
	ctx  context.Context
	pool *scheduler.Controller
	rem  *Controller
	saf  *SafetyController
	ro   *rollout.Controller

	// Simulated agents, by Server name.
	dead      map[string]bool      // unreachable (reported by liveness)
	bootAt    map[string]time.Time // an install or reboot ends then
	bootRev   map[string]int64     // … into this Revision
	failRev   map[string]int64     // booting this Revision fails (falls back)
	leases    map[string]int       // Leases granted per Server
	version   string               // the image version rendered
	initial   map[string]bool      // Machines of the initial fleet
	names     int
	errs      []string
	maxIn     int // the pool's maxInFlight
	open      []string
	opened    map[string]bool // Machines seen Remediating
	resolved  map[string]bool // replacement Machines seen Ready
	prevState map[string]string
	created   map[string]time.Time // replacement Machines: when claimed
}

func (s *remSim) apply(cmd *roostv1.Command) *state.ApplyResult {
	s.idx++
	cmd.Time = timestamppb.New(s.now)
	cmd.RulesVersion = state.RulesVersion
	data, err := proto.Marshal(cmd)
	if err != nil {
		s.t.Fatal(err)
	}
	return s.f.Apply(&raft.Log{Index: s.idx, Type: raft.LogCommand, Data: data}).(*state.ApplyResult)
}

func (s *remSim) must(cmd *roostv1.Command) {
	s.t.Helper()
	if res := s.apply(cmd); res.Err != nil {
		s.t.Fatalf("%T: %v", cmd.GetCommand(), res.Err)
	}
}

func (s *remSim) violate(format string, a ...any) {
	if len(s.errs) < 20 {
		s.errs = append(s.errs, s.now.UTC().Format(time.RFC3339)+": "+fmt.Sprintf(format, a...))
	}
}

// newRemSim builds the fleet: servers in all, Pools of 50 for all but
// webSize and a few spares, every Machine booted healthy on Revision 1.
func newRemSim(t testing.TB, seed int64, servers int, rem *roostv1.RemediationPolicy, ro *roostv1.RolloutPolicy) *remSim {
	s := &remSim{t: t, rng: rand.New(rand.NewSource(seed)), f: state.New(state.Options{WatchRing: -1}), ctx: context.Background(),
		now: time.Date(2027, 5, 3, 9, 0, 0, 0, time.UTC), dead: map[string]bool{}, bootAt: map[string]time.Time{}, bootRev: map[string]int64{},
		failRev: map[string]int64{}, leases: map[string]int{}, version: "2027.04.0", initial: map[string]bool{}, opened: map[string]bool{},
		resolved: map[string]bool{}, prevState: map[string]string{}, created: map[string]time.Time{}}
	clock := func() time.Time { return s.now }
	propose := func(_ context.Context, c *roostv1.Command) error { return s.apply(c).Err }
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	leader := func() bool { return true }
	s.pool = &scheduler.Controller{IsLeader: leader, FSM: s.f, Propose: propose, Log: discard,
		NewName: func(p string) string { s.names++; return fmt.Sprintf("%s-n%04d", p, s.names) },
		NewUID:  func() string { s.names++; return fmt.Sprintf("00000000-0000-4000-d000-%012d", s.names) }}
	s.rem = &Controller{IsLeader: leader, FSM: s.f, Propose: propose, Now: clock, Log: discard}
	s.saf = &SafetyController{IsLeader: leader, FSM: s.f, Propose: propose, Now: clock, Log: discard}
	s.ro = &rollout.Controller{IsLeader: leader, FSM: s.f, Propose: propose, Now: clock, Log: discard}
	s.maxIn = PolicyOf(&roostv1.Pool{Spec: &roostv1.PoolSpec{Remediation: rem, Rollout: ro}}).MaxInFlight

	one := int32(webSize)
	objs := []*roostv1.Object{
		resource.Wrap(&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "std"}, Spec: &roostv1.MachineClassSpec{}}),
		resource.Wrap(&roostv1.ImageRelease{Metadata: &roostv1.ObjectMeta{Name: "v2027-04-0"}, Spec: &roostv1.ImageReleaseSpec{Version: "2027.04.0", Channels: []string{"stable"}}}),
		resource.Wrap(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: webPool}, Spec: &roostv1.PoolSpec{MachineClass: "std", ImageChannel: "stable",
			Replicas: &one, Remediation: rem, Rollout: ro}}),
	}
	fill := (servers - webSize - 10) / 50
	for i := range fill {
		n := int32(50)
		objs = append(objs, resource.Wrap(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: fmt.Sprintf("fill-%02d", i)},
			Spec: &roostv1.PoolSpec{MachineClass: "std", ImageChannel: "stable", Replicas: &n}}))
	}
	uids := make([]string, len(objs))
	for i := range uids {
		uids[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
	}
	s.must(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{Objects: objs, Uids: uids}}})
	const secret = "simtok.0123456789abcdef"
	sum := sha256.Sum256([]byte(secret))
	s.must(&roostv1.Command{Command: &roostv1.Command_PutEnrollmentToken{PutEnrollmentToken: &roostv1.PutEnrollmentToken{Uid: "00000000-0000-4000-8000-100000000000",
		Token: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: "simtok"}, Spec: &roostv1.EnrollmentTokenSpec{SecretSha256: hex.EncodeToString(sum[:])}}}}})
	for n := 1; n <= servers; n++ {
		id := fmt.Sprintf("00000000-0000-4000-9000-%012d", n)
		s.must(&roostv1.Command{Command: &roostv1.Command_EnrollServer{EnrollServer: &roostv1.EnrollServer{TokenName: "simtok", SecretSha256: hex.EncodeToString(sum[:]),
			Uid: fmt.Sprintf("00000000-0000-4000-a000-%012d", n), Identity: &roostv1.ServerIdentity{SystemUuid: id, PermanentMacs: []string{fmt.Sprintf("52:54:00:%02x:%02x:%02x", n>>16, (n>>8)&0xff, n&0xff)}},
			Inventory: &roostv1.Inventory{Cpu: &roostv1.CPUInfo{Cores: 8, Threads: 16}, MemoryBytes: 64 << 30, Arch: "amd64", Firmware: "UEFI"}}}})
		s.must(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: &roostv1.UpdateServerStatus{Name: id, Connected: true}}})
	}
	// The pool controller claims every Pool's replicas; the fleet
	// installs and comes up Ready.
	if err := s.poolStep(s.ctx); err != nil {
		t.Fatal(err)
	}
	s.render()
	s.now = s.now.Add(simInstall)
	s.agents()
	for _, o := range s.f.Reader().List("Machine") {
		m := o.GetMachine()
		s.initial[m.GetMetadata().GetName()] = true
		if m.GetStatus().GetPhase() != state.PhaseReady {
			t.Fatalf("initial fleet: Machine %s is %s", m.GetMetadata().GetName(), m.GetStatus().GetPhase())
		}
	}
	if got, want := len(s.initial), webSize+50*fill; got != want {
		t.Fatalf("initial fleet: %d Machines, want %d", got, want)
	}
	s.snapshotStates()
	return s
}

// render is the Revision renderer: every Machine without a Revision gets
// the Server's next one on the current version.
func (s *remSim) render() {
	r := s.f.Reader()
	for _, o := range r.List("Machine") {
		m := o.GetMachine()
		if m.GetStatus().GetRevision() != 0 || m.GetSpec().GetServer() == "" {
			continue
		}
		s.putRevision(m, s.version)
	}
}

func (s *remSim) putRevision(m *roostv1.Machine, version string) int64 {
	srv := m.GetSpec().GetServer()
	n := s.f.Reader().LatestRevision(srv).GetSpec().GetNumber() + 1
	s.must(&roostv1.Command{Command: &roostv1.Command_PutRevision{PutRevision: &roostv1.PutRevision{
		Revision: &roostv1.Revision{Spec: &roostv1.RevisionSpec{Server: srv, Machine: m.GetMetadata().GetName(), Number: n, ImageVersion: version,
			Ignition: []byte(`{"ignition":{"version":"3.3.0"}}`)}},
		Uid: fmt.Sprintf("00000000-0000-4000-c%03d-%s", n, srv[len(srv)-12:])}}})
	if m.GetStatus().GetBootedRevision() == 0 { // a first install starts at once
		s.bootAt[srv], s.bootRev[srv] = s.now.Add(simInstall), n
	}
	return n
}

// agents: installs and reboots that end report their boot.
func (s *remSim) agents() {
	var done []string
	for srv, at := range s.bootAt {
		if !s.now.Before(at) && !s.dead[srv] {
			done = append(done, srv)
		}
	}
	sort.Strings(done)
	for _, srv := range done {
		n := s.bootRev[srv]
		delete(s.bootAt, srv)
		delete(s.bootRev, srv)
		u := &roostv1.UpdateServerStatus{Name: srv, HasConditions: true, HasBootedRevision: true, BootedRevision: n,
			Conditions: []*roostv1.Condition{{Type: state.AgentHealthy, Status: "True", Reason: "Sim"}}}
		if s.failRev[srv] == n {
			u.BootedRevision = n - 1
			u.HasFailedRevisions, u.FailedRevisions = true, []*roostv1.FailedRevision{{Number: n, Reason: "boot entry ran out of tries (3 failed boots)"}}
		}
		s.must(&roostv1.Command{Command: &roostv1.Command_UpdateServerStatus{UpdateServerStatus: u}})
	}
}

// kill and revive change a Server's reachability, as the liveness
// controller records it.
func (s *remSim) setReachable(srv string, ok bool) {
	s.dead[srv] = !ok
	s.must(&roostv1.Command{Command: &roostv1.Command_SetServerReachability{SetServerReachability: &roostv1.SetServerReachability{
		Changes: []*roostv1.ReachabilityChange{{Name: srv, Reachable: ok}}}}})
}

// leasesRequested: Machines with a pending Revision ask for a Lease (the
// rollout controller's Admit, then GrantLease), and reboot.
func (s *remSim) leasesRequested() {
	r := s.f.Reader()
	for _, m := range r.MachinesOfPool(webPool) {
		st, srv := m.GetStatus(), m.GetSpec().GetServer()
		if s.dead[srv] || !s.bootAt[srv].IsZero() || st.GetBootedRevision() == 0 || st.GetRevision() == st.GetBootedRevision() || st.GetFailedRevision() == st.GetRevision() {
			continue
		}
		if ok, _ := s.ro.Admit(s.ctx, m); !ok {
			continue
		}
		o, _ := s.f.Get("Pool", webPool)
		res := s.apply(&roostv1.Command{Command: &roostv1.Command_GrantLease{GrantLease: &roostv1.GrantLease{Server: srv, Revision: st.GetRevision(),
			ExpiresAt: timestamppb.New(s.now.Add(30 * time.Minute)), MaxUnavailable: rollout.MaxUnavailable(o.GetPool()), Uid: fmt.Sprintf("lease-%d", s.idx)}}})
		if res.Err != nil {
			continue
		}
		s.leases[srv]++
		s.bootAt[srv], s.bootRev[srv] = s.now.Add(simReboot), st.GetRevision()
	}
}

// step moves the clock one step: agents report, every controller runs
// once (safety first), Revisions are rendered, Leases asked for; then the
// invariants are checked.
func (s *remSim) step() {
	s.now = s.now.Add(simStep)
	s.agents()
	for _, c := range []func(context.Context) error{s.saf.Step, s.rem.Step, s.poolStep, s.ro.Step} {
		if err := c(s.ctx); err != nil {
			s.t.Fatalf("controller step: %v", err)
		}
	}
	s.render()
	s.leasesRequested()
	s.check()
}

// poolStep reconciles every Pool once with the pool controller, each from
// a fresh read (its Step plans every Pool from one read, so two Pools
// would race for the same Servers and one would retry on the next tick).
func (s *remSim) poolStep(ctx context.Context) error {
	for _, o := range s.f.Reader().List("Pool") {
		if _, err := s.pool.Reconcile(ctx, resource.NameOf(o)); err != nil {
			return err
		}
	}
	return nil
}

// snapshotStates records each Server's state, for the next step's check.
func (s *remSim) snapshotStates() {
	for _, o := range s.f.Reader().List("Server") {
		s.prevState[resource.NameOf(o)] = o.GetServer().GetStatus().GetState()
	}
}

// check verifies, after every step: never two Machines on one Server; a
// Machine claimed this step was on a Server that was neither Cleaning nor
// CleaningFailed; no Server Available while Cleaning or CleaningFailed
// (one state at a time, and Available only with no Machine); never more
// replacements of web in flight than maxInFlight, counted from the
// outside: a Machine seen Remediating opens a replacement, a new Machine
// of web seen Ready closes one.
func (s *remSim) check() {
	r := s.f.Reader()
	onServer := map[string]string{}
	for _, o := range r.List("Machine") {
		m := o.GetMachine()
		name, srv := m.GetMetadata().GetName(), m.GetSpec().GetServer()
		if srv == "" || m.GetStatus().GetPhase() == state.PhaseDestroyed {
			continue
		}
		if other, ok := onServer[srv]; ok {
			s.violate("Server %s holds two Machines: %s and %s", srv, other, name)
		}
		onServer[srv] = name
		if !s.initial[name] {
			if _, seen := s.created[name]; !seen {
				s.created[name] = s.now
				if st := s.prevState[srv]; st == state.ServerCleaning || st == "CleaningFailed" {
					s.violate("Machine %s claimed Server %s while it was %s", name, srv, st)
				}
			}
		}
		if m.GetSpec().GetPool() == webPool {
			if state.Remediating(m) && !s.opened[name] {
				s.opened[name] = true
				s.open = append(s.open, name)
			}
			if !s.initial[name] && m.GetStatus().GetPhase() == state.PhaseReady && !s.resolved[name] {
				s.resolved[name] = true
				if len(s.open) > 0 {
					s.open = s.open[1:]
				}
			}
		}
	}
	if len(s.open) > s.maxIn {
		s.violate("%d replacements of %s in flight (%v), maxInFlight %d", len(s.open), webPool, s.open, s.maxIn)
	}
	for _, o := range r.List("Server") {
		srv := o.GetServer()
		name, st := resource.NameOf(o), srv.GetStatus().GetState()
		if st == state.ServerAvailable {
			if m, ok := onServer[name]; ok {
				s.violate("Server %s is Available while Machine %s holds it", name, m)
			}
			if prev := s.prevState[name]; prev == "CleaningFailed" {
				s.violate("Server %s went from CleaningFailed to Available", name)
			}
		}
	}
	s.snapshotStates()
}

// web returns the web Pool and its Machines not Destroyed.
func (s *remSim) web() (*roostv1.Pool, []*roostv1.Machine) {
	r := s.f.Reader()
	var ms []*roostv1.Machine
	for _, m := range r.MachinesOfPool(webPool) {
		if m.GetStatus().GetPhase() != state.PhaseDestroyed {
			ms = append(ms, m)
		}
	}
	return r.Get("Pool", webPool).GetPool(), ms
}

// initialWeb returns the initial Machines of web, by name.
func (s *remSim) initialWeb() []*roostv1.Machine {
	_, ms := s.web()
	var out []*roostv1.Machine
	for _, m := range ms {
		if s.initial[m.GetMetadata().GetName()] {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetMetadata().GetName() < out[j].GetMetadata().GetName() })
	return out
}

func (s *remSim) replacements() []string {
	var out []string
	for n := range s.created {
		if strings.HasPrefix(n, webPool+"-") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func frozenReason(p *roostv1.Pool) string {
	if c := state.FindCondition(p.GetStatus().GetConditions(), state.PoolFrozen); c.GetStatus() == "True" {
		return c.GetReason()
	}
	return ""
}

// scenarioOneDies: one Machine of web dies; it is replaced within
// unhealthyTimeout plus one step; it comes back and is released.
func scenarioOneDies(t *testing.T, s *remSim) {
	victim := s.initialWeb()[s.rng.Intn(webSize)]
	vname, vsrv := victim.GetMetadata().GetName(), victim.GetSpec().GetServer()
	died := s.now
	s.setReachable(vsrv, false)
	var claimedAt time.Time
	for i := 0; i < 40 && claimedAt.IsZero(); i++ {
		s.step()
		if len(s.replacements()) > 0 {
			claimedAt = s.now
		}
	}
	if claimedAt.IsZero() || claimedAt.Sub(died) > DefaultUnhealthyTimeout+simStep {
		t.Fatalf("replacement of %s claimed at %v after its death, want within %v", vname, claimedAt.Sub(died), DefaultUnhealthyTimeout+simStep)
	}
	if claimedAt.Sub(died) < DefaultUnhealthyTimeout {
		t.Errorf("replaced after %v, before unhealthyTimeout", claimedAt.Sub(died))
	}
	p, _ := s.web()
	if c := state.FindCondition(p.GetStatus().GetConditions(), state.PoolRemediating); c.GetStatus() != "True" || !strings.Contains(c.GetMessage(), vname) {
		t.Errorf("Pool Remediating = %v", c)
	}
	for range int(simInstall/simStep) + 2 {
		s.step()
	}
	repl := s.replacements()
	if len(repl) != 1 {
		t.Fatalf("replacements %v, want 1", repl)
	}
	if m := s.f.Reader().Get("Machine", repl[0]).GetMachine(); m.GetStatus().GetPhase() != state.PhaseReady {
		t.Errorf("replacement %s is %s", repl[0], m.GetStatus().GetPhase())
	}
	// The dead Server comes back: the replaced Machine is released.
	s.setReachable(vsrv, true)
	for range 3 {
		s.step()
	}
	if s.f.Reader().Get("Machine", vname) != nil {
		t.Errorf("replaced Machine %s not released after its Server came back", vname)
	}
	p, ms := s.web()
	if len(ms) != webSize || state.FindCondition(p.GetStatus().GetConditions(), state.PoolRemediating) != nil || frozenReason(p) != "" {
		t.Errorf("after the release: %d Machines, conditions %v", len(ms), p.GetStatus().GetConditions())
	}
	t.Logf("%s died at +0, replacement %s claimed at +%v", vname, repl[0], claimedAt.Sub(died))
}

// scenarioTwoDie: two Machines of web die at once (10%: not frozen); with
// maxInFlight 1 the second is replaced only after the first replacement
// is Ready.
func scenarioTwoDie(t *testing.T, s *remSim) {
	ms := s.initialWeb()
	for _, i := range s.rng.Perm(webSize)[:2] {
		s.setReachable(ms[i].GetSpec().GetServer(), false)
	}
	died := s.now
	for range int(DefaultUnhealthyTimeout/simStep) + 1 {
		s.step()
	}
	if r := s.replacements(); len(r) != 1 {
		t.Fatalf("after unhealthyTimeout: replacements %v, want exactly 1 (maxInFlight 1)", r)
	}
	for i := 0; i < 30 && len(s.replacements()) < 2; i++ {
		s.step()
	}
	r := s.replacements()
	if len(r) != 2 {
		t.Fatalf("replacements %v, want 2", r)
	}
	first, second := s.created[r[0]], s.created[r[1]]
	if second.Sub(first) < simInstall {
		t.Errorf("second replacement claimed %v after the first, before it could be Ready", second.Sub(first))
	}
	for range int(simInstall/simStep) + 2 {
		s.step()
	}
	p, _ := s.web()
	if frozenReason(p) != "" {
		t.Errorf("Frozen with 2 of 20 down: %v", p.GetStatus().GetConditions())
	}
	t.Logf("died at +0; replacements claimed at +%v and +%v", first.Sub(died), second.Sub(died))
}

// scenarioHalfDies: half of web dies at once: Frozen, nothing replaced;
// they return: unfrozen, still nothing replaced.
func scenarioHalfDies(t *testing.T, s *remSim) {
	ms := s.initialWeb()
	var victims []string
	for _, i := range s.rng.Perm(webSize)[:webSize/2] {
		victims = append(victims, ms[i].GetSpec().GetServer())
	}
	for _, v := range victims {
		s.setReachable(v, false)
	}
	s.step()
	p, _ := s.web()
	if frozenReason(p) != state.ReasonTooManyUnhealthy {
		t.Fatalf("half the pool down: Frozen %v", p.GetStatus().GetConditions())
	}
	for range 3 * int(DefaultUnhealthyTimeout/simStep) {
		s.step()
		p, ms := s.web()
		if frozenReason(p) == "" {
			t.Fatalf("unfrozen at %v while half the pool is down", s.now)
		}
		for _, m := range ms {
			if state.Remediating(m) {
				t.Fatalf("Machine %s marked Remediating while the pool is Frozen", m.GetMetadata().GetName())
			}
		}
	}
	// A reboot is refused while Frozen.
	if ok, why := s.ro.Admit(s.ctx, s.initialWeb()[0]); ok || !strings.Contains(why, "Frozen") {
		t.Errorf("Admit while Frozen = %v, %q", ok, why)
	}
	for _, v := range victims {
		s.setReachable(v, true)
	}
	s.step()
	p, _ = s.web()
	if frozenReason(p) != "" {
		t.Errorf("still Frozen after the Machines returned: %v", p.GetStatus().GetConditions())
	}
	for range 5 {
		s.step()
	}
	if r := s.replacements(); len(r) != 0 {
		t.Errorf("Machines replaced: %v", r)
	}
}

// scenarioFailedRevision: a new release; one Machine's Revision fails
// with onFailedRevision replace: it is replaced, gets no Lease again, and
// is released once its replacement is Ready.
func scenarioFailedRevision(t *testing.T, s *remSim) {
	ms := s.initialWeb()
	victim := ms[s.rng.Intn(webSize)]
	vname, vsrv := victim.GetMetadata().GetName(), victim.GetSpec().GetServer()
	s.version = "2027.05.0"
	s.must(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{Objects: []*roostv1.Object{
		resource.Wrap(&roostv1.ImageRelease{Metadata: &roostv1.ObjectMeta{Name: "v2027-05-0"}, Spec: &roostv1.ImageReleaseSpec{Version: "2027.05.0", Channels: []string{"stable"}}})},
		Uids: []string{"00000000-0000-4000-8000-200000000000"}}}})
	for _, m := range ms {
		n := s.putRevision(m, s.version)
		if m == victim {
			s.failRev[vsrv] = n
		}
	}
	var failedAt, markedAt time.Time
	for i := 0; i < 240; i++ {
		s.step()
		m := s.f.Reader().Get("Machine", vname).GetMachine()
		if m == nil {
			break
		}
		if failedAt.IsZero() && m.GetStatus().GetFailedRevision() != 0 {
			failedAt = s.now
		}
		if markedAt.IsZero() && state.Remediating(m) {
			markedAt = s.now
			if c := state.FindCondition(m.GetStatus().GetConditions(), state.MachineRemediating); c.GetReason() != state.ReasonRevisionFailed {
				t.Errorf("Remediating = %v", c)
			}
		}
	}
	if failedAt.IsZero() || markedAt.IsZero() || markedAt.Sub(failedAt) > simStep {
		t.Fatalf("Revision failed at %v, Machine marked at %v", failedAt, markedAt)
	}
	if s.f.Reader().Get("Machine", vname) != nil {
		t.Errorf("Machine %s with a failed Revision not released", vname)
	}
	// The rest of the rollout goes on (failureBudget 1).
	for i := 0; i < 240; i++ {
		if p, _ := s.web(); p.GetStatus().GetRollout().GetPhase() == state.RolloutIdle {
			break
		}
		s.step()
	}
	if s.leases[vsrv] != 1 {
		t.Errorf("Server %s of the failed Revision got %d Leases, want 1 (not retried)", vsrv, s.leases[vsrv])
	}
	repl := s.replacements()
	if len(repl) != 1 {
		t.Fatalf("replacements %v, want 1", repl)
	}
	p, ms := s.web()
	ready := 0
	for _, m := range ms {
		if m.GetStatus().GetPhase() == state.PhaseReady {
			ready++
		}
	}
	if len(ms) != webSize || ready != webSize || p.GetStatus().GetRollout().GetPhase() != state.RolloutIdle {
		t.Errorf("after the rollout: %d Machines, %d Ready, rollout %s (%s)", len(ms), ready, p.GetStatus().GetRollout().GetPhase(), p.GetStatus().GetRollout().GetReason())
	}
	t.Logf("%s: Revision failed at %v, replaced by %s", vname, failedAt.Format(time.TimeOnly), repl[0])
}

// TestRemediationSimulation runs each scenario on a fresh fleet of 2,000
// servers per seed (ROOST_REM_SIM_SERVERS, ROOST_REM_SIM_SEEDS; -short:
// 200 servers, one seed).
func TestRemediationSimulation(t *testing.T) {
	servers, seeds := 2000, 3
	if testing.Short() {
		servers, seeds = 200, 1
	}
	if v := os.Getenv("ROOST_REM_SIM_SERVERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 {
			t.Fatalf("ROOST_REM_SIM_SERVERS=%q: want a count ≥ 100", v)
		}
		servers = n
	}
	if v := os.Getenv("ROOST_REM_SIM_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("ROOST_REM_SIM_SEEDS=%q: want a count ≥ 1", v)
		}
		seeds = n
	}
	maxU := &roostv1.RolloutPolicy{MaxUnavailable: &roostv1.IntOrString{Value: &roostv1.IntOrString_IntVal{IntVal: 2}}, ReadyTimeout: durationpb.New(30 * time.Minute), FailureBudget: 1}
	scenarios := []struct {
		name string
		rem  *roostv1.RemediationPolicy
		run  func(*testing.T, *remSim)
	}{
		{"one-dies", nil, scenarioOneDies},
		{"two-die", nil, scenarioTwoDie},
		{"half-dies", nil, scenarioHalfDies},
		{"failed-revision-replace", &roostv1.RemediationPolicy{OnFailedRevision: OnFailedRevisionReplace}, scenarioFailedRevision},
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		for _, sc := range scenarios {
			t.Run(fmt.Sprintf("%s/seed-%d", sc.name, seed), func(t *testing.T) {
				begin := time.Now()
				s := newRemSim(t, seed, servers, sc.rem, maxU)
				defer func() { // also after a Fatal of the scenario
					for _, e := range s.errs {
						t.Error(e)
					}
				}()
				sc.run(t, s)
				t.Logf("%d servers; %v wall", servers, time.Since(begin).Round(time.Millisecond))
			})
		}
	}
}
