package clusters

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/controller"
	"github.com/roostfleet/roost/hub/kube"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// tokenTTL is cl's bootstrap token lifetime (spec.join.bootstrapTokenTTL,
// default DefaultBootstrapTokenTTL).
func tokenTTL(cl *roostv1.Cluster) time.Duration {
	if d := cl.GetSpec().GetJoin().GetBootstrapTokenTtl(); d != nil && d.AsDuration() > 0 {
		return d.AsDuration()
	}
	return DefaultBootstrapTokenTTL
}

// reconcileTokens keeps one live bootstrap token per worker of cl whose
// Node has not registered: a new one when none has more than a third of
// its lifetime left (the older one stays valid until it expires, so a
// kubelet using it is not cut off). Tokens expire or are used (the Node
// registered, or the Machine is gone) are deleted from the cluster and
// then forgotten; Roost-labelled token Secrets the hub does not know
// (a crash between create and record) are deleted too.
func (c *Controller) reconcileTokens(ctx context.Context, cl *roostv1.Cluster, k *kube.Client, machines []*roostv1.Machine) error {
	name, now, ttl := cl.GetMetadata().GetName(), c.now(), tokenTTL(cl)
	joining := map[string]bool{}
	for _, m := range machines {
		if m.GetStatus().GetNodeName() == "" {
			joining[m.GetMetadata().GetName()] = true
		}
	}
	// known holds every token the hub holds, for any Cluster: two Cluster
	// objects may name one API, and neither deletes the other's tokens.
	known := map[string]bool{}
	fresh := map[string]bool{} // Machines with a token not due for rotation
	var stale []string
	gone := 0 // tokens of Machines that no longer exist: orphans
	r := c.FSM.Reader()
	for _, t := range c.FSM.BootstrapTokens() {
		known[t.GetTokenId()] = true
		if t.GetCluster() != name {
			continue
		}
		exp := t.GetExpiresAt().AsTime()
		if !now.Before(exp) || !joining[t.GetMachine()] {
			if r.Get("Machine", t.GetMachine()) == nil {
				gone++
			}
			stale = append(stale, t.GetTokenId())
			delete(known, t.GetTokenId())
			continue
		}
		if exp.Sub(now) > ttl/3 {
			fresh[t.GetMachine()] = true
		}
	}
	for _, id := range stale {
		if err := k.DeleteBootstrapToken(ctx, id); err != nil {
			return fmt.Errorf("deleting bootstrap token %s: %w", id, err)
		}
	}
	c.Metrics.OrphansRemoved(controller.OrphanBootstrapToken, gone)
	if gone > 0 {
		c.Recorder.Record("Cluster", name, state.EventNormal, "OrphanBootstrapTokensDeleted",
			fmt.Sprintf("deleted %d bootstrap token(s) of Machines that are gone", gone))
	}
	if len(stale) > 0 {
		c.log().Info("deleted used or expired bootstrap tokens", "cluster", name, "tokens", stale)
		if err := c.propose(ctx, &roostv1.Command{Command: &roostv1.Command_DeleteBootstrapTokens{DeleteBootstrapTokens: &roostv1.DeleteBootstrapTokens{TokenIds: stale}}}); err != nil {
			return err
		}
	}
	for _, m := range machines {
		mn := m.GetMetadata().GetName()
		if !joining[mn] || fresh[mn] {
			continue
		}
		id, secret, err := kube.GenerateToken()
		if err != nil {
			return err
		}
		exp := now.Add(ttl)
		if err := k.CreateBootstrapToken(ctx, id, secret, exp, fmt.Sprintf("Roost: kubelet TLS bootstrap of Machine %s", mn)); err != nil {
			return fmt.Errorf("creating a bootstrap token for Machine %s: %w", mn, err)
		}
		known[id] = true
		if err := c.propose(ctx, &roostv1.Command{Command: &roostv1.Command_PutBootstrapToken{PutBootstrapToken: &roostv1.PutBootstrapToken{
			Token: &roostv1.BootstrapToken{Machine: mn, Cluster: name, TokenId: id, Secret: secret, ExpiresAt: timestamppb.New(exp)}}}}); err != nil {
			return err
		}
		c.log().Info("created a bootstrap token", "cluster", name, "machine", mn, "token", id, "expires", exp.UTC().Format(time.RFC3339))
	}
	inCluster, err := k.ListBootstrapTokens(ctx)
	if err != nil {
		return err
	}
	// A token another pass just created is in the cluster before it is in
	// the state: only a token unknown for orphanGrace is deleted.
	for _, t := range c.FSM.BootstrapTokens() {
		known[t.GetTokenId()] = true
	}
	c.mu.Lock()
	if c.orphans == nil {
		c.orphans = map[string]time.Time{}
	}
	var orphans []string
	for _, t := range inCluster {
		if known[t.ID] {
			delete(c.orphans, t.ID)
			continue
		}
		first, seen := c.orphans[t.ID]
		if !seen {
			c.orphans[t.ID] = now
		} else if now.Sub(first) >= orphanGrace {
			orphans = append(orphans, t.ID)
			delete(c.orphans, t.ID)
		}
	}
	c.mu.Unlock()
	for _, id := range orphans {
		c.log().Info("deleting a bootstrap token the hub does not hold", "cluster", name, "token", id)
		if err := k.DeleteBootstrapToken(ctx, id); err != nil {
			return err
		}
		c.Metrics.OrphansRemoved(controller.OrphanBootstrapToken, 1)
		c.Recorder.Record("Cluster", name, state.EventNormal, "OrphanBootstrapTokenDeleted",
			fmt.Sprintf("deleted bootstrap token %s: a Roost-labelled token Secret the hub does not hold", id))
	}
	return nil
}

// orphanGrace is how long a Roost-labelled token Secret the hub does not
// hold is left alone before it is deleted.
const orphanGrace = time.Minute
