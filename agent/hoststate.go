package agent

import (
	"sync"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Conditions the agent reports (AgentStatus.conditions) about installing
// and booting Revisions.
const (
	// CondNetworkVerified: the network profile was applied and the host
	// matches it (no drift).
	CondNetworkVerified = "NetworkVerified"
	// CondHealthy: the boot assessment of the booted Revision passed and
	// its boot entry is marked good.
	CondHealthy = "Healthy"
	// CondInstalled: the install disk holds Roost's ESP and STATE.
	CondInstalled = "Installed"
	// CondStaged: the desired Revision is staged as a boot entry.
	CondStaged = "Staged"
	// CondLeaseGranted: the hub allowed the reboot into it.
	CondLeaseGranted = "LeaseGranted"
)

var condOrder = []string{"InventoryCollected", CondNetworkVerified, CondHealthy, CondInstalled, CondStaged, CondLeaseGranted}

// hostState is what the host side shares with the stream: conditions and
// failed Revisions to report, and the newest desired state to act on.
type hostState struct {
	mu        sync.Mutex
	conds     map[string]*roostv1.Condition
	failed    []*roostv1.FailedRevision
	hasFailed bool
	// dirty wakes the stream to send a status.
	dirty chan struct{}
	// desired holds the newest desired state for the host loop.
	desired chan *roostv1.DesiredState

	// cleaned: the disks were let go (clean.go), so this boot runs no
	// Revision any more; cleaning is the newest cleaning result and
	// cleaningSent whether the stream sent it.
	cleaned      bool
	cleaning     *roostv1.CleaningResult
	cleaningSent bool

	// owned by the host loop
	espMounted bool
	stateRoot  string
	// dhcp names the interfaces with a running DHCPv4 client.
	dhcp map[string]bool
}

func newHostState() *hostState {
	return &hostState{conds: map[string]*roostv1.Condition{}, dirty: make(chan struct{}, 1), desired: make(chan *roostv1.DesiredState, 1)}
}

func (s *hostState) notify() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}

// set records a condition and wakes the stream when it changed.
func (s *hostState) set(typ, status, reason, msg string) {
	s.mu.Lock()
	old := s.conds[typ]
	c := &roostv1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
	s.conds[typ] = c
	s.mu.Unlock()
	if old == nil || old.GetStatus() != status || old.GetReason() != reason || old.GetMessage() != msg {
		s.notify()
	}
}

func (s *hostState) setFailed(f []*roostv1.FailedRevision) {
	s.mu.Lock()
	s.failed, s.hasFailed = f, true
	s.mu.Unlock()
	s.notify()
}

// clear drops a condition and wakes the stream when it was set.
func (s *hostState) clear(typ string) {
	s.mu.Lock()
	_, had := s.conds[typ]
	delete(s.conds, typ)
	s.mu.Unlock()
	if had {
		s.notify()
	}
}

// setDetached records that the disks were let go: from now on the agent
// reports booted revision 0.
func (s *hostState) setDetached() {
	s.mu.Lock()
	s.cleaned = true
	s.mu.Unlock()
	s.notify()
}

// detached says whether setDetached was called.
func (s *hostState) detached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cleaned
}

// setCleaning records a cleaning result for the stream to send.
func (s *hostState) setCleaning(r *roostv1.CleaningResult) {
	s.mu.Lock()
	s.cleaning, s.cleaningSent = r, false
	s.mu.Unlock()
	s.notify()
}

// cleaningResult returns the newest cleaning result, nil when there is
// none; with unsent, only one not sent yet (it is then marked sent).
func (s *hostState) cleaningResult(unsent bool) *roostv1.CleaningResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	if unsent && s.cleaningSent {
		return nil
	}
	s.cleaningSent = true
	return s.cleaning
}

// cleanedIndex is the index of the newest cleaning result (0: none).
func (s *hostState) cleanedIndex() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cleaning.GetIndex()
}

// resendCleaning has the stream send the newest cleaning result again.
func (s *hostState) resendCleaning() {
	s.mu.Lock()
	s.cleaningSent = false
	s.mu.Unlock()
	s.notify()
}

// report adds the host's conditions and failed Revisions to st; after a
// cleaning let the disks go, st says no Revision is booted.
func (s *hostState) report(st *roostv1.AgentStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cleaned {
		st.BootedRevision = 0
	}
	for _, t := range condOrder {
		if c := s.conds[t]; c != nil {
			st.Conditions = append(st.Conditions, c)
		}
	}
	st.FailedRevisions, st.HasFailedRevisions = s.failed, s.hasFailed
}

// offer hands d to the host loop, replacing an older one not yet taken.
func (s *hostState) offer(d *roostv1.DesiredState) {
	for {
		select {
		case s.desired <- d:
			return
		default:
		}
		select {
		case <-s.desired:
		default:
		}
	}
}
