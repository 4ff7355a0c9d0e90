package clusters

import (
	"context"
	"fmt"
	"time"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// releaseHold is how long a finished release drain keeps its Node out of
// the uncordon pass while the release it prepared has not happened; after
// that (the release was given up) the Node is made schedulable again.
const releaseHold = 5 * time.Minute

// PrepareRelease cordons and drains the Nodes of worker Machines ms before
// they are released (a pool unassign, a Machine delete, a pool scaling
// down), as Cluster API drains a Machine's Node before deleting it. It
// does not wait: done is true once every Node is drained; Machines of no
// Cluster, or whose Node never registered, need nothing. While drains run
// it returns (false, nil). An error names the Machine and Node whose drain
// failed (blocked by a PodDisruptionBudget, past the Cluster's
// drainTimeout, or the Cluster API unreachable); that Node is schedulable
// again and the next call drains it afresh. Each Machine's Drained
// condition records the outcome. Call CancelRelease to give the release
// up.
func (c *Controller) PrepareRelease(ctx context.Context, ms []*roostv1.Machine) (bool, error) {
	ready := true
	for _, m := range ms {
		name, node, clName := m.GetMetadata().GetName(), m.GetStatus().GetNodeName(), m.GetStatus().GetCluster()
		if clName == "" || node == "" {
			continue
		}
		c.mu.Lock()
		j := c.releases[name]
		c.mu.Unlock()
		if j == nil || j.node != node {
			if err := c.startRelease(ctx, m); err != nil {
				return false, err
			}
			ready = false
			continue
		}
		select {
		case <-j.done:
		default:
			ready = false
			continue
		}
		if j.err != nil {
			c.mu.Lock()
			if c.releases[name] == j {
				delete(c.releases, name)
			}
			c.mu.Unlock()
			msg := fmt.Sprintf("draining Node %s before the release of Machine %s failed: %v", node, name, j.err)
			if perr := c.setDrained(ctx, m, "False", "DrainBlocked", msg); perr != nil {
				c.log().Warn("recording Drained failed", "machine", name, "err", perr)
			}
			return false, fmt.Errorf("%s", msg)
		}
		if err := c.setDrained(ctx, m, "True", "Drained", fmt.Sprintf("Node %s is cordoned and drained for the Machine's release", node)); err != nil {
			return false, err
		}
	}
	return ready, nil
}

// startRelease starts the drain of m's Node before its release, once the
// Cluster API answers.
func (c *Controller) startRelease(ctx context.Context, m *roostv1.Machine) error {
	name, node, clName := m.GetMetadata().GetName(), m.GetStatus().GetNodeName(), m.GetStatus().GetCluster()
	cl, err := c.cluster(clName)
	if err != nil {
		return fmt.Errorf("Machine %s: %w", name, err)
	}
	if err := c.checkCluster(ctx, clName); err != nil {
		msg := fmt.Sprintf("Cluster %s API is unreachable, so Node %s of Machine %s cannot be drained before its release: %v", clName, node, name, err)
		if perr := c.setDrained(ctx, m, "False", "ClusterUnreachable", msg); perr != nil {
			c.log().Warn("recording Drained failed", "machine", name, "err", perr)
		}
		return fmt.Errorf("%s", msg)
	}
	cc, err := c.client(cl)
	if err != nil {
		return fmt.Errorf("Machine %s: %w", name, err)
	}
	timeout := drainTimeout(cl)
	j := c.startDrain(cc.client, node, "release of Machine "+name, timeout)
	c.mu.Lock()
	if old := c.releases[name]; old != nil {
		old.cancel()
	}
	if c.releases == nil {
		c.releases = map[string]*drainJob{}
	}
	c.releases[name] = j
	c.mu.Unlock()
	c.log().Info("draining Node before its Machine is released", "node", node, "machine", name, "timeout", timeout)
	return c.setDrained(ctx, m, "False", "Draining", fmt.Sprintf("cordoning and draining Node %s before the Machine is released (timeout %s)", node, timeout))
}

// CancelRelease gives up the releases PrepareRelease prepared for ms:
// running drains stop, and their Nodes become schedulable again (at once
// for a drain that was still running, by the next uncordon pass for one
// that had finished).
func (c *Controller) CancelRelease(ms []*roostv1.Machine) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range ms {
		if j := c.releases[m.GetMetadata().GetName()]; j != nil {
			j.cancel()
			delete(c.releases, m.GetMetadata().GetName())
		}
	}
}

// releasing says whether Machine name's Node is held cordoned for its
// release: its drain runs, or finished less than releaseHold ago.
func (c *Controller) releasing(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.releases[name]
	if j == nil {
		return false
	}
	select {
	case <-j.done:
		return j.err == nil && c.now().Sub(j.finished) < releaseHold
	default:
		return true
	}
}

// forgetReleases drops the release drains of Machines that are gone (the
// release happened) and those that finished releaseHold ago (the release
// was given up, or its failure was never asked about).
func (c *Controller) forgetReleases() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, j := range c.releases {
		if _, err := c.FSM.Get("Machine", name); err != nil {
			j.cancel()
			delete(c.releases, name)
			continue
		}
		select {
		case <-j.done:
			// A failed drain stays until PrepareRelease reports it.
			if c.now().Sub(j.finished) >= releaseHold {
				delete(c.releases, name)
			}
		default:
		}
	}
}
