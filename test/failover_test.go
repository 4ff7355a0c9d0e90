package test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/test/harness"
)

const (
	failoverObjects  = 500
	failoverKillAt   = 250
	maxWriteGap      = 5 * time.Second
	perAttemptLimit  = 3 * time.Second
	perObjectLimit   = 20 * time.Second
	survivorCatchUp  = 30 * time.Second
	failoverAttempts = 50 * time.Millisecond // pause between attempts of one object
)

// TestFailoverKeepsAcknowledgedWrites is the high-availability acceptance
// test: three roost-hub processes on loopback form one cluster; a client
// (client.Dial over all three API addresses, so with its own failover and
// retries) applies 500 Cluster objects one after another, retrying each
// until it succeeds or perObjectLimit passes; when the 250th starts, the
// leader is killed with SIGKILL. Every apply that returned success must be
// on both survivors, and writes must succeed again within 5 s of the kill:
// the gap is measured from the kill to the first success of an apply
// started after it. Raft runs with roost-hub's default timeouts.
func TestFailoverKeepsAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test (three roost-hub processes): run `make test-root`")
	}
	c := harness.StartCluster(t, 3, harness.ClusterOptions{})
	hc := c.Client(t)
	leader := c.Leader(t)
	harness.Report(t, "3 members healthy; leader %s (API %s)", leader.NodeID, leader.APIAddr)
	for _, m := range c.Members {
		if line, err := m.MetricLine("roost_build_info{"); err != nil || !strings.Contains(line, fmt.Sprintf("rules_version=\"%d\"", state.RulesVersion)) || !strings.HasSuffix(line, "} 1") {
			t.Errorf("member %s roost_build_info: %q %v", m.NodeID, line, err)
		}
	}

	var (
		mu     sync.Mutex
		killAt time.Time
	)
	trigger, killed := make(chan struct{}), make(chan struct{})
	var elected time.Duration // kill → a survivor's /metrics says it leads
	go func() {
		defer close(killed)
		<-trigger
		mu.Lock()
		killAt = time.Now()
		mu.Unlock()
		if err := leader.Kill(); err != nil {
			t.Errorf("kill leader: %v", err)
			return
		}
		for deadline := time.Now().Add(perObjectLimit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			for _, m := range c.Members {
				if m != leader && m.LeadsByMetrics() {
					elected = time.Since(killAt)
					return
				}
			}
		}
	}()
	killTime := func() time.Time { mu.Lock(); defer mu.Unlock(); return killAt }

	ctx := harness.Context(t, 10*time.Minute)
	var (
		acked      []string
		lost       []string
		errCodes   = map[string]int{}
		firstAfter time.Time
		maxLatency time.Duration
	)
	start := time.Now()
	for i := range failoverObjects {
		if i == failoverKillAt {
			close(trigger)
		}
		name := fmt.Sprintf("fo-%03d", i)
		obj := clusterObject(name, "v1.34.4")
		deadline := time.Now().Add(perObjectLimit)
		for {
			attempt := time.Now()
			actx, cancel := context.WithTimeout(ctx, perAttemptLimit)
			_, err := hc.Apply(actx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{obj}})
			cancel()
			if err == nil {
				acked = append(acked, name)
				maxLatency = max(maxLatency, time.Since(attempt))
				if k := killTime(); !k.IsZero() && firstAfter.IsZero() && attempt.After(k) {
					firstAfter = time.Now()
				}
				break
			}
			errCodes[apierror.Code(err).String()]++
			if time.Now().After(deadline) || ctx.Err() != nil {
				lost = append(lost, name)
				t.Logf("gave up on %s after %s: %v", name, perObjectLimit, err)
				break
			}
			time.Sleep(failoverAttempts)
		}
	}
	elapsed := time.Since(start)
	<-killed
	if !leader.Wait(harness.StopTimeout) {
		t.Fatalf("killed leader %s has not exited", leader.NodeID)
	}

	harness.Report(t, "applied %d objects in %s: %d acknowledged, %d given up; failed attempts by code: %s; slowest successful attempt %s",
		failoverObjects, elapsed.Round(time.Millisecond), len(acked), len(lost), formatCounts(errCodes), maxLatency.Round(time.Millisecond))
	if firstAfter.IsZero() {
		t.Fatalf("no apply started after the kill of %s succeeded", leader.NodeID)
	}
	gap := firstAfter.Sub(killTime())
	harness.Report(t, "write gap after SIGKILL of leader %s: %s (limit %s; default Raft timeouts); a survivor led after %s",
		leader.NodeID, gap.Round(time.Millisecond), maxWriteGap, elected.Round(time.Millisecond))
	if gap >= maxWriteGap {
		t.Errorf("writes resumed %s after the leader was killed, want < %s", gap.Round(time.Millisecond), maxWriteGap)
	}
	if len(lost) > 0 {
		t.Errorf("%d applies never succeeded within %s each: %v", len(lost), perObjectLimit, lost)
	}

	newLeader := c.Leader(t)
	harness.Report(t, "new leader %s", newLeader.NodeID)
	for _, m := range c.Members {
		if m == leader {
			continue
		}
		mc := c.Client(t, m.APIAddr)
		var missing []string
		var have int
		cctx, cancel := context.WithTimeout(ctx, survivorCatchUp)
		err := harness.Poll(cctx, func() error {
			resp, err := mc.List(cctx, &roostv1.ListRequest{Kind: "Cluster", Consistency: roostv1.Consistency_CONSISTENCY_STALE})
			if err != nil {
				return err
			}
			present := map[string]bool{}
			for _, o := range resp.GetObjects() {
				present[o.GetCluster().GetMetadata().GetName()] = true
			}
			have, missing = len(present), missing[:0]
			for _, n := range acked {
				if !present[n] {
					missing = append(missing, n)
				}
			}
			if len(missing) > 0 {
				return fmt.Errorf("%d acknowledged objects missing", len(missing))
			}
			return nil
		})
		cancel()
		if err != nil {
			t.Errorf("survivor %s: %v after waiting %s to catch up: %v", m.NodeID, err, survivorCatchUp, missing)
			continue
		}
		harness.Report(t, "survivor %s (stale read): all %d acknowledged objects present (%d Cluster objects in all)", m.NodeID, len(acked), have)
	}
}

func clusterObject(name, version string) *roostv1.Object {
	return &roostv1.Object{Kind: &roostv1.Object_Cluster{Cluster: &roostv1.Cluster{
		Metadata: &roostv1.ObjectMeta{Name: name},
		Spec:     &roostv1.ClusterSpec{ApiEndpoint: "https://10.0.0.1:6443", KubernetesVersion: version},
	}}}
}

func formatCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}
