package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// fixedSchedule is a Schedule that is open or closed at every instant,
// with next as the next opening (zero: none).
type fixedSchedule struct {
	open bool
	next time.Time
}

func (f fixedSchedule) OpenAt(time.Time) bool { return f.open }
func (f fixedSchedule) NextStart(time.Time) (time.Time, bool) {
	return f.next, !f.next.IsZero()
}

var planNow = time.Date(2027, 3, 24, 12, 0, 0, 0, time.UTC)

// planView is pool "workers" (maxUnavailable 2) with first Machines never
// provisioned and reboots Machines provisioned on Revision 1, all with
// Revision 2 desired.
func planView(first, reboots int, sched Schedule) *PoolView {
	v := &PoolView{Pool: &roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "workers"}, Spec: &roostv1.PoolSpec{}},
		Target: "2027.03.0", Schedule: sched, MaxUnavailable: 2}
	for i := 0; i < first; i++ {
		v.Machines = append(v.Machines, MachineView{Name: fmt.Sprintf("new-%d", i), Server: fmt.Sprintf("s-new-%d", i), Desired: 2})
	}
	for i := 0; i < reboots; i++ {
		v.Machines = append(v.Machines, MachineView{Name: fmt.Sprintf("old-%d", i), Server: fmt.Sprintf("s-old-%d", i), Desired: 2, Booted: 1,
			Provisioned: true, Ready: true, ReadySince: planNow.Add(-24 * time.Hour), BootedVersion: "2027.02.0"})
	}
	return v
}

func admitted(t *testing.T, v *PoolView, st *roostv1.RolloutStatus, name string) bool {
	t.Helper()
	ok, _ := Admit(v, st, name, planNow)
	return ok
}

// TestPlanFirstInstallsOnly: a pool whose Machines all await their first
// install is Progressing (they may start now), even with its windows
// closed, and its reason does not blame the windows.
func TestPlanFirstInstallsOnly(t *testing.T) {
	next := planNow.Add(14 * time.Hour)
	v := planView(6, 0, fixedSchedule{next: next})
	st := Plan(v, planNow)
	if st.GetPhase() != state.RolloutProgressing {
		t.Errorf("phase %s (%s), want %s", st.GetPhase(), st.GetReason(), state.RolloutProgressing)
	}
	want := "6 of 6 Machines awaiting first install (not gated by windows); 0 unavailable of 2 allowed"
	if st.GetReason() != want {
		t.Errorf("reason %q\nwant   %q", st.GetReason(), want)
	}
	if !admitted(t, v, st, "new-0") {
		t.Errorf("first install refused")
	}

	// Windows open: no gate to mention.
	st = Plan(planView(6, 0, fixedSchedule{open: true}), planNow)
	if want := "6 of 6 Machines awaiting first install; 0 unavailable of 2 allowed"; st.GetPhase() != state.RolloutProgressing || st.GetReason() != want {
		t.Errorf("open window: %s %q, want Progressing %q", st.GetPhase(), st.GetReason(), want)
	}

	// Unreadable windows: Progressing, and the error still shows.
	v = planView(6, 0, nil)
	v.ScheduleErr = fmt.Errorf("MaintenanceWindow nightly does not exist")
	st = Plan(v, planNow)
	if want := "6 of 6 Machines awaiting first install (not gated by windows); 0 unavailable of 2 allowed; maintenance windows unreadable: MaintenanceWindow nightly does not exist"; st.GetPhase() != state.RolloutProgressing || st.GetReason() != want {
		t.Errorf("unreadable windows: %s %q, want Progressing %q", st.GetPhase(), st.GetReason(), want)
	}

	// Paused: the pool says so, and that first installs go on.
	v = planView(6, 0, nil)
	v.Pool.Spec.Rollout = &roostv1.RolloutPolicy{Paused: true}
	st = Plan(v, planNow)
	if want := "6 awaiting first install (not gated by the pause); paused by an operator (roostctl rollout resume workers)"; st.GetPhase() != state.RolloutPaused || st.GetReason() != want {
		t.Errorf("paused: %s %q, want Paused %q", st.GetPhase(), st.GetReason(), want)
	}
	// Paused with nothing to roll out: still Paused, so the pause shows
	// until resumed.
	v = planView(0, 0, nil)
	v.Pool.Spec.Rollout = &roostv1.RolloutPolicy{Paused: true}
	st = Plan(v, planNow)
	if want := "paused by an operator (roostctl rollout resume workers); nothing to roll out"; st.GetPhase() != state.RolloutPaused || st.GetReason() != want {
		t.Errorf("paused, nothing to do: %s %q, want Paused %q", st.GetPhase(), st.GetReason(), want)
	}
}

