package state

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// grantLease gives a Server permission to reboot (see roostv1.GrantLease).
// One ApplyResult names the Lease.
func (a *applier) grantLease(c *roostv1.GrantLease) ([]*roostv1.ApplyResult, *apierror.Error) {
	now, aerr := a.now()
	if aerr != nil {
		return nil, aerr
	}
	if c.GetExpiresAt() == nil || !c.GetExpiresAt().AsTime().After(now.AsTime()) {
		return nil, apierror.Invalid("invalid Lease", apierror.Violation{Field: "expires_at", Message: "must be after the command's time"})
	}
	srv, aerr := a.getServer(c.GetServer())
	if aerr != nil {
		return nil, aerr
	}
	if srv == nil {
		return nil, apierror.NotFound(kindServer, c.GetServer())
	}
	m, aerr := a.machineOf(c.GetServer())
	if aerr != nil {
		return nil, aerr
	}
	if m == nil {
		return nil, apierror.FailedPrecondition("Server %s is not claimed by a Machine; only claimed Servers reboot into Revisions", c.GetServer())
	}
	pool := m.GetSpec().GetPool()
	old, aerr := a.getLease(c.GetServer())
	if aerr != nil {
		return nil, aerr
	}
	// A Lease that expired is no longer held: asking again counts against
	// the pool like a new Lease (its object is renewed when granted).
	held := old != nil && old.GetSpec().GetExpiresAt().AsTime().After(now.AsTime())
	if !held && pool != "" {
		maxUnavailable := max(c.GetMaxUnavailable(), 1)
		var holders []string
		it, err := a.txn.Get(kindLease, indexID)
		if err != nil {
			return nil, internal(err)
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			l := raw.(*roostv1.Object).GetLease()
			if l.GetSpec().GetPool() == pool && l.GetSpec().GetExpiresAt().AsTime().After(now.AsTime()) {
				holders = append(holders, l.GetSpec().GetServer())
			}
		}
		if int32(len(holders)) >= maxUnavailable {
			return nil, &apierror.Error{Code: codes.ResourceExhausted, Message: fmt.Sprintf(
				"pool %s allows %d unavailable Machine(s) at once and %d Lease(s) are held (%s)",
				pool, maxUnavailable, len(holders), joinTerms(holders))}
		}
	}
	phase := c.GetPhase()
	switch phase {
	case "":
		phase = LeaseGranted
	case LeaseGranted, LeaseDraining:
	default:
		return nil, apierror.Invalid("invalid Lease", apierror.Violation{Field: "phase", Message: fmt.Sprintf("must be %s or %s, got %q", LeaseDraining, LeaseGranted, phase)})
	}
	l := &roostv1.Lease{
		ApiVersion: resource.APIVersion, Kind: kindLease,
		Metadata: a.newMeta(c.GetServer(), c.GetUid(), now),
		Spec: &roostv1.LeaseSpec{
			Server: c.GetServer(), FencingToken: a.index, ExpiresAt: c.GetExpiresAt(),
			Revision: c.GetRevision(), Pool: pool, Phase: phase,
			Reason: fmt.Sprintf("reboot into Revision %d", c.GetRevision()),
		},
	}
	if pool != "" {
		l.Spec.Reason += " (pool " + pool + ")"
	}
	if old != nil {
		l.Metadata = proto.Clone(old.GetMetadata()).(*roostv1.ObjectMeta)
		a.touch(l.Metadata, true)
		if held {
			// The same Lease moves on (Draining → Granted, or renewed):
			// its fencing token stays.
			l.Spec.FencingToken = old.GetSpec().GetFencingToken()
		}
	}
	if aerr := a.put(l, old == nil); aerr != nil {
		return nil, aerr
	}
	if !held || old.GetSpec().GetPhase() != phase {
		reason, msg := "LeaseGranted", fmt.Sprintf("may reboot into Revision %d now", c.GetRevision())
		if phase == LeaseDraining {
			reason, msg = "LeaseDraining", fmt.Sprintf("holds a reboot slot to drain its Node before rebooting into Revision %d", c.GetRevision())
		}
		if pool != "" {
			msg += " (pool " + pool + ")"
		}
		if aerr := a.recordEvent(kindServer, c.GetServer(), EventNormal, reason, msg, EventSourceHub); aerr != nil {
			return nil, aerr
		}
	}
	action := ActionCreated
	if old != nil {
		action = ActionConfigured
	}
	return []*roostv1.ApplyResult{{Kind: kindLease, Name: c.GetServer(), Action: action}}, nil
}

func (a *applier) getLease(server string) (*roostv1.Lease, *apierror.Error) {
	raw, err := a.txn.First(kindLease, indexID, server)
	if err != nil {
		return nil, internal(err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*roostv1.Object).GetLease(), nil
}

// releaseLeases deletes Leases (see roostv1.ReleaseLeases).
func (a *applier) releaseLeases(c *roostv1.ReleaseLeases) ([]*roostv1.ApplyResult, *apierror.Error) {
	var results []*roostv1.ApplyResult
	for i, s := range c.GetServers() {
		l, aerr := a.getLease(s)
		if aerr != nil {
			return nil, aerr
		}
		if l == nil {
			continue
		}
		if i < len(c.GetFencingTokens()) && c.GetFencingTokens()[i] != 0 && c.GetFencingTokens()[i] != l.GetSpec().GetFencingToken() {
			continue
		}
		if aerr := a.deleteObjectRow(kindLease, s); aerr != nil {
			return nil, aerr
		}
		if aerr := a.recordEvent(kindServer, s, EventNormal, "LeaseReleased",
			fmt.Sprintf("the Lease to reboot into Revision %d was released", l.GetSpec().GetRevision()), EventSourceHub); aerr != nil {
			return nil, aerr
		}
		results = append(results, &roostv1.ApplyResult{Kind: kindLease, Name: s, Action: ActionDeleted})
	}
	return results, nil
}

// settleLease deletes server's Lease once its purpose is over: the Server
// booted the Lease's Revision and assessed it healthy, or the Revision
// failed, or the Server is no longer claimed.
func (a *applier) settleLease(srv *roostv1.Server) *apierror.Error {
	name := srv.GetMetadata().GetName()
	l, aerr := a.getLease(name)
	if aerr != nil || l == nil {
		return aerr
	}
	m, aerr := a.machineOf(name)
	if aerr != nil {
		return aerr
	}
	rev := l.GetSpec().GetRevision()
	done := m == nil
	if srv.GetStatus().GetBootedRevision() == rev {
		if c := findCondition(srv.GetStatus().GetConditions(), AgentHealthy); c != nil && c.GetStatus() == "True" {
			done = true
		}
	}
	if raw, err := a.txn.First(kindRevision, indexID, RevisionName(name, rev)); err != nil {
		return internal(err)
	} else if raw != nil && revisionPhase(raw.(*roostv1.Object).GetRevision()) == RevisionFailed {
		done = true
	}
	if !done {
		return nil
	}
	if aerr := a.deleteObjectRow(kindLease, name); aerr != nil {
		return aerr
	}
	return a.recordEvent(kindServer, name, EventNormal, "LeaseReleased",
		fmt.Sprintf("the Lease to reboot into Revision %d ended: its work is done", rev), EventSourceHub)
}
