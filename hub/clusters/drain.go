package clusters

import (
	"context"
	"fmt"
	"time"

	"github.com/roostfleet/roost/hub/kube"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// probeTimeout bounds CheckCluster's probe.
const probeTimeout = 5 * time.Second

// drainJob is one cordon-and-drain of a worker's Node, for the Lease with
// fencing token fencing or (fencing 0) before the Machine's release; it
// runs in its own goroutine.
type drainJob struct {
	fencing  uint64
	node     string
	cancel   context.CancelFunc
	done     chan struct{}
	err      error     // set before done closes
	finished time.Time // set before done closes
}

// drainTimeout is cl's spec.drainTimeout, default DefaultDrainTimeout.
func drainTimeout(cl *roostv1.Cluster) time.Duration {
	if d := cl.GetSpec().GetDrainTimeout(); d != nil && d.AsDuration() > 0 {
		return d.AsDuration()
	}
	return DefaultDrainTimeout
}

func (c *Controller) cluster(name string) (*roostv1.Cluster, error) {
	o, err := c.FSM.Get("Cluster", name)
	if err != nil {
		return nil, err
	}
	return o.GetCluster(), nil
}

// CheckCluster returns nil when Cluster name's API answers with the hub's
// credentials, else an error saying why not. It records the reason as
// m's Drained condition (ClusterUnreachable) when m is not nil.
func (c *Controller) CheckCluster(ctx context.Context, m *roostv1.Machine) error {
	name := m.GetStatus().GetCluster()
	err := c.checkCluster(ctx, name)
	if err != nil {
		msg := fmt.Sprintf("Cluster %s API is unreachable, so none of its workers reboots: %v", name, err)
		if perr := c.setDrained(ctx, m, "False", "ClusterUnreachable", msg); perr != nil {
			c.log().Warn("recording Drained failed", "machine", m.GetMetadata().GetName(), "err", perr)
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

func (c *Controller) checkCluster(ctx context.Context, name string) error {
	cl, err := c.cluster(name)
	if err != nil {
		return err
	}
	cc, err := c.client(cl)
	if err != nil {
		return err
	}
	// The probe runs aside so that a credential that never answers (or a
	// hung connection) cannot hold the caller past probeTimeout.
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	res := make(chan error, 1)
	go func() { _, err := cc.client.Probe(pctx); res <- err }()
	select {
	case err := <-res:
		return err
	case <-pctx.Done():
		return fmt.Errorf("no answer within %s: %w", probeTimeout, pctx.Err())
	}
}

// Drain cordons and drains worker Machine m's Node for the reboot Lease
// with the given fencing token. It does not wait: done is true once the
// Node is drained (at once when m has no Node); a non-nil error says the
// drain failed (blocked by a PodDisruptionBudget, timed out, or the API
// failed), the Node was uncordoned again, and the caller should release
// the Lease. While the drain runs it returns (false, nil). A new fencing
// token starts a new drain. m's Drained condition records each outcome.
func (c *Controller) Drain(ctx context.Context, m *roostv1.Machine, fencing uint64) (bool, error) {
	node, server := m.GetStatus().GetNodeName(), m.GetSpec().GetServer()
	if node == "" {
		return true, nil
	}
	cl, err := c.cluster(m.GetStatus().GetCluster())
	if err != nil {
		return false, err
	}
	cc, err := c.client(cl)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	j := c.drains[server]
	if j == nil || j.fencing != fencing || j.node != node {
		if j != nil {
			j.cancel()
		}
		j = c.startDrain(cc.client, node, fmt.Sprintf("reboot lease %d", fencing), drainTimeout(cl))
		j.fencing = fencing
		if c.drains == nil {
			c.drains = map[string]*drainJob{}
		}
		c.drains[server] = j
		c.mu.Unlock()
		c.log().Info("draining Node for a reboot Lease", "node", node, "machine", m.GetMetadata().GetName(), "fencing", fencing, "timeout", drainTimeout(cl))
		return false, c.setDrained(ctx, m, "False", "Draining", fmt.Sprintf("cordoning and draining Node %s (timeout %s)", node, drainTimeout(cl)))
	}
	c.mu.Unlock()
	select {
	case <-j.done:
	default:
		return false, nil
	}
	if j.err != nil {
		c.mu.Lock()
		if c.drains[server] == j {
			delete(c.drains, server) // the next Lease drains afresh
		}
		c.mu.Unlock()
		msg := j.err.Error()
		if perr := c.setDrained(ctx, m, "False", "DrainBlocked", msg); perr != nil {
			return false, perr
		}
		return false, j.err
	}
	return true, c.setDrained(ctx, m, "True", "Drained", fmt.Sprintf("Node %s is cordoned and drained for the reboot", node))
}

// startDrain runs a drain in the background, cordoning node with reason
// (kube.CordonAnnotation); on failure it uncordons the Node, so a Lease or
// a release that is given up leaves the Node schedulable.
func (c *Controller) startDrain(k *kube.Client, node, reason string, timeout time.Duration) *drainJob {
	ctx, cancel := context.WithCancel(context.Background())
	j := &drainJob{node: node, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(j.done)
		err := k.Drain(ctx, node, timeout, reason)
		if err != nil {
			uctx, ucancel := context.WithTimeout(context.Background(), requestTimeout)
			if uerr := k.Uncordon(uctx, node); uerr != nil {
				c.log().Warn("uncordoning after a failed drain failed", "node", node, "err", uerr)
			}
			ucancel()
		}
		j.err, j.finished = err, c.now()
	}()
	return j
}