// TestPlanFirstInstallsAndReboots: with the windows closed, a pool with
// first installs and reboots left waits for a window for its reboots
// only, and says that the first installs are not gated.
func TestPlanFirstInstallsAndReboots(t *testing.T) {
	next := planNow.Add(14*time.Hour + 30*time.Minute)
	v := planView(2, 4, fixedSchedule{next: next})
	st := Plan(v, planNow)
	want := "2 awaiting first install (not gated by windows); 4 of 6 to reboot: no maintenance window of the pool is open; the next opens at 2027-03-25T02:30:00Z"
	if st.GetPhase() != state.RolloutWaiting || st.GetReason() != want {
		t.Errorf("got %s %q\nwant %s %q", st.GetPhase(), st.GetReason(), state.RolloutWaiting, want)
	}
	if !st.GetNextWindowStart().AsTime().Equal(next) {
		t.Errorf("next window %v, want %v", st.GetNextWindowStart().AsTime(), next)
	}
	if st.GetTotal() != 6 || st.GetUpdated() != 0 || st.GetUnavailable() != 0 {
		t.Errorf("total %d updated %d unavailable %d, want 6 0 0", st.GetTotal(), st.GetUpdated(), st.GetUnavailable())
	}
	// Admission is unchanged: first installs go, reboots wait.
	if !admitted(t, v, st, "new-1") {
		t.Errorf("first install refused")
	}
	if admitted(t, v, st, "old-0") {
		t.Errorf("reboot admitted outside the windows")
	}

	// Window open: Progressing, both counted.
	st = Plan(planView(2, 4, fixedSchedule{open: true}), planNow)
	if want := "2 awaiting first install; 4 of 6 to reboot; 0 unavailable of 2 allowed"; st.GetPhase() != state.RolloutProgressing || st.GetReason() != want {
		t.Errorf("open window: %s %q, want Progressing %q", st.GetPhase(), st.GetReason(), want)
	}

	// Settling: the settle delay holds the reboots only.
	v = planView(2, 4, nil)
	v.Pool.Spec.Rollout = &roostv1.RolloutPolicy{Settle: durationpb.New(10 * time.Minute)}
	v.Machines[2].ReadySince = planNow.Add(-time.Minute)
	st = Plan(v, planNow)
	if want := "2 awaiting first install (not gated by the settle delay); 4 of 6 to reboot: settling after the last reboot until 2027-03-24T12:09:00Z"; st.GetPhase() != state.RolloutSettling || st.GetReason() != want {
		t.Errorf("settling: %s %q, want Settling %q", st.GetPhase(), st.GetReason(), want)
	}
}

// TestPlanRebootsWindowClosed: all Machines provisioned, windows closed:
// Waiting on the window, as before.
func TestPlanRebootsWindowClosed(t *testing.T) {
	next := planNow.Add(14*time.Hour + 30*time.Minute)
	v := planView(0, 6, fixedSchedule{next: next})
	st := Plan(v, planNow)
	want := "no maintenance window of the pool is open; the next opens at 2027-03-25T02:30:00Z"
	if st.GetPhase() != state.RolloutWaiting || st.GetReason() != want {
		t.Errorf("got %s %q\nwant %s %q", st.GetPhase(), st.GetReason(), state.RolloutWaiting, want)
	}
	if admitted(t, v, st, "old-0") {
		t.Errorf("reboot admitted outside the windows")
	}
	st = Plan(planView(0, 6, fixedSchedule{open: true}), planNow)
	if want := "6 of 6 Machines to reboot; 0 unavailable of 2 allowed"; st.GetPhase() != state.RolloutProgressing || st.GetReason() != want {
		t.Errorf("open window: %s %q, want Progressing %q", st.GetPhase(), st.GetReason(), want)
	}
	if strings.Contains(st.GetReason(), "first install") {
		t.Errorf("reason mentions first installs: %q", st.GetReason())
	}
}
