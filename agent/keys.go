package agent

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/roostfleet/roost/internal/tlsconfig"
)

// The agent's key is ECDSA P-256, generated once on first start and kept in
// the state dir; it is never regenerated. Certificate renewal signs a new
// CSR for the same key, so the key and the certificate on disk always
// match, whatever moment the agent is stopped at.

// HubServerName is the DNS name every hub member's certificate carries
// (internal/tlsconfig, shared with hub/ca; the agent cannot import hub/).
const HubServerName = tlsconfig.ServerName

// Roles in the certificate Subject Organization (internal/tlsconfig).
const (
	RoleMember = tlsconfig.RoleMember
	RoleAgent  = tlsconfig.RoleAgent
)

// NewKey generates an ECDSA P-256 key and returns it PKCS#8 PEM-encoded.
func NewKey() ([]byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseKey parses a PEM private key (PKCS#8 or SEC 1).
func ParseKey(pemKey []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(pemKey)
	if b == nil {
		return nil, errors.New("key: no PEM data")
	}
	var k any
	var err error
	switch b.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		return nil, fmt.Errorf("key: unexpected PEM block %q", b.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key: %T cannot sign", k)
	}
	return s, nil
}

// NewCSR returns a PEM PKCS#10 request for key with Subject CN commonName
// (informational: the hub decides the issued subject).
func NewCSR(key crypto.Signer, commonName string) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: commonName},
	}, key)
	if err != nil {
		return nil, fmt.Errorf("CSR: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// ParseCertificate parses the first CERTIFICATE block of a PEM bundle.
func ParseCertificate(pemCert []byte) (*x509.Certificate, error) {
	rest := pemCert
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("certificate: no PEM certificate")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

// RenewAt returns when a certificate should be renewed: two thirds into its
// validity.
func RenewAt(cert *x509.Certificate) time.Time {
	life := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotBefore.Add(life * 2 / 3)
}

// keyPair combines a PEM certificate and key into a tls.Certificate.
func keyPair(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// TLSConfig returns the client TLS configuration for dialing hub members:
// TLS 1.3, the pinned CA, ServerName HubServerName, a server certificate
// with role RoleMember, and the client certificate that getCert returns at
// handshake time (none when it returns nil: the Enroll call). Taking the
// certificate at handshake time lets a renewed certificate apply to the
// next connection without rebuilding anything.
func TLSConfig(caPEM []byte, getCert func() *tls.Certificate) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("hub CA: no PEM certificate")
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    pool,
		ServerName: HubServerName,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
				return errors.New("roost: hub presented no verified certificate")
			}
			leaf := cs.VerifiedChains[0][0]
			for _, o := range leaf.Subject.Organization {
				if o == RoleMember {
					return nil
				}
			}
			return fmt.Errorf("roost: hub certificate %q is not a hub member's", leaf.Subject.CommonName)
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if getCert != nil {
				if c := getCert(); c != nil {
					return c, nil
				}
			}
			return &tls.Certificate{}, nil
		},
	}, nil
}
