package feeds

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/state"
	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

var t0 = time.Date(2027, 2, 1, 9, 0, 0, 0, time.UTC)

// promotionFleet: 2027.01.0 on beta and stable, run by the canary Pool's
// three Machines; Channel stable follows beta after a 7-day soak with 2
// Machines Good; 2027.02.0 reaches beta at t0.
func promotionFleet(t *testing.T) (*fleet, *Promoter, []string, []string) {
	fl := newFleet(t, t0.Add(-30*24*time.Hour))
	fl.objects(
		&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "std"}, Spec: &roostv1.MachineClassSpec{}},
		&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "canary"}, Spec: &roostv1.PoolSpec{MachineClass: "std", ImageChannel: "beta"}},
		&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "prod"}, Spec: &roostv1.PoolSpec{MachineClass: "std", ImageChannel: "stable"}},
		imageRelease("2027.01.0", "beta", "stable"),
		&roostv1.Channel{Metadata: &roostv1.ObjectMeta{Name: "stable"}, Spec: &roostv1.ChannelSpec{Follows: "beta",
			Soak: durationpb.New(7 * 24 * time.Hour), MinMachines: proto32(2)}},
	)
	var servers, machines []string
	for i := 1; i <= 3; i++ {
		s, m := fl.server(i, "canary", "2027.01.0")
		servers, machines = append(servers, s), append(machines, m)
	}
	fl.now = t0
	fl.objects(imageRelease("2027.02.0", "beta"))
	p := &Promoter{IsLeader: func() bool { return true }, FSM: fl.f, Propose: fl.propose, Now: func() time.Time { return fl.now },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return fl, p, servers, machines
}

func proto32(n int32) *int32 { return &n }

func channels(fl *fleet, version string) []string {
	o, err := fl.f.Get("ImageRelease", release.Name(version))
	if err != nil {
		return nil
	}
	return o.GetImageRelease().GetSpec().GetChannels()
}

func promoting(t *testing.T, fl *fleet) *roostv1.Condition {
	t.Helper()
	o, err := fl.f.Get("Channel", "stable")
	if err != nil {
		t.Fatal(err)
	}
	return state.FindCondition(o.GetChannel().GetStatus().GetConditions(), state.ChannelPromoting)
}

func events(fl *fleet, reason string) []*roostv1.Event {
	var out []*roostv1.Event
	for _, o := range fl.f.Reader().List("Event") {
		if e := o.GetEvent(); e.GetSpec().GetReason() == reason && e.GetSpec().GetInvolvedObject().GetName() == "stable" {
			out = append(out, e)
		}
	}
	return out
}

