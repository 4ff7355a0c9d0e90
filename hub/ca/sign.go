package ca

import (
	"github.com/roostfleet/roost/internal/tlsconfig"

	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"time"
)

// LeafBackdate is how far before the signing time an issued certificate's
// validity starts, to tolerate clock skew between hub members and clients.
const LeafBackdate = 5 * time.Minute

// minRSABits is the smallest RSA key SignCSR accepts.
const minRSABits = 2048

// Profile says what an issued certificate is. The profile, never the CSR,
// decides subject, SANs and usages.
type Profile struct {
	// CommonName is the Subject CN: member ID, Server ID or operator name.
	// Required.
	CommonName string
	// Role is RoleAdmin, RoleMember or RoleAgent. Required.
	Role string
	// DNSNames are extra DNS SANs. Member certificates always also get
	// ServerName.
	DNSNames []string
	// IPAddresses are IP SANs.
	IPAddresses []net.IP
	// Lifetime is how long the certificate is valid after the signing time;
	// must be positive. NotAfter is capped at the CA's NotAfter.
	Lifetime time.Duration
}

func (p Profile) validate() error {
	if p.CommonName == "" {
		return errors.New("profile: empty common name")
	}
	if !tlsconfig.IsRole(p.Role) {
		return fmt.Errorf("profile: unknown role %q (want %q, %q or %q)", p.Role, RoleAdmin, RoleMember, RoleAgent)
	}
	if p.Lifetime <= 0 {
		return fmt.Errorf("profile: lifetime %v is not positive", p.Lifetime)
	}
	for _, n := range p.DNSNames {
		if n == "" {
			return errors.New("profile: empty DNS name")
		}
	}
	for _, ip := range p.IPAddresses {
		if len(ip) != net.IPv4len && len(ip) != net.IPv6len {
			return fmt.Errorf("profile: invalid IP address %v", ip)
		}
	}
	return nil
}

// SignCSR verifies the PEM-encoded PKCS#10 request's signature (proof that
// the requester holds the key) and issues a certificate for its public key
// as described by p, valid from now-LeafBackdate to now+p.Lifetime (capped at
// the CA's expiry). The CSR's subject, SANs and extensions are ignored. It
// returns the PEM-encoded certificate. Errors name the problem: malformed
// PEM/CSR, bad signature, unsupported or weak key, invalid profile, expired
// CA.
func (a *Authority) SignCSR(csrPEM []byte, p Profile, now time.Time) ([]byte, error) {
	block, err := tlsconfig.DecodePEM(csrPEM, pemCSR, "NEW CERTIFICATE REQUEST")
	if err != nil {
		return nil, fmt.Errorf("ca: sign CSR: %w", err)
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("ca: sign CSR: parse: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("ca: sign CSR: bad CSR signature: %w", err)
	}
	if err := checkPublicKey(csr.PublicKey); err != nil {
		return nil, fmt.Errorf("ca: sign CSR: %w", err)
	}
	return a.sign(csr.PublicKey, p, now)
}

// Issue generates an ECDSA P-256 key and a certificate for it as described
// by p (see SignCSR). It returns the PEM certificate and PKCS#8 PEM key. Use
// it where the hub itself holds the key (a member's own certificate, the
// first admin.conf); joiners and agents send a CSR instead.
func (a *Authority) Issue(p Profile, now time.Time) (certPEM, keyPEM []byte, err error) {
	if err := p.validate(); err != nil {
		return nil, nil, fmt.Errorf("ca: issue: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("ca: issue: generate key: %w", err)
	}
	certPEM, err = a.sign(key.Public(), p, now)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = marshalKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("ca: issue: %w", err)
	}
	return certPEM, keyPEM, nil
}

func (a *Authority) sign(pub crypto.PublicKey, p Profile, now time.Time) ([]byte, error) {
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("ca: sign: %w", err)
	}
	if !now.Before(a.cert.NotAfter) {
		return nil, fmt.Errorf("ca: sign: CA certificate expired at %s", a.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	notAfter := now.Add(p.Lifetime)
	if notAfter.After(a.cert.NotAfter) {
		notAfter = a.cert.NotAfter
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, fmt.Errorf("ca: sign: %w", err)
	}

	dnsNames := make([]string, 0, len(p.DNSNames)+1)
	seen := map[string]bool{}
	addDNS := func(n string) {
		if !seen[n] {
			seen[n] = true
			dnsNames = append(dnsNames, n)
		}
	}
	var extUsage []x509.ExtKeyUsage
	switch p.Role {
	case RoleMember:
		addDNS(ServerName)
		extUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	default: // RoleAdmin, RoleAgent and the other client roles
		extUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, n := range p.DNSNames {
		addDNS(n)
	}
	ips := make([]net.IP, 0, len(p.IPAddresses))
	for _, ip := range p.IPAddresses {
		ips = append(ips, append(net.IP(nil), ip...))
	}

	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: p.CommonName, Organization: []string{p.Role}},
		NotBefore:             now.Add(-LeafBackdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           extUsage,
		BasicConstraintsValid: true,
		IsCA:                  false,
	}
	if len(dnsNames) > 0 {
		tmpl.DNSNames = dnsNames
	}
	if len(ips) > 0 {
		tmpl.IPAddresses = ips
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, pub, a.key)
	if err != nil {
		return nil, fmt.Errorf("ca: sign: create certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: tlsconfig.PEMCertificate, Bytes: der}), nil
}

// checkPublicKey accepts ECDSA P-256/P-384/P-521, Ed25519 and RSA of at
// least 2048 bits.
func checkPublicKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
			return nil
		}
		return fmt.Errorf("unsupported ECDSA curve %s", k.Curve.Params().Name)
	case ed25519.PublicKey:
		return nil
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return fmt.Errorf("RSA key of %d bits is too weak (minimum %d)", k.N.BitLen(), minRSABits)
		}
		return nil
	default:
		return fmt.Errorf("unsupported public key type %T", pub)
	}
}

// NewCSR generates an ECDSA P-256 key and a PKCS#10 request for it with
// Subject CN commonName (informational: the hub's profile decides the
// issued subject). It returns the PEM CSR and the PKCS#8 PEM key, for
// joining members and enrolling agents.
func NewCSR(commonName string) (csrPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("ca: new CSR: generate key: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: commonName},
	}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("ca: new CSR: %w", err)
	}
	keyPEM, err = marshalKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("ca: new CSR: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemCSR, Bytes: der}), keyPEM, nil
}
