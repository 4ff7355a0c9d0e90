package api

import (
	"errors"
	"net"
	"time"

	"google.golang.org/grpc/credentials"
)

// LimitHandshakes returns creds whose server-side TLS handshakes run at
// most n at once (n < 1 means 1). A connection waits for its turn up to
// wait (the handshake timeout), then is closed without a handshake; the
// client retries, as agents do with backoff.
//
// A handshake costs a member far more CPU than anything else an agent
// does (TLS 1.3 with the hybrid X25519MLKEM768 key exchange, a signature,
// a client certificate chain to verify), and Go's scheduler runs runnable
// goroutines first come, first served: when thousands of agents reconnect
// at once (their member died) unbounded handshakes filled the run queue,
// Raft's heartbeats waited behind them, and members held elections that
// ended more streams (10,000 simulated Servers, 3 members on 2 cores: half
// of a member's CPU in handshakes, reconnects growing by 1,000 a minute for
// good). A handshake also waits for its client (two round trips), so n
// is HandshakesPerCPU × GOMAXPROCS: enough to overlap those waits, few
// enough that the run queue stays short.
//
// m, when not nil, counts handshakes by result (ok, failed, shed).
func LimitHandshakes(creds credentials.TransportCredentials, n int, wait time.Duration, m *Metrics) credentials.TransportCredentials {
	return &limitedCreds{TransportCredentials: creds, slots: make(chan struct{}, max(n, 1)), wait: wait, m: m}
}

// HandshakesPerCPU is how many API handshakes a member runs at once per
// CPU (GOMAXPROCS). At 1 per CPU a member that 10,000 simulated agents
// enrolled with at once completed 38 handshakes a second and shed
// 100,000 (each held its slot while its busy client answered); at 1,000s
// of concurrent handshakes (no limit) Raft starved, see above.
const HandshakesPerCPU = 32

// errHandshakeShed closes a connection that waited too long for its turn.
var errHandshakeShed = errors.New("too many TLS handshakes in progress; retry later")

type limitedCreds struct {
	credentials.TransportCredentials
	slots chan struct{}
	wait  time.Duration
	m     *Metrics
}

// ServerHandshake waits for a slot (at most l.wait), then runs the
// handshake of the wrapped credentials.
func (l *limitedCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	t := time.NewTimer(l.wait)
	select {
	case l.slots <- struct{}{}:
		t.Stop()
	case <-t.C:
		l.m.countHandshake("shed")
		return nil, nil, errHandshakeShed
	}
	defer func() { <-l.slots }()
	c, info, err := l.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		l.m.countHandshake("failed")
	} else {
		l.m.countHandshake("ok")
	}
	return c, info, err
}

// Clone keeps the limit: the clone shares the slots.
func (l *limitedCreds) Clone() credentials.TransportCredentials {
	return &limitedCreds{TransportCredentials: l.TransportCredentials.Clone(), slots: l.slots, wait: l.wait, m: l.m}
}
