// Package tlsconfig holds what a client of the hub needs to speak TLS to
// it: the roles a Roost certificate carries (RoleAdmin, RoleMember,
// RoleAgent) and RoleOf to read them, the DNS name every hub member
// certificate carries (ServerName), and ClientTLS, the configuration for
// dialing the hub API. It is a leaf (standard library only), so client/
// and roostctl use it without linking the hub's certificate authority
// (hub/ca), which builds on it.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// Roles, carried in the certificate Subject Organization.
const (
	// RoleAdmin is an operator (roostctl). Client usage only.
	RoleAdmin = "roost:admins"
	// RoleMember is a hub member. Server and client usage: members serve the
	// API and Raft and dial each other.
	RoleMember = "roost:members"
	// RoleAgent is a Server's agent. Client usage only.
	RoleAgent = "roost:agents"
	// RoleOperator is a person who reads and does day-2 operations
	// (assign, cordon, approve, pause and resume rollouts, promote
	// images) but not tokens, users, members or snapshots. Client usage
	// only.
	RoleOperator = "roost:operators"
	// RoleViewer is a person who reads everything but secrets. Client
	// usage only.
	RoleViewer = "roost:viewers"
	// RoleAuditor is a viewer who may also read the audit log. Client
	// usage only.
	RoleAuditor = "roost:auditors"
)

// UserRoles are the roles of people's certificates (roostctl user create
// --role), by their short names.
var UserRoles = map[string]string{
	"admin":    RoleAdmin,
	"operator": RoleOperator,
	"viewer":   RoleViewer,
	"auditor":  RoleAuditor,
}

// RoleName returns the short name of a role ("admin" for RoleAdmin,
// "member", "agent", …), or role itself when it is unknown.
func RoleName(role string) string {
	switch role {
	case RoleMember:
		return "member"
	case RoleAgent:
		return "agent"
	}
	for n, r := range UserRoles {
		if r == role {
			return n
		}
	}
	return role
}

// ServerName is the DNS name every member certificate carries. Clients dial
// any member with tls.Config.ServerName = ServerName.
const ServerName = "roost-hub"

// PEMCertificate is the PEM block type of a certificate.
const PEMCertificate = "CERTIFICATE"

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
		VerifyConnection: RequirePeerRole(RoleMember, "server"),
	}
	switch {
	case len(certPEM) == 0 && len(keyPEM) == 0:
	case len(certPEM) == 0 || len(keyPEM) == 0:
		return nil, errors.New("ca: client TLS: certificate and key must be given together")
	default:
		cert, err := KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("ca: client TLS: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// RequirePeerRole returns a VerifyConnection hook that refuses a peer
// without a verified certificate of the given role; who names the peer in
// the error ("server", "peer"). It runs after the standard chain
// verification, on either side of the handshake.
func RequirePeerRole(role, who string) func(tls.ConnectionState) error {
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

// KeyPair parses a PEM certificate and private key into a tls.Certificate
// with Leaf set. Errors: either is empty, they do not parse, or they do not
// match.
func KeyPair(certPEM, keyPEM []byte) (tls.Certificate, error) {
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

// RoleOf returns the Roost role (RoleAdmin, RoleMember, RoleAgent, …) in the
// certificate's Subject Organization, or "" when it carries none.
func RoleOf(cert *x509.Certificate) string {
	if cert == nil {
		return ""
	}
	for _, o := range cert.Subject.Organization {
		if IsRole(o) {
			return o
		}
	}
	return ""
}

// IsRole reports whether r is one of the Roost roles: RoleAdmin,
// RoleMember, RoleAgent, RoleOperator, RoleViewer or RoleAuditor.
func IsRole(r string) bool {
	switch r {
	case RoleAdmin, RoleMember, RoleAgent, RoleOperator, RoleViewer, RoleAuditor:
		return true
	}
	return false
}

// ParseCertificatePEM parses the first CERTIFICATE block of pemBytes.
func ParseCertificatePEM(pemBytes []byte) (*x509.Certificate, error) {
	block, err := DecodePEM(pemBytes, PEMCertificate)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	return cert, nil
}

// DecodePEM returns the first PEM block of one of the types want, skipping
// other blocks. Errors: data is empty, holds no PEM block, or none of the
// wanted type (naming the types found).
func DecodePEM(data []byte, want ...string) (*pem.Block, error) {
	if len(data) == 0 {
		return nil, errors.New("empty PEM")
	}
	rest := data
	var seen []string
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		for _, w := range want {
			if block.Type == w {
				return block, nil
			}
		}
		seen = append(seen, block.Type)
	}
	if len(seen) == 0 {
		return nil, errors.New("no PEM data found")
	}
	return nil, fmt.Errorf("no %q PEM block (found %q)", want, seen)
}
