package api

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/credentials"
)

// blockingCreds' handshakes wait on release and count how many run at once.
type blockingCreds struct {
	credentials.TransportCredentials
	release       chan struct{}
	running, peak atomic.Int32
}

func (b *blockingCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	n := b.running.Add(1)
	for p := b.peak.Load(); n > p && !b.peak.CompareAndSwap(p, n); p = b.peak.Load() {
	}
	<-b.release
	b.running.Add(-1)
	return c, nil, nil
}

func (b *blockingCreds) Clone() credentials.TransportCredentials { return b }

func TestLimitHandshakesRunsAtMostNAndShedsAfterTheWait(t *testing.T) {
	inner := &blockingCreds{release: make(chan struct{})}
	m := NewMetrics(prometheus.NewRegistry())
	creds := LimitHandshakes(inner, 2, time.Hour, m).Clone() // a clone shares the limit
	done := make(chan error, 5)
	for range 5 {
		go func() { _, _, err := creds.ServerHandshake(nil); done <- err }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for inner.running.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a third would have started by now
	if got := inner.peak.Load(); got != 2 {
		t.Fatalf("%d handshakes ran at once, want 2", got)
	}
	// A handshake that cannot start within the wait is shed.
	short := LimitHandshakes(inner, 1, 20*time.Millisecond, m)
	go func() { _, _, err := short.ServerHandshake(nil); done <- err }()
	go func() { _, _, err := short.ServerHandshake(nil); done <- err }()
	var shed error
	select {
	case shed = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no handshake was shed")
	}
	if !errors.Is(shed, errHandshakeShed) {
		t.Fatalf("first to return: %v, want %v", shed, errHandshakeShed)
	}
	for inner.running.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(inner.release)
	for range 6 {
		if err := <-done; err != nil {
			t.Fatalf("handshake: %v", err)
		}
	}
	if got := inner.peak.Load(); got != 3 { // 2 of the first limiter, 1 of the second
		t.Errorf("peak %d handshakes at once, want 3", got)
	}
	if ok, sh := testutil.ToFloat64(m.handshakes.WithLabelValues("ok")), testutil.ToFloat64(m.handshakes.WithLabelValues("shed")); ok != 6 || sh != 1 {
		t.Errorf("counted %v ok and %v shed handshakes, want 6 and 1", ok, sh)
	}
}
