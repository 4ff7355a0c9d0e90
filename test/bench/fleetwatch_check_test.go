package bench

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// TestFleetWatchChecks: the benchmark's checks catch a Pool with more
// Machines down than maxUnavailable (a Lease, or provisioned and not
// Ready) and a second Lease for one Revision, and pass a rollout that
// keeps within them.
func TestFleetWatchChecks(t *testing.T) {
	var idx uint64
	ev := func(w *fleetWatch, typ roostv1.WatchEvent_Type, r resource.Resource) {
		idx++
		w.observe(&roostv1.WatchEvent{Type: typ, Index: idx, Object: resource.Wrap(r)})
	}
	mod := roostv1.WatchEvent_TYPE_MODIFIED
	machine := func(name, server string, booted int64, ready bool) *roostv1.Machine {
		st := "False"
		if ready {
			st = "True"
		}
		return &roostv1.Machine{Metadata: &roostv1.ObjectMeta{Name: name}, Spec: &roostv1.MachineSpec{Pool: "p", Server: server},
			Status: &roostv1.MachineStatus{BootedRevision: booted, Revision: booted, Conditions: []*roostv1.Condition{{Type: state.MachineReady, Status: st}}}}
	}
	lease := func(server string, rev int64, token uint64) *roostv1.Lease {
		return &roostv1.Lease{Metadata: &roostv1.ObjectMeta{Name: server}, Spec: &roostv1.LeaseSpec{Server: server, Revision: rev, FencingToken: token,
			Pool: "p", Phase: state.LeaseGranted, ExpiresAt: timestamppb.New(time.Now().Add(time.Hour))}}
	}
	setup := func() *fleetWatch {
		w := newFleetWatch()
		ev(w, mod, &roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "p"}, Spec: &roostv1.PoolSpec{Rollout: &roostv1.RolloutPolicy{
			MaxUnavailable: &roostv1.IntOrString{Value: &roostv1.IntOrString_IntVal{IntVal: 1}}}}})
		ev(w, mod, machine("m1", "s1", 1, true))
		ev(w, mod, machine("m2", "s2", 1, true))
		w.arm()
		return w
	}

	// Within bounds: one Lease at a time, each settled before the next.
	w := setup()
	ev(w, mod, lease("s1", 2, 10))
	ev(w, mod, machine("m1", "s1", 1, false))
	ev(w, mod, machine("m1", "s1", 2, true))
	ev(w, roostv1.WatchEvent_TYPE_DELETED, lease("s1", 2, 10))
	ev(w, mod, lease("s2", 2, 20))
	ev(w, roostv1.WatchEvent_TYPE_DELETED, lease("s2", 2, 20))
	ev(w, mod, machine("m2", "s2", 2, true))
	w.check()
	if v, _, peak, _ := w.result(); len(v) != 0 || peak != 1 {
		t.Errorf("a rollout within bounds: violations %v, peak %d", v, peak)
	}

	// Over capacity: m1 is not Ready while s2 holds a Lease.
	w = setup()
	ev(w, mod, machine("m1", "s1", 1, false))
	ev(w, mod, lease("s2", 2, 20))
	w.check()
	if v, _, _, _ := w.result(); len(v) != 1 || !strings.Contains(v[0], "pool p has 2 Machines down, maxUnavailable 1") {
		t.Errorf("over capacity: %v", v)
	}

	// A second Lease for the same Revision.
	w = setup()
	ev(w, mod, lease("s1", 2, 10))
	ev(w, roostv1.WatchEvent_TYPE_DELETED, lease("s1", 2, 10))
	ev(w, mod, lease("s1", 2, 30))
	w.check()
	if v, _, _, _ := w.result(); len(v) != 1 || !strings.Contains(v[0], "Server s1 granted two Leases for Revision 2 (fencing tokens 10 and 30)") {
		t.Errorf("double Lease: %v", v)
	}
}
