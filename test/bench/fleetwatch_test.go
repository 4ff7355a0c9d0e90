package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/hub/rollout"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// fleetWatch follows the hub's state through one Watch stream of every
// kind, in Raft order, and checks the rollout's two safety properties
// after every Raft index it observes:
//
//   - capacity: no Pool has more Machines down than its
//     rollout.maxUnavailable allows, "down" as the rollout controller
//     counts it (hub/rollout: an unexpired Lease, or provisioned and not
//     Ready);
//   - fencing: no Server is granted two Leases for one Revision (two
//     fencing tokens for the same Server and Revision).
//
// It also tells how many Machines are Good on a version: Ready, booted
// their desired Revision, and their Server runs that image version.
type fleetWatch struct {
	mu       sync.Mutex
	machines map[string]*watchedMachine // by Machine name
	// inPool holds each Pool's Machines by name.
	inPool   map[string]map[string]*watchedMachine
	byServer map[string]string // Server → Machine
	versions map[string]string // Server → image version
	leases   map[string]*roostv1.LeaseSpec
	pools    map[string]int32 // Pool → resolved maxUnavailable
	grants   map[string]uint64
	// dirty are the Pools touched since the last check.
	dirty map[string]bool
	// index is the newest Raft index seen; steps how many indexes were
	// checked.
	index      uint64
	steps      int
	peakDown   map[string]int
	violations []string
	// checking is false until the first release is on every Machine
	// (arm): first installs are checked for fencing only.
	checking bool
	// breaks counts the streams that ended (and were resumed), relists
	// the times the state had to be read anew (the indexes in between
	// were not checked); lastBreak is the last reason.
	breaks, relists int
	lastBreak       string
	// checkedGaps counts the relists while the capacity checks ran (after
	// arm): gaps in what was checked.
	checkedGaps int
}

type watchedMachine struct {
	pool, server    string
	ready           bool
	booted, desired int64
}

func newFleetWatch() *fleetWatch {
	return &fleetWatch{machines: map[string]*watchedMachine{}, inPool: map[string]map[string]*watchedMachine{}, byServer: map[string]string{}, versions: map[string]string{},
		leases: map[string]*roostv1.LeaseSpec{}, pools: map[string]int32{}, grants: map[string]uint64{}, dirty: map[string]bool{},
		peakDown: map[string]int{}}
}

