package hub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/version"
)

// selfRecord is this member's HubMember: its addresses, roost-hub version
// and apply rules version.
func (h *Hub) selfRecord() *roostv1.HubMember {
	return &roostv1.HubMember{Id: h.id, RaftAddress: h.node.Addr(), ApiAddress: h.APIAddr(),
		HubVersion: version.Version, RulesVersion: state.RulesVersion}
}

// leaderLoop makes sure, once per leadership term, that the CA is
// replicated (after a bootstrap crash) and that this member's record is
// current; on the bootstrap member it also writes admin.conf once. On a
// follower it reports this member's record to the leader once (its
// roost-hub may have been upgraded), retrying every 5 s until it succeeds.
func (h *Hub) leaderLoop(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	done := false     // housekeeping succeeded in this leadership term
	reported := false // this member's record is current in the state
	var nextReport time.Time
	for {
		switch {
		case !h.node.IsLeader():
			done = false
			h.settled.Store(false)
			if _, leader := h.node.Leader(); !reported && leader != "" && time.Now().After(nextReport) {
				if err := h.api.ReportSelf(ctx, h.selfRecord()); err != nil {
					switch {
					case ctx.Err() != nil:
					case apierror.Code(err) == codes.NotFound, apierror.Code(err) == codes.Unavailable: // joining or removed; leader not ready
						h.log.Debug("cannot record this member's version on the leader yet; retrying", "err", err)
					default:
						h.log.Warn("cannot record this member's version on the leader; retrying", "err", err)
					}
					nextReport = time.Now().Add(5 * time.Second)
				} else {
					reported = true
				}
			}
		case !done:
			if err := h.reconcileSelf(ctx); err != nil {
				if ctx.Err() == nil {
					h.log.Warn("leader housekeeping failed; retrying", "err", err)
				}
			} else {
				done = true
				h.settled.Store(true)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.node.LeaderCh():
		}
	}
}

// termBarrier returns once this member's state has caught up with the log
// in the current leadership term: leaderLoop's barrier is shared by the
// leader-only controllers, so a new term costs one barrier entry, not one
// per controller. It fails after 10 s or when ctx ends.
func (h *Hub) termBarrier(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for !h.settled.Load() {
		if !h.node.IsLeader() {
			return errors.New("not the leader")
		}
		if time.Now().After(deadline) {
			return errors.New("leader housekeeping has not finished in this term")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

func (h *Hub) reconcileSelf(ctx context.Context) error {
	// A new leader may not have re-applied the log yet: read the state only
	// after a barrier, so an old CA or member record is not taken as missing.
	if err := h.node.Barrier(ctx); err != nil {
		return err
	}
	if h.fsm.CA() == nil {
		keyPEM, err := os.ReadFile(h.dir.caKey())
		if err != nil {
			return fmt.Errorf("the state has no CA and %s is missing: %w", h.dir.caKey(), err)
		}
		certPEM, err := os.ReadFile(h.dir.caCert())
		if err != nil {
			return err
		}
		if _, err := h.api.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_InitCa{InitCa: &roostv1.InitCA{
			Ca: &roostv1.CertificateAuthority{CertificatePem: certPEM, PrivateKeyPem: keyPEM},
		}}}); err != nil {
			return err
		}
	}
	if err := h.api.ReportSelf(ctx, h.selfRecord()); err != nil {
		return err
	}
	if h.opts.ForceNewCluster {
		if err := h.forgetLostMembers(ctx); err != nil {
			return err
		}
	}
	if exists(h.dir.caKey()) {
		if err := h.writeAdminConfig(); err != nil {
			return err
		}
		return os.Remove(h.dir.caKey())
	}
	return nil
}
