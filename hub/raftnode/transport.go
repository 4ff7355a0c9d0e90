package raftnode

import (
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// tlsStreamLayer is a raft.StreamLayer whose connections are mutual TLS.
// The tls.Config decides which peers are accepted (hub/ca.MutualTLS accepts
// only member certificates of the hub CA).
type tlsStreamLayer struct {
	net.Listener
	advertise net.Addr
	config    *tls.Config
}

// Listen binds the Raft transport's TCP port at bind (host:port), for
// Config.Listener: a member binds every port before it writes anything to
// its data dir. With advertise empty, the bound address is what peers
// dial, so it must be a concrete host (not 0.0.0.0 or ::).
func Listen(bind, advertise string) (net.Listener, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == "" {
		if err := checkAdvertisable(ln.Addr()); err != nil {
			ln.Close()
			return nil, err
		}
	}
	return ln, nil
}

func checkAdvertisable(a net.Addr) error {
	if tcp, ok := a.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		return errors.New("raft address " + a.String() + " is not advertisable: give a concrete host")
	}
	return nil
}

// newTLSStreamLayer serves TLS on ln (handshakeListener: each handshake
// within timeout, at most maxPending at once; zero takes the defaults) and
// advertises advertise (host:port; empty means the bound address). It
// closes ln when it fails.
func newTLSStreamLayer(ln net.Listener, advertise string, config *tls.Config, timeout time.Duration, maxPending int, log hclog.Logger) (*tlsStreamLayer, error) {
	var adv net.Addr = ln.Addr()
	if advertise != "" {
		a, err := net.ResolveTCPAddr("tcp", advertise)
		if err != nil {
			ln.Close()
			return nil, err
		}
		adv = a
	}
	if err := checkAdvertisable(adv); err != nil {
		ln.Close()
		return nil, err
	}
	return &tlsStreamLayer{Listener: newHandshakeListener(ln, config, timeout, maxPending, log), advertise: adv, config: config}, nil
}

// Addr is the advertised address.
func (t *tlsStreamLayer) Addr() net.Addr { return t.advertise }

// Dial opens a TLS connection to a peer's Raft address within timeout.
func (t *tlsStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	return tls.DialWithDialer(d, "tcp", string(address), t.config)
}
