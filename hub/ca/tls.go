package ca

import (
	"github.com/roostfleet/roost/internal/tlsconfig"

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
	cert, err := tlsconfig.KeyPair(certPEM, keyPEM)
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

// MutualTLS returns the TLS configuration for Raft traffic between members,
// usable both to listen (tls.NewListener) and to dial (tls.Dial): TLS 1.3
// minimum, both sides present a certificate signed by ca, and both sides
// refuse a peer whose certificate is not RoleMember. certPEM must itself be
// a RoleMember certificate.
func MutualTLS(certPEM, keyPEM []byte, ca *x509.CertPool) (*tls.Config, error) {
	if ca == nil {
		return nil, errors.New("ca: mutual TLS: no CA pool")
	}
	cert, err := tlsconfig.KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("ca: mutual TLS: %w", err)
	}
	if r := tlsconfig.RoleOf(cert.Leaf); r != RoleMember {
		return nil, fmt.Errorf("ca: mutual TLS: own certificate has role %q, want %q", r, RoleMember)
	}
	return &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{cert},
		RootCAs:          ca,
		ClientCAs:        ca,
		ClientAuth:       tls.RequireAndVerifyClientCert,
		ServerName:       ServerName,
		VerifyConnection: tlsconfig.RequirePeerRole(RoleMember, "peer"),
	}, nil
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
	role = tlsconfig.RoleOf(cert)
	if role == "" {
		return "", "", false
	}
	return role, cert.Subject.CommonName, true
}

// SerialHex is the form in which the hub records a certificate's serial
// number (User certificates, revocations): lower-case hex without leading
// zeros.
func SerialHex(cert *x509.Certificate) string {
	if cert == nil || cert.SerialNumber == nil {
		return ""
	}
	return cert.SerialNumber.Text(16)
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
