package raftnode

import (
	"container/list"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Defaults of Config.HandshakeTimeout and Config.MaxPendingHandshakes.
const (
	DefaultHandshakeTimeout     = 10 * time.Second
	DefaultMaxPendingHandshakes = 128
)

// pendingPerSource bounds the connections one source IP may have in their
// TLS handshake at once (a member opens a few); more are closed at once.
const pendingPerSource = 16

// handshakeListener is the Raft port's listener: it accepts TCP
// connections and runs each one's TLS handshake in a goroutine of its own
// under a deadline, so a client that sends nothing holds no one up and is
// closed when the deadline passes; Accept returns only connections whose
// handshake succeeded. Connections in their handshake are bounded: per
// source IP (pendingPerSource; beyond it a new connection is closed at
// once) and in all (max; beyond it the oldest pending connection is
// closed, so a flood of silent clients cannot keep a member out).
type handshakeListener struct {
	inner   net.Listener
	config  *tls.Config
	timeout time.Duration
	max     int
	log     hclog.Logger

	ready chan net.Conn
	errc  chan error
	done  chan struct{}
	once  sync.Once

	mu       sync.Mutex
	pending  *list.List // of *pendingConn, oldest first
	bySource map[string]int
	// dropped counts the connections closed without a handshake since the
	// last log line, logged at most once per logEvery.
	dropped  int
	lastErr  error
	lastFrom string
	logged   time.Time
}

// pendingConn is a connection in its handshake.
type pendingConn struct {
	conn    net.Conn
	source  string
	evicted bool // closed by admit to make room (under mu)
}

// handshakeLogEvery is the least time between two log lines about
// connections closed without a handshake.
const handshakeLogEvery = time.Minute

// newHandshakeListener serves TLS with config on inner; timeout and max
// of zero take the defaults.
func newHandshakeListener(inner net.Listener, config *tls.Config, timeout time.Duration, max int, log hclog.Logger) *handshakeListener {
	if timeout <= 0 {
		timeout = DefaultHandshakeTimeout
	}
	if max <= 0 {
		max = DefaultMaxPendingHandshakes
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	l := &handshakeListener{inner: inner, config: config, timeout: timeout, max: max, log: log,
		ready: make(chan net.Conn), errc: make(chan error, 1), done: make(chan struct{}),
		pending: list.New(), bySource: map[string]int{}}
	go l.acceptLoop()
	return l
}

// Accept returns the next connection whose TLS handshake succeeded.
func (l *handshakeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errc:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting and closes the connections in their handshake.
func (l *handshakeListener) Close() error {
	err := net.ErrClosed
	l.once.Do(func() {
		close(l.done)
		err = l.inner.Close()
		l.mu.Lock()
		for e := l.pending.Front(); e != nil; e = e.Next() {
			e.Value.(*pendingConn).conn.Close()
		}
		l.mu.Unlock()
	})
	return err
}

// Addr is the bound address.
func (l *handshakeListener) Addr() net.Addr { return l.inner.Addr() }

func (l *handshakeListener) acceptLoop() {
	var delay time.Duration
	for {
		c, err := l.inner.Accept()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			if !errors.Is(err, net.ErrClosed) {
				// Out of file descriptors and the like: wait, as net/http does.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				l.log.Warn("raft transport: accept failed; retrying", "error", err, "after", delay)
				select {
				case <-time.After(delay):
					continue
				case <-l.done:
					return
				}
			}
			select {
			case l.errc <- err:
			default:
			}
			return
		}
		delay = 0
		if e := l.admit(c); e != nil {
			go l.handshake(e)
		}
	}
}

// admit records c as pending and returns its entry, or closes it and
// returns nil when its source is at its bound. At the overall bound the
// oldest pending connection is closed to make room.
func (l *handshakeListener) admit(c net.Conn) *list.Element {
	src := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(src); err == nil {
		src = host
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bySource[src] >= min(pendingPerSource, l.max) {
		c.Close()
		l.droppedLocked(src, errors.New("too many connections in their TLS handshake from this address"))
		return nil
	}
	if l.pending.Len() >= l.max {
		oldest := l.pending.Remove(l.pending.Front()).(*pendingConn)
		oldest.evicted = true
		l.release(oldest.source)
		oldest.conn.Close()
		l.droppedLocked(oldest.source, errors.New("closed to make room: too many connections in their TLS handshake"))
	}
	l.bySource[src]++
	return l.pending.PushBack(&pendingConn{conn: c, source: src})
}

// release forgets one pending connection of src; called with l.mu held.
func (l *handshakeListener) release(src string) {
	if l.bySource[src]--; l.bySource[src] <= 0 {
		delete(l.bySource, src)
	}
}

// handshake runs e's TLS handshake within the timeout and hands the
// connection to Accept, or closes it.
func (l *handshakeListener) handshake(e *list.Element) {
	p := e.Value.(*pendingConn)
	tc := tls.Server(p.conn, l.config)
	p.conn.SetDeadline(time.Now().Add(l.timeout))
	err := tc.Handshake()
	l.mu.Lock()
	evicted := p.evicted
	if !evicted {
		l.pending.Remove(e)
		l.release(p.source)
	}
	if err != nil && !evicted {
		l.droppedLocked(p.source, err)
	}
	l.mu.Unlock()
	if err != nil {
		tc.Close()
		return
	}
	if err := p.conn.SetDeadline(time.Time{}); err != nil {
		tc.Close()
		return
	}
	select {
	case l.ready <- tc:
	case <-l.done:
		tc.Close()
	}
}

// droppedLocked counts a connection closed without a handshake and logs,
// at most once per handshakeLogEvery, how many there were; called with
// l.mu held.
func (l *handshakeListener) droppedLocked(src string, err error) {
	l.dropped++
	l.lastErr, l.lastFrom = err, src
	if now := time.Now(); now.Sub(l.logged) >= handshakeLogEvery {
		l.log.Warn("raft transport: closed connections that did not complete a TLS handshake",
			"count", l.dropped, "last_from", l.lastFrom, "last_error", l.lastErr, "timeout", l.timeout, "max_pending", l.max)
		l.dropped, l.logged = 0, now
	}
}
