// Package client holds the Roost client configuration — "admin.conf", the
// kubeconfig of Roost — and dials the hub with it.
//
// A configuration file looks like:
//
//	apiVersion: roost.io/v1
//	kind: Config
//	hubs:
//	- 10.0.0.1:7443
//	- 10.0.0.2:7443
//	certificateAuthority: |
//	  -----BEGIN CERTIFICATE-----
//	  ...
//	clientCertificate: |
//	  -----BEGIN CERTIFICATE-----
//	  ...
//	clientKey: |
//	  -----BEGIN PRIVATE KEY-----
//	  ...
//
// hubs lists the API addresses of all hub members; Dial spreads calls over
// them and skips dead ones. The CA is pinned: a hub is trusted only when its
// certificate chains to certificateAuthority and names tlsconfig.ServerName.
// clientCertificate and clientKey may both be empty for a configuration that
// can only call the join/enroll RPC.
package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"sigs.k8s.io/yaml"

	"github.com/roostfleet/roost/internal/atomicfile"
	"github.com/roostfleet/roost/internal/tlsconfig"
)

// APIVersion and Kind identify a configuration file.
const (
	APIVersion = "roost.io/v1"
	Kind       = "Config"
)

// EnvConfig names the environment variable that overrides DefaultPath.
const EnvConfig = "ROOST_CONFIG"

// Config is a Roost client configuration.
type Config struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Hubs are the API addresses (host:port) of all hub members.
	Hubs []string `json:"hubs"`
	// CertificateAuthority is the PEM-encoded hub CA certificate.
	CertificateAuthority string `json:"certificateAuthority"`
	// ClientCertificate is the PEM-encoded client certificate.
	ClientCertificate string `json:"clientCertificate,omitempty"`
	// ClientKey is the PEM-encoded private key of ClientCertificate.
	ClientKey string `json:"clientKey,omitempty"`
}

// DefaultPath returns $ROOST_CONFIG when set, else ~/.roost/config. When the
// home directory is unknown it returns the relative path .roost/config.
func DefaultPath() string {
	if p := os.Getenv(EnvConfig); p != "" {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return filepath.Join(".roost", "config")
	}
	return filepath.Join(home, ".roost", "config")
}

// LoadConfig reads and validates the configuration file at path. Unknown
// fields are errors (they are usually typos). Errors name the file and the
// offending field.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("roost config: %w", err)
	}
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("roost config %s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("roost config %s: %w", path, err)
	}
	return &c, nil
}

// Write validates c and writes it to path atomically (a temporary file in
// the same directory, synced, then renamed) with mode 0600, creating the
// parent directory with mode 0700 when missing. Empty APIVersion and Kind
// are written as APIVersion and Kind; c itself is not modified.
func (c *Config) Write(path string) error {
	data, err := c.Marshal()
	if err != nil {
		return fmt.Errorf("roost config %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("roost config %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("roost config %s: %w", path, err)
	}
	return nil
}

// Marshal returns the configuration as its file holds it (YAML), with
// empty APIVersion and Kind filled in; c itself is not modified. Errors:
// Validate's.
func (c *Config) Marshal() ([]byte, error) {
	out := *c
	if out.APIVersion == "" {
		out.APIVersion = APIVersion
	}
	if out.Kind == "" {
		out.Kind = Kind
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	data, err := yaml.Marshal(&out)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return data, nil
}

// Validate checks the header, the hub addresses and the PEM material: the CA
// must hold at least one certificate, and the client certificate and key
// must both be present (and match) or both be empty. Errors name the field.
func (c *Config) Validate() error {
	if c.APIVersion != APIVersion {
		return fmt.Errorf("apiVersion: got %q, want %q", c.APIVersion, APIVersion)
	}
	if c.Kind != Kind {
		return fmt.Errorf("kind: got %q, want %q", c.Kind, Kind)
	}
	if len(c.Hubs) == 0 {
		return errors.New("hubs: missing (list the API address host:port of every hub member)")
	}
	if err := validateHubs(c.Hubs); err != nil {
		return err
	}
	_, err := c.TLSConfig()
	return err
}

func validateHubs(hubs []string) error {
	seen := map[string]bool{}
	for i, h := range hubs {
		if err := validateAddress(h); err != nil {
			return fmt.Errorf("hubs[%d]: %w", i, err)
		}
		if seen[h] {
			return fmt.Errorf("hubs[%d]: duplicate address %q", i, h)
		}
		seen[h] = true
	}
	return nil
}

func validateAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q is not host:port: %w", addr, err)
	}
	if host == "" {
		return fmt.Errorf("address %q has no host", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("address %q has an invalid port", addr)
	}
	return nil
}

// CertPool returns a pool holding the certificateAuthority certificates.
func (c *Config) CertPool() (*x509.CertPool, error) {
	if c.CertificateAuthority == "" {
		return nil, errors.New("certificateAuthority: missing")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(c.CertificateAuthority)) {
		return nil, errors.New("certificateAuthority: no PEM certificate found")
	}
	return pool, nil
}

// TLSConfig returns the client TLS configuration (tlsconfig.ClientTLS): the pinned
// CA, ServerName tlsconfig.ServerName, and the client certificate when present.
func (c *Config) TLSConfig() (*tls.Config, error) {
	pool, err := c.CertPool()
	if err != nil {
		return nil, err
	}
	cert, key := []byte(c.ClientCertificate), []byte(c.ClientKey)
	switch {
	case len(cert) == 0 && len(key) == 0:
	case len(cert) == 0:
		return nil, errors.New("clientCertificate: missing (clientKey is set)")
	case len(key) == 0:
		return nil, errors.New("clientKey: missing (clientCertificate is set)")
	default:
		if _, err := tlsconfig.ParseCertificatePEM(cert); err != nil {
			return nil, fmt.Errorf("clientCertificate: %w", err)
		}
		if _, err := tls.X509KeyPair(cert, key); err != nil {
			return nil, fmt.Errorf("clientKey: does not match clientCertificate or is not a PEM private key: %w", err)
		}
	}
	cfg, err := tlsconfig.ClientTLS(cert, key, pool)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}
