package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/roostfleet/roost/agent/internal/fakehub"
	"github.com/roostfleet/roost/syncbuf"
)

func TestSimulate(t *testing.T) {
	ca := fakehub.NewCA(t)
	a, b := fakehub.Start(t, ca), fakehub.Start(t, ca)
	const n = 40
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncbuf.Buffer{}
	var c *Counters
	done := make(chan error, 1)
	go func() {
		var err error
		c, err = Run(ctx, Options{Count: n, Hubs: []string{a.Addr, b.Addr}, CA: ca.CertPEM, Token: a.Token, Seed: 9, EnrollParallel: 8, Progress: out})
		done <- err
	}()
	fakehub.Eventually(t, "all connected", func() bool { return strings.Contains(out.String(), "all 40 connected after") })
	ha, _, _, _, _, ea := a.Snapshot()
	hb, _, _, _, _, eb := b.Snapshot()
	if len(ha)+len(hb) != n || ea+eb != n {
		t.Errorf("hellos %d+%d, enrollments %d+%d, want %d", len(ha), len(hb), ea, eb, n)
	}
	if len(ha) == 0 || len(hb) == 0 {
		t.Errorf("agents did not spread over the members: %d and %d", len(ha), len(hb))
	}
	names := map[string]bool{}
	for _, h := range append(ha, hb...) {
		names[h.GetServerName()] = true
	}
	if len(names) != n {
		t.Errorf("%d distinct servers, want %d", len(names), n)
	}
	fakehub.Eventually(t, "a progress line with all connected", func() bool {
		return strings.Contains(out.String(), "started=40 enrolled=40 connected=40 reconnects=0 rebalanced=0 refused=0 rejected=0 failed=0")
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c.Enrolled.Load() != n || c.Refused.Load() != 0 {
		t.Errorf("counters: %s", c)
	}
}

func TestSimulateRefused(t *testing.T) {
	ca := fakehub.NewCA(t)
	h := fakehub.Start(t, ca)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Run(ctx, Options{Count: 3, Hubs: []string{h.Addr}, CA: ca.CertPEM, Token: "zzzzzz.zzzzzzzzzzzzzzzz"})
	if err == nil || !strings.Contains(err.Error(), "unknown enrollment token") || c.Refused.Load() != 3 {
		t.Fatalf("Run: %v, counters %s", err, c)
	}
	if _, err := Run(ctx, Options{Count: 0}); err == nil {
		t.Error("count 0 accepted")
	}
}
