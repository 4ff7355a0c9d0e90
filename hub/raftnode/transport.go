package raftnode

import (
	"crypto/tls"
	"errors"
	"net"
	"time"

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

// newTLSStreamLayer listens on bind (host:port) and advertises advertise
// (host:port; empty means the bound address).
func newTLSStreamLayer(bind, advertise string, config *tls.Config) (*tlsStreamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	var adv net.Addr = ln.Addr()
	if advertise != "" {
		a, err := net.ResolveTCPAddr("tcp", advertise)
		if err != nil {
			ln.Close()
			return nil, err
		}
		adv = a
	}
	if tcp, ok := adv.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		ln.Close()
		return nil, errors.New("raft address " + adv.String() + " is not advertisable: give a concrete host")
	}
	return &tlsStreamLayer{Listener: tls.NewListener(ln, config), advertise: adv, config: config}, nil
}

// Addr is the advertised address.
func (t *tlsStreamLayer) Addr() net.Addr { return t.advertise }

// Dial opens a TLS connection to a peer's Raft address within timeout.
func (t *tlsStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	return tls.DialWithDialer(d, "tcp", string(address), t.config)
}