// beta → stable: not before the soak, not with too few Machines Good, not
// while a Pool is halted on the release (and the FSM refuses a promotion
// proposed anyway); then promoted with the evidence in an Event.
func TestPromotionAfterSoak(t *testing.T) {
	fl, p, servers, machines := promotionFleet(t)
	ctx := context.Background()
	promote := func() error {
		return fl.propose(ctx, &roostv1.Command{Command: &roostv1.Command_PromoteAfterSoak{PromoteAfterSoak: &roostv1.PromoteAfterSoak{
			Channel: "stable", Version: "2027.02.0"}}})
	}

	// One day in, two Machines Good on it: it soaks.
	for i := range 2 {
		fl.boot(servers[i], machines[i], "2027.02.0")
	}
	fl.now = t0.Add(24 * time.Hour)
	res, err := p.Reconcile(ctx, "stable")
	if err != nil {
		t.Fatal(err)
	}
	if c := promoting(t, fl); c.GetStatus() != "True" || c.GetReason() != state.ReasonSoaking {
		t.Fatalf("Promoting %v, want True/Soaking", c)
	}
	if res.RequeueAfter != 6*24*time.Hour {
		t.Errorf("requeue after %s, want the 6 days of soak left", res.RequeueAfter)
	}
	if err := promote(); apierror.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "soaks on beta until 2027-02-08T09:00:00Z") {
		t.Errorf("a promotion before the soak ended: %v, want FailedPrecondition from the FSM", err)
	}

	// The soak is over, but one of the two Machines fell back: too few.
	fl.now = t0.Add(7*24*time.Hour + time.Minute)
	fl.boot(servers[1], machines[1], "2027.01.0")
	if _, err := p.Reconcile(ctx, "stable"); err != nil {
		t.Fatal(err)
	}
	if c := promoting(t, fl); c.GetReason() != state.ReasonTooFewMachines || !strings.Contains(c.GetMessage(), "runs Good on 1 Machine, 2 wanted") {
		t.Fatalf("Promoting %v, want TooFewMachines", c)
	}
	if got := channels(fl, "2027.02.0"); len(got) != 1 {
		t.Fatalf("promoted with too few Machines: %v", got)
	}

	// Enough Machines, but the canary Pool halted on the release.
	fl.boot(servers[1], machines[1], "2027.02.0")
	fl.apply(&roostv1.Command{Command: &roostv1.Command_UpdatePoolRollout{UpdatePoolRollout: &roostv1.UpdatePoolRollout{Pool: "canary",
		Status: &roostv1.RolloutStatus{Phase: state.RolloutHalted, TargetVersion: "2027.02.0", Reason: "1 Machine(s) failed", FailedMachines: []string{machines[2]}}}}})
	if _, err := p.Reconcile(ctx, "stable"); err != nil {
		t.Fatal(err)
	}
	if c := promoting(t, fl); c.GetReason() != state.ReasonHalted || !strings.Contains(c.GetMessage(), "halted the rollout of 1 Pool (canary)") {
		t.Fatalf("Promoting %v, want Halted", c)
	}
	if got := channels(fl, "2027.02.0"); len(got) != 1 {
		t.Fatalf("promoted while halted: %v", got)
	}
	if len(events(fl, state.EventReasonNotPromoted)) != 1 {
		t.Errorf("no PromotionBlocked Event for the halt")
	}
	if err := promote(); apierror.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "a halt blocks its promotion") {
		t.Errorf("a promotion proposed while halted: %v, want FailedPrecondition from the FSM", err)
	}

	// An operator resumes the Pool: promoted, with the evidence.
	fl.apply(&roostv1.Command{Command: &roostv1.Command_ControlRollout{ControlRollout: &roostv1.ControlRollout{Pool: "canary", Action: roostv1.RolloutAction_ROLLOUT_ACTION_RESUME}}})
	if _, err := p.Reconcile(ctx, "stable"); err != nil {
		t.Fatal(err)
	}
	if got := channels(fl, "2027.02.0"); strings.Join(got, ",") != "beta,stable" {
		t.Fatalf("channels %v after the halt was lifted, want beta,stable", got)
	}
	o, _ := fl.f.Get("ImageRelease", release.Name("2027.02.0"))
	var joined *roostv1.ChannelMembership
	for _, m := range o.GetImageRelease().GetStatus().GetChannels() {
		if m.GetChannel() == "stable" {
			joined = m
		}
	}
	if joined.GetPromotedFrom() != "beta" || !joined.GetSince().AsTime().Equal(fl.now) {
		t.Errorf("stable membership %v, want promoted from beta now", joined)
	}
	ev := events(fl, state.EventReasonPromoted)
	if len(ev) != 1 || !strings.Contains(ev[0].GetSpec().GetMessage(), "2 Machines Good on it (at least 2 wanted), no Pool halted on it") {
		t.Fatalf("Promoted Events %v", ev)
	}
	ch, _ := fl.f.Get("Channel", "stable")
	if st := ch.GetChannel().GetStatus(); st.GetLastPromoted() != "2027.02.0" || st.GetEvidence() != ev[0].GetSpec().GetMessage() {
		t.Errorf("Channel status %v", st)
	}
	// Nothing left to promote: the next reconcile changes nothing but the
	// condition, once.
	if _, err := p.Reconcile(ctx, "stable"); err != nil {
		t.Fatal(err)
	}
	before := fl.idx
	if _, err := p.Reconcile(ctx, "stable"); err != nil || fl.idx != before {
		t.Errorf("an idle reconcile wrote %d commands (%v)", fl.idx-before, err)
	}
	if c := promoting(t, fl); c.GetStatus() != "False" || c.GetReason() != state.ReasonNoCandidate {
		t.Errorf("Promoting %v, want False/NoCandidate", c)
	}
}

// A halt on the release blocks it for every Channel that would take it,
// whatever Pool halted.
func TestHaltBlocksPromotionEverywhere(t *testing.T) {
	fl, p, servers, machines := promotionFleet(t)
	ctx := context.Background()
	fl.objects(&roostv1.Channel{Metadata: &roostv1.ObjectMeta{Name: "lts"}, Spec: &roostv1.ChannelSpec{Follows: "beta", Soak: durationpb.New(time.Hour), MinMachines: proto32(0)}})
	for i := range 3 {
		fl.boot(servers[i], machines[i], "2027.02.0")
	}
	fl.apply(&roostv1.Command{Command: &roostv1.Command_UpdatePoolRollout{UpdatePoolRollout: &roostv1.UpdatePoolRollout{Pool: "prod",
		Status: &roostv1.RolloutStatus{Phase: state.RolloutHalted, TargetVersion: "2027.02.0", Reason: "aborted by an operator"}}}})
	fl.now = t0.Add(30 * 24 * time.Hour)
	for _, ch := range []string{"stable", "lts"} {
		if _, err := p.Reconcile(ctx, ch); err != nil {
			t.Fatal(err)
		}
	}
	if got := channels(fl, "2027.02.0"); len(got) != 1 {
		t.Fatalf("promoted while a Pool is halted on it: %v", got)
	}
}
