package hub_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/roostfleet/roost/hub"
)

// Acceptance 6 of issue 24, on a running hub: a connection to the API or
// the Raft port that sends no TLS handshake, or to the HTTP port that
// sends no request, is closed once Options.HandshakeTimeout passes.
func TestSilentConnectionsClosedAtHandshakeTimeout(t *testing.T) {
	const timeout = 500 * time.Millisecond
	h := startHub(t, t.TempDir(), hub.Options{HandshakeTimeout: timeout, HTTPAddr: "127.0.0.1:0"})
	for port, addr := range map[string]string{"API": h.APIAddr(), "Raft": h.Node().Addr(), "HTTP": h.HTTPAddr()} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		c.SetReadDeadline(start.Add(10 * time.Second))
		_, err = c.Read(make([]byte, 1))
		took := time.Since(start)
		c.Close()
		var ne net.Error
		if err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%s port: a silent connection is still open after %v", port, took)
			continue
		}
		if took < timeout-50*time.Millisecond || took > timeout+3*time.Second {
			t.Errorf("%s port: a silent connection was closed after %v, want about %v", port, took, timeout)
		}
		t.Logf("%s port: silent connection closed after %v", port, took.Round(time.Millisecond))
	}
}
