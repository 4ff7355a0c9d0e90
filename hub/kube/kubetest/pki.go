package kubetest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// clusterCA is the one CA of a control plane that real kubelets join, as
// kubeadm sets it up: it signs the API server's serving certificate,
// authenticates clients (--client-ca-file) and is kube-controller-
// manager's signer for the kubelets' CertificateSigningRequests, so a
// certificate a kubelet obtains by TLS bootstrap is trusted by the API
// server.
type clusterCA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	dir     string // CA and serving files; also the API server's cert dir
}

// File names in clusterCA.dir: apiserver.crt/key and sa-signer.crt/key are
// the names envtest's API server looks for in its cert dir.
const (
	caCertFile     = "ca.crt"
	caKeyFile      = "ca.key"
	servingCrtFile = "apiserver.crt"
	servingKeyFile = "apiserver.key"
	saCertFile     = "sa-signer.crt"
	saKeyFile      = "sa-signer.key"
)

// newClusterCA writes a CA, a serving certificate for localhost,
// 127.0.0.1 and ips, and a service-account signing key into dir.
func newClusterCA(dir string, ips []net.IP) (*clusterCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &clusterCA{cert: cert, key: key, certPEM: pemBlock("CERTIFICATE", der), dir: dir}
	if err := ca.write(caCertFile, ca.certPEM, caKeyFile, key); err != nil {
		return nil, err
	}
	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1)}, ips...),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if err := ca.issue(servingCrtFile, servingKeyFile, serving); err != nil {
		return nil, err
	}
	sa := &x509.Certificate{Subject: pkix.Name{CommonName: "service-accounts"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if err := ca.issue(saCertFile, saKeyFile, sa); err != nil {
		return nil, err
	}
	return ca, nil
}

// issue signs a certificate from tmpl (subject, names, usages) with a new
// key, valid for a day, and writes both.
func (ca *clusterCA) issue(certFile, keyFile string, tmpl *x509.Certificate) error {
	pem, key, err := ca.sign(tmpl)
	if err != nil {
		return err
	}
	return ca.write(certFile, pem, keyFile, key)
}

func (ca *clusterCA) sign(tmpl *x509.Certificate) ([]byte, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), key, nil
}

func (ca *clusterCA) write(certFile string, certPEM []byte, keyFile string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(ca.dir, certFile), certPEM, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(ca.dir, keyFile), pemBlock("PRIVATE KEY", der), 0o600)
}

func (ca *clusterCA) path(name string) string { return filepath.Join(ca.dir, name) }

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// caAuthn is an envtest.Authn that authenticates users by client
// certificates of the cluster CA (instead of envtest's own CA, whose key
// kube-controller-manager could not sign kubelet certificates with).
type caAuthn struct{ ca *clusterCA }

var _ envtest.Authn = caAuthn{}

func (a caAuthn) Configure(_ string, args *envtest.Arguments) error {
	args.Set("client-ca-file", a.ca.path(caCertFile))
	return nil
}
func (a caAuthn) Start() error { return nil }
func (a caAuthn) Stop() error  { return nil }

// AddUser returns baseCfg with a client certificate for user (CN the name,
// O the groups).
func (a caAuthn) AddUser(user envtest.User, baseCfg *rest.Config) (*rest.Config, error) {
	certPEM, key, err := a.ca.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user.Name, Organization: user.Groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("client certificate for %s: %w", user.Name, err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(baseCfg)
	cfg.CertData, cfg.KeyData = certPEM, pemBlock("PRIVATE KEY", der)
	return cfg, nil
}
