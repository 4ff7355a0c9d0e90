package hub_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// TestLinearizableReadsWriteNothing: linearizable Get, List,
// ListTrustedKeys and ListJoinTokens (and a snapshot save) verify
// leadership and read, and
// append nothing to the Raft log; each read sees the write before it.
func TestLinearizableReadsWriteNothing(t *testing.T) {
	const reads = 300
	h := startHub(t, t.TempDir(), hub.Options{
		HeartbeatMinTTL:   time.Hour, // no reachability writes
		LogVerifyInterval: -1,        // nor log verification checkpoints
	})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(h.AdminConfigPath()); return err == nil })
	c := dial(t, h.AdminConfigPath())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 5 {
		if _, err := c.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{cluster(fmt.Sprintf("c%d", i), "v1.34.4")}}); err != nil {
			t.Fatal(err)
		}
	}
	// The cluster controller records each new Cluster's status at once.
	waitFor(t, "cluster statuses", func() bool { return clustersHaveStatus(h, 5) })
	waitFor(t, "housekeeping writes", func() bool { return h.Node().AppliedIndex() == h.Node().LastIndex() })
	index := h.Node().LastIndex()
	start := time.Now()
	for i := range reads {
		var err error
		switch i % 4 {
		case 0:
			_, err = c.Get(ctx, &roostv1.GetRequest{Kind: "Cluster", Name: "c1"})
		case 1:
			var l *roostv1.ListResponse
			if l, err = c.List(ctx, &roostv1.ListRequest{Kind: "Cluster"}); err == nil && len(l.GetObjects()) != 5 {
				err = fmt.Errorf("%d clusters listed, want 5", len(l.GetObjects()))
			}
		case 2:
			_, err = c.ListTrustedKeys(ctx, &roostv1.ListTrustedKeysRequest{})
		case 3:
			_, err = c.ListJoinTokens(ctx, &roostv1.ListJoinTokensRequest{})
		}
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	elapsed := time.Since(start)
	snap, err := c.SaveSnapshot(ctx, &roostv1.SaveSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := snap.Recv(); err != nil {
			break
		}
	}
	if got := h.Node().LastIndex(); got != index {
		t.Fatalf("%d linearizable reads and a snapshot save moved the Raft last index from %d to %d", reads, index, got)
	}
	t.Logf("%d linearizable reads in %s (%s each); the Raft last index stayed at %d", reads, elapsed.Round(time.Millisecond), (elapsed / reads).Round(time.Microsecond), index)
	// A read sees the write acknowledged before it.
	for i := range 20 {
		v := fmt.Sprintf("v1.34.%d", i)
		if _, err := c.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{cluster("c1", v)}}); err != nil {
			t.Fatal(err)
		}
		got, err := c.Get(ctx, &roostv1.GetRequest{Kind: "Cluster", Name: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		if g := got.GetObject().GetCluster().GetSpec().GetKubernetesVersion(); g != v {
			t.Fatalf("read after writing %s: %s", v, g)
		}
	}
}
