package clusters

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// TestStepBoundsProposals: a tick over many new Clusters (no credentials:
// each needs a status write) keeps at most MaxProposals of the
// controller's commands in Raft at once, and still writes every status.
func TestStepBoundsProposals(t *testing.T) {
	const clusters, bound = 40, 3
	fsm := state.New(state.Options{})
	var objs []*roostv1.Object
	var uids []string
	for i := range clusters {
		objs = append(objs, &roostv1.Object{Kind: &roostv1.Object_Cluster{Cluster: &roostv1.Cluster{
			Metadata: &roostv1.ObjectMeta{Name: fmt.Sprintf("c%02d", i)},
			Spec:     &roostv1.ClusterSpec{ApiEndpoint: "https://10.0.0.1:6443", KubernetesVersion: "v1.34.4"},
		}}})
		uids = append(uids, fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
	}
	var (
		applyMu sync.Mutex
		index   uint64
	)
	apply := func(c *roostv1.Command) error {
		applyMu.Lock()
		defer applyMu.Unlock()
		c.Time = timestamppb.New(time.Unix(1_700_000_000, 0))
		data, err := proto.Marshal(c)
		if err != nil {
			return err
		}
		index++
		return fsm.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}).(*state.ApplyResult).Err
	}
	if err := apply(&roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{Objects: objs, Uids: uids}}}); err != nil {
		t.Fatal(err)
	}

	var inFlight, most, proposed atomic.Int64
	c := &Controller{
		IsLeader:     func() bool { return true },
		FSM:          fsm,
		MaxProposals: bound,
		Propose: func(ctx context.Context, cmd *roostv1.Command) error {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(5 * time.Millisecond) // a commit's round trip
			proposed.Add(1)
			return apply(cmd)
		},
	}
	if err := c.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := most.Load(); got > bound {
		t.Errorf("%d commands in Raft at once, want at most %d", got, bound)
	}
	if got := proposed.Load(); got != clusters {
		t.Errorf("%d status writes, want %d (one per Cluster)", got, clusters)
	}
	objsAfter, _, err := fsm.List("Cluster", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objsAfter {
		cond := state.FindCondition(o.GetCluster().GetStatus().GetConditions(), state.ClusterReachable)
		if cond.GetReason() != "NoCredentials" {
			t.Errorf("cluster %s: Reachable condition %v, want reason NoCredentials", o.GetCluster().GetMetadata().GetName(), cond)
		}
	}
}
