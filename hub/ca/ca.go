// Package ca is the hub's certificate authority and the TLS configuration
// built on it.
//
// The CA is one ECDSA P-256 key and a self-signed certificate. It is created
// once (New) outside the FSM, travels in a Raft command as
// roostv1.CertificateAuthority, and every hub member loads it (Load) so that
// any member can sign certificates.
//
// Every certificate the CA issues carries exactly one role in its Subject
// Organization (RoleAdmin, RoleMember or RoleAgent). The role decides the
// certificate's extended key usages and is what the hub authorizes on, per
// RPC (PeerRole). Hub members share one DNS name, ServerName ("roost-hub"),
// so a client pins the CA and dials any member with the same
// tls.Config.ServerName.
//
// TLS configurations:
//   - ServerTLS: the hub API. A client certificate is verified when given but
//     not required, because the join/enroll RPC is called without one.
//   - MutualTLS: Raft traffic between members; both sides must present a
//     RoleMember certificate.
//
// The roles, ServerName and ClientTLS (operators, agents and joiners
// dialing the hub API) live in the leaf internal/tlsconfig, so that clients
// do not link this package.
package ca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"time"

	"github.com/roostfleet/roost/internal/tlsconfig"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Roles, carried in the certificate Subject Organization (defined in
// internal/tlsconfig, which clients use without this package).
const (
	// RoleAdmin is an operator (roostctl). Client usage only.
	RoleAdmin = tlsconfig.RoleAdmin
	// RoleMember is a hub member. Server and client usage: members serve the
	// API and Raft and dial each other.
	RoleMember = tlsconfig.RoleMember
	// RoleAgent is a Server's agent. Client usage only.
	RoleAgent = tlsconfig.RoleAgent
	// RoleOperator, RoleViewer and RoleAuditor are people with less than
	// RoleAdmin (roostctl user create --role). Client usage only.
	RoleOperator = tlsconfig.RoleOperator
	RoleViewer   = tlsconfig.RoleViewer
	RoleAuditor  = tlsconfig.RoleAuditor
)

// ServerName is the DNS name every member certificate carries. Clients dial
// any member with tls.Config.ServerName = ServerName.
const ServerName = tlsconfig.ServerName

// CALifetime is the validity of a CA created by New (it starts one hour
// before the creation time to tolerate clock skew).
const CALifetime = 10 * 365 * 24 * time.Hour

// caBackdate is how far before "now" a new CA's validity starts.
const caBackdate = time.Hour

// PEM block types.
const (
	pemPrivateKey = "PRIVATE KEY" // PKCS#8
	pemECKey      = "EC PRIVATE KEY"
	pemCSR        = "CERTIFICATE REQUEST"
)

// New creates a self-signed ECDSA P-256 CA named commonName, valid from
// now-1h for CALifetime (10 years). The certificate and the PKCS#8 private
// key are PEM-encoded. It uses crypto/rand, so it must run outside the FSM;
// the result is what an InitCA command carries.
func New(commonName string, now time.Time) (*roostv1.CertificateAuthority, error) {
	if commonName == "" {
		return nil, errors.New("ca: new CA: empty common name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ca: new CA: generate key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, fmt.Errorf("ca: new CA: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"roost"}},
		NotBefore:             now.Add(-caBackdate),
		NotAfter:              now.Add(-caBackdate).Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("ca: new CA: create certificate: %w", err)
	}
	keyPEM, err := marshalKey(key)
	if err != nil {
		return nil, fmt.Errorf("ca: new CA: %w", err)
	}
	return &roostv1.CertificateAuthority{
		CertificatePem: pem.EncodeToMemory(&pem.Block{Type: tlsconfig.PEMCertificate, Bytes: der}),
		PrivateKeyPem:  keyPEM,
	}, nil
}

// Authority is a loaded CA: it signs certificates and provides the pool that
// verifies them. It is safe for concurrent use.
type Authority struct {
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer
}

// Load parses a CA from its replicated form. It checks that the certificate
// is a CA certificate allowed to sign certificates and that the private key
// belongs to it.
func Load(c *roostv1.CertificateAuthority) (*Authority, error) {
	if c == nil {
		return nil, errors.New("ca: load: no CA")
	}
	cert, err := tlsconfig.ParseCertificatePEM(c.GetCertificatePem())
	if err != nil {
		return nil, fmt.Errorf("ca: load: certificate: %w", err)
	}
	if !cert.IsCA || !cert.BasicConstraintsValid {
		return nil, errors.New("ca: load: certificate is not a CA certificate")
	}
	if cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("ca: load: certificate lacks the certificate-signing key usage")
	}
	key, err := parseKeyPEM(c.GetPrivateKeyPem())
	if err != nil {
		return nil, fmt.Errorf("ca: load: private key: %w", err)
	}
	if !publicKeysEqual(key.Public(), cert.PublicKey) {
		return nil, errors.New("ca: load: private key does not match the certificate")
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: tlsconfig.PEMCertificate, Bytes: cert.Raw})
	return &Authority{cert: cert, certPEM: certPEM, key: key}, nil
}

// Certificate returns the parsed CA certificate. Callers must not modify it.
func (a *Authority) Certificate() *x509.Certificate { return a.cert }

// CertPool returns a new pool holding only the CA certificate, for
// tls.Config.RootCAs / ClientCAs.
func (a *Authority) CertPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(a.cert)
	return p
}

// CertificatePEM returns the PEM-encoded CA certificate (a copy), as clients
// pin it.
func (a *Authority) CertificatePEM() []byte {
	return append([]byte(nil), a.certPEM...)
}

// Fingerprint returns the lower-case hex SHA-256 of the CA certificate DER
// (64 characters). It is stable for a given CA.
func (a *Authority) Fingerprint() string {
	return fingerprint(a.cert.Raw)
}

// FingerprintPEM returns the fingerprint (as Authority.Fingerprint) of the
// first certificate in certPEM, for checking a pinned CA hash.
func FingerprintPEM(certPEM []byte) (string, error) {
	cert, err := tlsconfig.ParseCertificatePEM(certPEM)
	if err != nil {
		return "", err
	}
	return fingerprint(cert.Raw), nil
}

func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

func parseKeyPEM(data []byte) (crypto.Signer, error) {
	block, err := tlsconfig.DecodePEM(data, pemPrivateKey, pemECKey)
	if err != nil {
		return nil, err
	}
	var key any
	if block.Type == pemECKey {
		key, err = x509.ParseECPrivateKey(block.Bytes)
	} else {
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	s, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("private key of type %T cannot sign", key)
	}
	return s, nil
}

func marshalKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der}), nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	if k, ok := a.(interface{ Equal(crypto.PublicKey) bool }); ok {
		return k.Equal(b)
	}
	return reflect.DeepEqual(a, b)
}

// randomSerial returns a random, positive 128-bit serial number.
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

// DeriveSecret returns n bytes (at most 8,160) derived from the CA's
// private key, purpose and id with HKDF-SHA256: the same on every member
// that holds this CA, unpredictable to anyone without its key. It serves
// secrets that a retried request must get again, e.g. a token created
// under a client's request ID (its secret is derived from the ID, so a
// retry on another member returns the same token). Errors come from
// encoding the key or n out of range.
func (a *Authority) DeriveSecret(purpose, id string, n int) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(a.key)
	if err != nil {
		return nil, fmt.Errorf("ca: derive secret: %w", err)
	}
	return hkdf.Key(sha256.New, der, []byte("roost derived secret v1"), purpose+"\x00"+id, n)
}