// run follows the watch on the given clients in turn (the next one when a
// stream breaks, from the last index seen) until ctx ends. When the member
// no longer keeps the events after that index (OutOfRange: the stream
// fell behind and was ended), it re-lists: the state is read anew and the
// indexes in between are counted as unchecked (relists).
func (w *fleetWatch) run(ctx context.Context, clients []roostv1.HubServiceClient) {
	for i := 0; ctx.Err() == nil; i++ {
		c := clients[i%len(clients)]
		w.mu.Lock()
		from := w.index
		w.mu.Unlock()
		stream, err := c.Watch(ctx, &roostv1.WatchRequest{FromIndex: from})
		if err == nil {
			var ev *roostv1.WatchEvent
			for ev, err = stream.Recv(); err == nil; ev, err = stream.Recv() {
				w.observe(ev)
			}
		}
		if status.Code(err) == codes.OutOfRange {
			w.relist(err)
			continue
		}
		w.mu.Lock()
		w.breaks++
		w.lastBreak = fmt.Sprint(err)
		w.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
}

// relist forgets the followed state (not the Leases granted, which the
// fencing check compares across the gap) so the next Watch, from index 0,
// reads it anew.
func (w *fleetWatch) relist(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.relists++
	if w.checking {
		w.checkedGaps++
	}
	w.lastBreak = err.Error()
	w.machines, w.inPool, w.byServer, w.versions = map[string]*watchedMachine{}, map[string]map[string]*watchedMachine{}, map[string]string{}, map[string]string{}
	w.leases, w.pools, w.dirty = map[string]*roostv1.LeaseSpec{}, map[string]int32{}, map[string]bool{}
	w.index = 0
}

// observe applies one event; the state is checked whenever the Raft
// index moves on (all events of one entry applied).
func (w *fleetWatch) observe(ev *roostv1.WatchEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ev.GetIndex() > w.index && w.index > 0 {
		w.check()
	}
	if ev.GetIndex() > w.index {
		w.index = ev.GetIndex()
	}
	deleted := ev.GetType() == roostv1.WatchEvent_TYPE_DELETED
	o := ev.GetObject()
	switch {
	case o.GetMachine() != nil:
		m := o.GetMachine()
		name := m.GetMetadata().GetName()
		if old := w.machines[name]; old != nil {
			w.dirty[old.pool] = true
			delete(w.byServer, old.server)
			delete(w.inPool[old.pool], name)
		}
		if deleted {
			delete(w.machines, name)
			return
		}
		st := m.GetStatus()
		wm := &watchedMachine{pool: m.GetSpec().GetPool(), server: m.GetSpec().GetServer(), booted: st.GetBootedRevision(), desired: st.GetRevision(),
			ready: state.FindCondition(st.GetConditions(), state.MachineReady).GetStatus() == "True"}
		w.machines[name] = wm
		if w.inPool[wm.pool] == nil {
			w.inPool[wm.pool] = map[string]*watchedMachine{}
		}
		w.inPool[wm.pool][name] = wm
		if wm.server != "" {
			w.byServer[wm.server] = name
		}
		w.dirty[wm.pool] = true
	case o.GetServer() != nil:
		s := o.GetServer()
		if deleted {
			delete(w.versions, s.GetMetadata().GetName())
		} else {
			w.versions[s.GetMetadata().GetName()] = s.GetStatus().GetImageVersion()
		}
	case o.GetLease() != nil:
		l := o.GetLease().GetSpec()
		server := o.GetLease().GetMetadata().GetName()
		if m := w.machines[w.byServer[server]]; m != nil {
			w.dirty[m.pool] = true
		}
		if deleted {
			delete(w.leases, server)
			return
		}
		w.leases[server] = l
		if l.GetPhase() == state.LeaseGranted {
			key := fmt.Sprintf("%s/%d", server, l.GetRevision())
			if t, ok := w.grants[key]; ok && t != l.GetFencingToken() {
				w.violations = append(w.violations, fmt.Sprintf("index %d: Server %s granted two Leases for Revision %d (fencing tokens %d and %d)",
					ev.GetIndex(), server, l.GetRevision(), t, l.GetFencingToken()))
			}
			w.grants[key] = l.GetFencingToken()
		}
	case o.GetPool() != nil:
		p := o.GetPool()
		if deleted {
			delete(w.pools, p.GetMetadata().GetName())
		} else {
			w.pools[p.GetMetadata().GetName()] = rollout.MaxUnavailable(p)
		}
	}
}

// down is the rollout controller's count (hub/rollout down()).
func (w *fleetWatch) down(m *watchedMachine, now time.Time) bool {
	if l := w.leases[m.server]; l != nil && l.GetExpiresAt().AsTime().After(now) {
		return true
	}
	return m.booted > 0 && !m.ready
}

// check counts the down Machines of every Pool touched since the last
// check against its maxUnavailable. Called with mu held.
func (w *fleetWatch) check() {
	w.steps++
	if len(w.dirty) == 0 {
		return
	}
	now := time.Now()
	for pool := range w.dirty {
		n := 0
		for _, m := range w.inPool[pool] {
			if w.down(m, now) {
				n++
			}
		}
		if w.checking && n > w.peakDown[pool] {
			w.peakDown[pool] = n
		}
		if w.checking && int32(n) > w.pools[pool] {
			w.violations = append(w.violations, fmt.Sprintf("index %d: pool %s has %d Machines down, maxUnavailable %d", w.index, pool, n, w.pools[pool]))
		}
	}
	clear(w.dirty)
}

// arm starts the capacity checks (after the first installs, which are
// not a rollout of running Machines).
func (w *fleetWatch) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checking = true
}

// good returns how many Machines are Good on version, and how many
// Machines there are.
func (w *fleetWatch) good(version string) (good, total int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.machines {
		total++
		if m.ready && m.booted > 0 && m.booted == m.desired && w.versions[m.server] == version {
			good++
		}
	}
	return good, total
}

// result returns the violations, the Raft indexes checked and the
// highest number of Machines any Pool had down at once, with that Pool's
// maxUnavailable.
func (w *fleetWatch) result() (violations []string, steps int, peak int, peakMax int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for pool, n := range w.peakDown {
		if n > peak || n == peak && w.pools[pool] < peakMax {
			peak, peakMax = n, w.pools[pool]
		}
	}
	return append([]string(nil), w.violations...), w.steps, peak, peakMax
}

// summary tells where the Machines are, for progress lines: how many are
// Ready, on their desired Revision, and on each image version.
func (w *fleetWatch) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ready, current := 0, 0
	versions := map[string]int{}
	for _, m := range w.machines {
		if m.ready {
			ready++
		}
		if m.booted > 0 && m.booted == m.desired {
			current++
		}
		versions[w.versions[m.server]]++
	}
	out := fmt.Sprintf("%d Machines: %d Ready, %d on their desired Revision, %d Leases, image versions %v", len(w.machines), ready, current, len(w.leases), versions)
	if w.breaks+w.relists > 0 {
		out += fmt.Sprintf("; watch resumed %d times, re-listed %d (last: %s)", w.breaks, w.relists, w.lastBreak)
	}
	return out
}

// gaps says how often the watch was re-listed while the capacity checks
// ran (after arm): the Raft indexes in between were not checked.
func (w *fleetWatch) gaps() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.checkedGaps
}
