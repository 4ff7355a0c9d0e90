package api

import (
	"context"
	"fmt"
	"time"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// releasePoll is how often drainForRelease checks the drains it waits for.
const releasePoll = time.Second

// drainForRelease cordons and drains the Nodes of the worker Machines ms
// before the caller releases them, and waits until they are drained (each
// bounded by its Cluster's drainTimeout) or ctx ends. On the leader only.
// When a drain fails, or ctx ends first, every Node is made schedulable
// again and the error (FailedPrecondition naming the Machine, the Node and
// the cause, or ctx's error) says that nothing was released.
func (s *Server) drainForRelease(ctx context.Context, ms []*roostv1.Machine) error {
	if s.drainer == nil || len(ms) == 0 {
		return nil
	}
	for {
		done, err := s.drainer.PrepareRelease(ctx, ms)
		if err != nil {
			s.drainer.CancelRelease(ms)
			return apierror.FailedPrecondition("%v; nothing was released and the Nodes are schedulable again "+
				"(fix the cause and retry, or release without draining: --force)", err)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			s.drainer.CancelRelease(ms)
			return fmt.Errorf("waiting for the drains before the release: %w; nothing was released", ctx.Err())
		case <-time.After(releasePoll):
		}
	}
}

// machinesOfServers returns the Machines of pool holding servers (those
// that exist; the release command itself refuses the rest).
func (s *Server) machinesOfServers(pool string, servers []string) ([]*roostv1.Machine, error) {
	want := map[string]bool{}
	for _, srv := range servers {
		want[srv] = true
	}
	objs, _, err := s.fsm.List("Machine", "")
	if err != nil {
		return nil, err
	}
	var out []*roostv1.Machine
	for _, o := range objs {
		if m := o.GetMachine(); want[m.GetSpec().GetServer()] && m.GetSpec().GetPool() == pool {
			out = append(out, m)
		}
	}
	return out, nil
}
