package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roostfleet/roost/internal/tlsconfig"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/hub/ca"
)

const enrollMethod = "/roost.v1.AgentService/Enroll"

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// lockedBuf is a log sink for concurrent writers.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func newTestGuard(l UnauthenticatedLimits) (*guard, *fakeClock, *lockedBuf) {
	clk := &fakeClock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	buf := &lockedBuf{}
	return newGuard(l, slog.New(slog.NewTextHandler(buf, nil)), clk.now), clk, buf
}

// from is a call's context from address ip (no certificate).
func from(ip string) context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}})
}

// withCert is a call's context from ip with a verified certificate of role.
func withCert(t *testing.T, ip, role string) context.Context {
	t.Helper()
	raw, err := ca.New("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	a, err := ca.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := a.Issue(ca.Profile{CommonName: "x", Role: role, Lifetime: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tlsconfig.ParseCertificatePEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000},
		AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}}})
}

// limited checks that err is ResourceExhausted naming want, with a
// RetryInfo detail of about wait.
func limited(t *testing.T, err error, want string, wait time.Duration) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), want) {
		t.Fatalf("admit: %v, want ResourceExhausted containing %q", err, want)
	}
	var got time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			got = ri.GetRetryDelay().AsDuration()
		}
	}
	if got < wait || got > wait+10*time.Millisecond {
		t.Errorf("RetryInfo delay %v, want about %v (message %q)", got, wait, st.Message())
	}
}

// Each source address has its bucket, all share one; a refusal says how
// long to wait, in the message and in RetryInfo; the metric counts both
// kinds of refusal.
func TestUnauthenticatedLimits(t *testing.T) {
	g, clk, _ := newTestGuard(UnauthenticatedLimits{PerAddress: 1, PerAddressBurst: 3, Global: 2, GlobalBurst: 5})
	for i := range 3 {
		if err := g.admit(from("10.0.0.1"), enrollMethod); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	limited(t, g.admit(from("10.0.0.1"), enrollMethod), "too many calls without a client certificate from 10.0.0.1 (limit 1/s, burst 3 per address); retry in 1.001s", time.Second)
	// Another address has its own bucket, but the global one runs out.
	for i := range 2 {
		if err := g.admit(from("10.0.0.2"), enrollMethod); err != nil {
			t.Fatalf("second address, call %d: %v", i, err)
		}
	}
	limited(t, g.admit(from("10.0.0.3"), enrollMethod), "to this hub member (limit 2/s, burst 5 from all addresses); retry in 501ms", 500*time.Millisecond)
	// IPv6 addresses of one /64 share a bucket.
	clk.add(time.Hour)
	for i := range 3 {
		if err := g.admit(from(fmt.Sprintf("2001:db8::%d", i+1)), enrollMethod); err != nil {
			t.Fatalf("IPv6 call %d: %v", i, err)
		}
	}
	limited(t, g.admit(from("2001:db8::99"), enrollMethod), "from 2001:db8::/64", time.Second)
	if err := g.admit(from("2001:db8:0:1::1"), enrollMethod); err != nil {
		t.Errorf("another /64: %v", err)
	}
	// The bucket refills at its rate.
	clk.add(time.Second)
	if err := g.admit(from("10.0.0.1"), enrollMethod); err != nil {
		t.Errorf("after a second: %v", err)
	}

	// Calls with a hub certificate (a member forwarding, an agent) and
	// methods that need one are not counted.
	for range 10 {
		if err := g.admit(withCert(t, "10.0.0.1", ca.RoleMember), enrollMethod); err != nil {
			t.Fatalf("a member's call: %v", err)
		}
		if err := g.admit(from("10.0.0.1"), "/roost.v1.HubService/Apply"); err != nil {
			t.Fatalf("a method that needs a certificate: %v", err)
		}
	}
	for reason, want := range map[string]float64{refusedAddressLimit: 2, refusedGlobalLimit: 1} {
		if got := testutil.ToFloat64(g.refusals.WithLabelValues(enrollMethod, reason)); got != want {
			t.Errorf("refusals{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}

// Refusals are logged with their source, at most one line per source per
// minute, which counts the refusals not logged since.
func TestUnauthenticatedRefusalsLogSampled(t *testing.T) {
	g, clk, buf := newTestGuard(UnauthenticatedLimits{PerAddress: 1, PerAddressBurst: 1, Global: 1000, GlobalBurst: 1000})
	for range 100 {
		g.admit(from("10.0.0.7"), enrollMethod)
		g.refused("10.0.0.8", enrollMethod, refusedToken, "enrollment token refused")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(buf.String(), "source=10.0.0.7 method=/roost.v1.AgentService/Enroll reason=rate_limited_address") ||
		!strings.Contains(buf.String(), "source=10.0.0.8 method=/roost.v1.AgentService/Enroll reason=token") {
		t.Fatalf("log after 2 × 100 refusals:\n%s\nwant one line per source", buf)
	}
	clk.add(time.Minute)
	g.refused("10.0.0.8", enrollMethod, refusedToken, "enrollment token refused")
	lines = strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[2], "refused_since_last_line=99") {
		t.Fatalf("log a minute later:\n%s\nwant a third line counting 99 refusals not logged", buf)
	}
	if got := testutil.ToFloat64(g.refusals.WithLabelValues(enrollMethod, refusedToken)); got != 101 {
		t.Errorf("refusals{reason=token} = %v, want 101 (every refusal counted)", got)
	}
}

// The sources are bounded: a source whose bucket is full again is
// dropped (it is then the same as a new one), and beyond MaxAddresses new
// sources meet the global bucket only.
func TestUnauthenticatedSourcesBounded(t *testing.T) {
	g, clk, buf := newTestGuard(UnauthenticatedLimits{PerAddress: 10, PerAddressBurst: 10, Global: 1e6, GlobalBurst: 1e6, MaxAddresses: 100})
	for i := range 1000 {
		if err := g.admit(from(fmt.Sprintf("10.1.%d.%d", i/256, i%256)), enrollMethod); err != nil {
			t.Fatalf("source %d: %v", i, err)
		}
	}
	if n := g.tracked(); n != 100 {
		t.Errorf("%d sources tracked, want 100 (MaxAddresses)", n)
	}
	if !strings.Contains(buf.String(), "new ones meet only the global limit") {
		t.Errorf("log lacks the full-map warning:\n%s", buf)
	}
	clk.add(sweepEvery + time.Second) // every bucket refilled
	if err := g.admit(from("10.2.0.1"), enrollMethod); err != nil {
		t.Fatal(err)
	}
	if n := g.tracked(); n != 1 {
		t.Errorf("%d sources tracked after the idle ones were swept, want 1", n)
	}
}
