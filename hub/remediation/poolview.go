package remediation

import (
	"strconv"
	"time"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// member is one Machine of a Pool (not Destroyed) with what the
// controllers judge it by. Messages are shared with the store: read only.
type member struct {
	m      *roostv1.Machine
	server *roostv1.Server // nil when the Server is gone
	// leased says the Server holds an unexpired Lease: it reboots on
	// purpose, and the rollout's readyTimeout judges it.
	leased bool
}

// poolView is a Pool, its Machines (by name) and its Cluster (nil when it
// names none or the Cluster does not exist) at one instant.
type poolView struct {
	pool    *roostv1.Pool
	members []member
	cluster *roostv1.Cluster
}

// readPool reads Pool name from r at now; nil when it does not exist.
func readPool(r *state.Reader, name string, now time.Time) *poolView {
	o := r.Get("Pool", name)
	if o == nil {
		return nil
	}
	v := &poolView{pool: o.GetPool()}
	if cl := v.pool.GetSpec().GetCluster(); cl != "" {
		v.cluster = r.Get("Cluster", cl).GetCluster()
	}
	for _, m := range r.MachinesOfPool(name) {
		if m.GetStatus().GetPhase() == state.PhaseDestroyed {
			continue
		}
		mb := member{m: m}
		if srv := m.GetSpec().GetServer(); srv != "" {
			mb.server = r.Get("Server", srv).GetServer()
			if l := r.Get("Lease", srv).GetLease(); l != nil && l.GetSpec().GetExpiresAt().AsTime().After(now) {
				mb.leased = true
			}
		}
		v.members = append(v.members, mb)
	}
	return v
}

func (mb member) name() string { return mb.m.GetMetadata().GetName() }

// remediating says the Machine is being replaced.
func (mb member) remediating() bool { return state.Remediating(mb.m) }

func (mb member) ready() bool {
	return state.FindCondition(mb.m.GetStatus().GetConditions(), state.MachineReady).GetStatus() == "True"
}

// provisioned says its Server booted one of its Revisions.
func (mb member) provisioned() bool { return mb.m.GetStatus().GetBootedRevision() > 0 }

// unreachable says its Server is Unreachable (or gone).
func (mb member) unreachable() bool {
	return mb.server == nil || mb.server.GetStatus().GetReachability() == state.Unreachable
}

// unhealthy says the Machine counts against spec.safety: provisioned
// once, not Ready now, and not rebooting under a Lease.
func (mb member) unhealthy() bool {
	return mb.provisioned() && !mb.ready() && !mb.leased
}

// installing says the Machine was claimed and has not been Ready yet:
// a replacement (or a new replica) under way.
func (mb member) installing() bool { return !mb.provisioned() && !mb.ready() }

// failure says why the Machine should be replaced under pol: the reason
// (state.ReasonUnreachable, state.ReasonRevisionFailed), a message, and
// when it becomes due (for Unreachable: unhealthyTimeout after it stopped
// being Ready). reason is "" when it is healthy enough.
func (mb member) failure(pol Policy) (reason, msg string, due time.Time) {
	st := mb.m.GetStatus()
	if pol.ReplaceFailedRevision && st.GetRevision() != 0 && st.GetFailedRevision() == st.GetRevision() {
		msg := "Revision " + strconv.FormatInt(st.GetRevision(), 10) + " failed"
		if c := state.FindCondition(st.GetConditions(), state.MachineProvisioned); c.GetReason() == state.ReasonRevisionFailed && c.GetMessage() != "" {
			msg = c.GetMessage()
		}
		return state.ReasonRevisionFailed, msg + " (onFailedRevision: replace)", time.Time{}
	}
	if !mb.unreachable() || mb.leased {
		return "", "", time.Time{}
	}
	since := mb.m.GetMetadata().GetCreationTimestamp().AsTime()
	if c := state.FindCondition(st.GetConditions(), state.MachineReady); c.GetStatus() != "True" && c.GetLastTransitionTime() != nil {
		since = c.GetLastTransitionTime().AsTime()
	}
	who := "its Server is gone"
	if mb.server != nil {
		who = "Server " + mb.server.GetMetadata().GetName() + " is Unreachable"
	}
	return state.ReasonUnreachable, who + ", not Ready since " + since.UTC().Format(time.RFC3339) +
		" (unhealthyTimeout " + pol.UnhealthyTimeout.String() + ")", since.Add(pol.UnhealthyTimeout)
}
