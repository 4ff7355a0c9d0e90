package ca

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// ServerTLS returns the hub API server's TLS configuration: TLS 1.3 minimum,
// the given certificate (normally a RoleMember certificate), and client
// certificates verified against ca when given but not required — the join
// and enroll RPCs are called without one, so every other RPC must check
// PeerRole itself.
func ServerTLS(certPEM, keyPEM []byte, ca *x509.CertPool) (*tls.Config, error) {
	if ca == nil {
		return nil, errors.New("ca: server TLS: no CA pool")
	}
	cert, err := keyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("ca: server TLS: %w", err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    ca,
	}, nil
}

// ClientTLS returns the TLS configuration for dialing the hub API: TLS 1.3
// minimum, server verified against ca under ServerName and required to hold
// a RoleMember certificate. certPEM and keyPEM are the client certificate;
// pass both nil to dial without one (the join/enroll call).
func ClientTLS(certPEM, keyPEM []byte, ca *x509.CertPool) (*tls.Config, error) {
	if ca == nil {
		return nil, errors.New("ca: client TLS: no CA pool")
	}
	cfg := &tls.Config{
		MinVersion:       tls.VersionTLS13,
		RootCAs:          ca,
		ServerName:       ServerName,
		VerifyConnection: requirePeerRole(RoleMember, "server"),
	}
	switch {
	case len(certPEM) == 0 && len(keyPEM) == 0:
	case len(certPEM) == 0 || len(keyPEM) == 0:
		return nil, errors.New("ca: client TLS: certificate and key must be given together")
	default:
		cert, err := keyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("ca: client TLS: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// MutualTLS returns the TLS configuration for Raft traffic between members,
// usable both to listen (tls.NewListener) and to dial (tls.Dial): TLS 1.3
// minimum, both sides present a certificate signed by ca, and both sides
// refuse a peer whose certificate is not RoleMember. certPEM must itself be
// a RoleMember certificate.
func MutualTLS(certPEM, keyPEM []byte, ca *x509.CertPool) (*tls.Config, error) {
	if ca == nil {
		return nil, errors.New("ca: mutual TLS: no CA pool")
	}
	cert, err := keyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("ca: mutual TLS: %w", err)
	}
	if r := RoleOf(cert.Leaf); r != RoleMember {
		return nil, fmt.Errorf("ca: mutual TLS: own certificate has role %q, want %q", r, RoleMember)
	}
	return &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{cert},
		RootCAs:          ca,
		ClientCAs:        ca,
		ClientAuth:       tls.RequireAndVerifyClientCert,
		ServerName:       ServerName,
		VerifyConnection: requirePeerRole(RoleMember, "peer"),
	}, nil
}

// requirePeerRole returns a VerifyConnection hook that refuses a peer
// without a verified certificate of the given role. It runs after the
// standard chain verification, on either side of the handshake.
func requirePeerRole(role, who string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
			return fmt.Errorf("roost: %s presented no verified certificate", who)
		}
		leaf := cs.VerifiedChains[0][0]
		if r := RoleOf(leaf); r != role {
			return fmt.Errorf("roost: %s certificate %q has role %q, want %q", who, leaf.Subject.CommonName, r, role)
		}
		return nil
	}
}

func keyPair(certPEM, keyPEM []byte) (tls.Certificate, error) {
	if len(certPEM) == 0 {
		return tls.Certificate{}, errors.New("no certificate")
	}
	if len(keyPEM) == 0 {
		return tls.Certificate{}, errors.New("no private key")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("key pair: %w", err)
	}
	// tls.X509KeyPair fills Leaf since Go 1.23; parse defensively anyway.
	if cert.Leaf == nil {
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("parse certificate: %w", err)
		}
		cert.Leaf = leaf
	}
	return cert, nil
}

// PeerCertificate returns the verified client certificate of the gRPC peer
// in ctx (a server handler's context), or false when the peer presented
// none or the connection is not TLS.
func PeerCertificate(ctx context.Context) (*x509.Certificate, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok || p == nil {
		return nil, false
	}
	var state *tls.ConnectionState
	switch info := p.AuthInfo.(type) {
	case credentials.TLSInfo:
		state = &info.State
	case *credentials.TLSInfo:
		if info != nil {
			state = &info.State
		}
	}
	if state == nil || len(state.VerifiedChains) == 0 || len(state.VerifiedChains[0]) == 0 {
		return nil, false
	}
	return state.VerifiedChains[0][0], true
}

// PeerRole returns the role and common name of the gRPC peer in ctx, taken
// from its verified client certificate. ok is false when the peer presented
// no verified certificate (e.g. the join/enroll call) or its certificate
// carries no Roost role; callers then treat the peer as anonymous.
func PeerRole(ctx context.Context) (role string, commonName string, ok bool) {
	cert, found := PeerCertificate(ctx)
	if !found {
		return "", "", false
	}
	role = RoleOf(cert)
	if role == "" {
		return "", "", false
	}
	return role, cert.Subject.CommonName, true
}

// ReadFiles reads a PEM certificate and key (certFile, keyFile) and a PEM
// CA bundle (caFile) as ServerTLS, ClientTLS and MutualTLS take them, e.g.
// a hub member's DATA_DIR/tls/member.crt, member.key and ca.crt. Errors:
// a file cannot be read, or caFile holds no PEM certificate.
func ReadFiles(certFile, keyFile, caFile string) (certPEM, keyPEM []byte, pool *x509.CertPool, err error) {
	if certPEM, err = os.ReadFile(certFile); err != nil {
		return nil, nil, nil, err
	}
	if keyPEM, err = os.ReadFile(keyFile); err != nil {
		return nil, nil, nil, err
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, nil, nil, err
	}
	pool = x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	return certPEM, keyPEM, pool, nil
}
