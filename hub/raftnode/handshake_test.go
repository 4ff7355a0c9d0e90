package raftnode

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/roostfleet/roost/hub/ca"
)

// memberTLS returns the mutual TLS configuration of a member of a fresh CA.
func memberTLS(t testing.TB) *tls.Config {
	t.Helper()
	now := time.Now()
	raw, err := ca.New("test", now)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ca.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := a.Issue(ca.Profile{CommonName: "m1", Role: ca.RoleMember, Lifetime: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ca.MutualTLS(cert, key, a.CertPool())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// newTestStream serves the Raft stream layer on loopback with the given
// handshake timeout and bound.
func newTestStream(t *testing.T, cfg *tls.Config, timeout time.Duration, maxPending int) *tlsStreamLayer {
	t.Helper()
	ln, err := Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := newTLSStreamLayer(ln, "", cfg, timeout, maxPending, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// dialFrom opens a TCP connection to addr from the loopback address from.
func dialFrom(from, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	return d.Dial("tcp", addr)
}

// closedWithin reports whether the server closes c (a read ends) within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// peerConnects dials s as a member would and checks that Accept returns
// the connection and that bytes pass both ways.
func peerConnects(t *testing.T, s *tlsStreamLayer) {
	t.Helper()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := s.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	start := time.Now()
	c, err := s.Dial(raft.ServerAddress(s.Listener.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatalf("a member cannot connect: %v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	select {
	case sc := <-accepted:
		defer sc.Close()
		buf := make([]byte, 4)
		if _, err := io.ReadFull(sc, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("read %q, %v", buf, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept did not return the member's connection")
	}
	t.Logf("a member connected in %v", time.Since(start).Round(time.Millisecond))
}

// A connection that sends no TLS handshake is closed once the deadline
// passes, and it holds up no other connection meanwhile.
func TestRaftPortClosesSilentConnectionAtDeadline(t *testing.T) {
	const timeout = 500 * time.Millisecond
	s := newTestStream(t, memberTLS(t), timeout, 0)
	addr := s.Listener.Addr().String()

	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	peerConnects(t, s) // not held up by the silent connection
	silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = silent.Read(make([]byte, 1))
	took := time.Since(start)
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("silent connection still open after %v (read: %v)", took, err)
	}
	if took < timeout-50*time.Millisecond || took > timeout+3*time.Second {
		t.Fatalf("silent connection closed after %v, want about %v", took, timeout)
	}
	t.Logf("silent connection closed after %v (deadline %v)", took.Round(time.Millisecond), timeout)

	// A client that starts TLS but never finishes is closed too.
	half, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	half.Write([]byte{0x16, 0x03, 0x01, 0x00, 0x10}) // a TLS record header, then nothing
	if !closedWithin(half, timeout+3*time.Second) {
		t.Fatal("a half-sent handshake was not closed after the deadline")
	}
}

// A flood of silent connections over the bounds is closed (beyond one
// address's share at once; beyond the overall bound the oldest first) and
// does not keep a member out.
func TestRaftPortFloodDoesNotKeepMemberOut(t *testing.T) {
	const maxPending = 32
	s := newTestStream(t, memberTLS(t), time.Minute, maxPending)
	addr := s.Listener.Addr().String()
	hl := s.Listener.(*handshakeListener)

	var mu sync.Mutex
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	hold := func(from string, n int) {
		for range n {
			c, err := dialFrom(from, addr)
			if err != nil {
				t.Errorf("dial from %s: %v", from, err)
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}
	// One address over its share: the connections beyond 16 are closed at once.
	hold("127.0.0.2", 40)
	closed := 0
	for _, c := range conns {
		if closedWithin(c, 50*time.Millisecond) {
			closed++
		}
	}
	if closed != 40-pendingPerSource {
		t.Errorf("%d of 40 connections from one address closed at once, want %d", closed, 40-pendingPerSource)
	}
	peerConnects(t, s)

	// Many addresses over the overall bound: the oldest are closed, the
	// pending ones stay within it, and a member still connects.
	start := time.Now()
	var wg sync.WaitGroup
	for i := 3; i < 13; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hold(fmt.Sprintf("127.0.0.%d", i), pendingPerSource)
		}()
	}
	wg.Wait()
	t.Logf("opened %d silent connections in %v", len(conns), time.Since(start).Round(time.Millisecond))
	time.Sleep(100 * time.Millisecond) // the last accepts
	hl.mu.Lock()
	n := hl.pending.Len()
	hl.mu.Unlock()
	if n > maxPending {
		t.Errorf("%d connections pending, want at most %d", n, maxPending)
	}
	peerConnects(t, s)
}
