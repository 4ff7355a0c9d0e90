// Package config is the agent configuration file, /etc/roost/agent.yaml.
//
// The enrollment image writes it (through Ignition); roost-agent reads it at
// start. Its flags (--hub, --ca, --token, --state-dir) override the file, so
// the agent can also run by hand without one.
//
//	apiVersion: roost.io/v1
//	kind: AgentConfig
//	# API addresses (host:port) of every hub member; the agent spreads over them.
//	hubs:
//	- 10.0.0.1:7443
//	- 10.0.0.2:7443
//	- 10.0.0.3:7443
//	# The pinned hub CA, inline PEM (or caFile: /etc/roost/hub-ca.pem; not both).
//	caBundle: |
//	  -----BEGIN CERTIFICATE-----
//	  ...
//	  -----END CERTIFICATE-----
//	# The enrollment token secret (roostctl token create); only used until the
//	# Server is enrolled, then the agent authenticates with its certificate.
//	token: abcdef.0123456789abcdef
//	# Where the agent keeps its key, certificate and progress (default /var/lib/roost).
//	stateDir: /var/lib/roost
//
// Unknown fields are refused (they are usually typos); errors name the file
// and the field.
//
// This package imports nothing from the hub, so the image builder and the
// agent can both use it.
package config

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/roostfleet/roost/internal/atomicfile"
	"sigs.k8s.io/yaml"
)

// APIVersion and Kind identify an agent configuration file.
const (
	APIVersion = "roost.io/v1"
	Kind       = "AgentConfig"
)

// DefaultPath is where roost-agent looks for its configuration.
const DefaultPath = "/etc/roost/agent.yaml"

// DefaultStateDir is the agent's state directory when none is configured.
const DefaultStateDir = "/var/lib/roost"

// tokenPattern is the enrollment token secret format (as kubeadm's bootstrap
// tokens): a 6-character id, a dot, a 16-character secret.
var tokenPattern = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)

// ValidToken reports whether s has the enrollment token format
// "[a-z0-9]{6}.[a-z0-9]{16}".
func ValidToken(s string) bool { return tokenPattern.MatchString(s) }

// AgentConfig is the content of agent.yaml.
type AgentConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Hubs are the API addresses (host:port) of all hub members.
	Hubs []string `json:"hubs,omitempty"`
	// CABundle is the PEM-encoded hub CA (one or more certificates).
	CABundle string `json:"caBundle,omitempty"`
	// CAFile names a file holding the PEM hub CA, instead of CABundle.
	CAFile string `json:"caFile,omitempty"`
	// Token is the enrollment token secret; empty once not needed.
	Token string `json:"token,omitempty"`
	// StateDir is the agent's state directory; empty means DefaultStateDir.
	StateDir string `json:"stateDir,omitempty"`
	// ReleaseKeys are PEM ed25519 public keys (PKIX, "PUBLIC KEY", as
	// roost-image keygen writes them) the agent trusts to sign the image
	// releases it installs. The agent keeps them in its state dir, so a
	// Revision's configuration may leave them out.
	ReleaseKeys []string `json:"releaseKeys,omitempty"`
}

// NetworkProfilePath is where a Revision's Ignition config writes the
// Server's NetworkProfile (YAML); the agent applies it at start.
const NetworkProfilePath = "/etc/roost/network.yaml"

// A worker's kubelet files in kubeadm's layout, shared by the hub (which
// renders the Revision) and the agent.
const (
	// KubeletCAPath holds the cluster CA; a Revision's Ignition config
	// writes it.
	KubeletCAPath = "/etc/kubernetes/pki/ca.crt"
	// KubeletBootstrapPath holds the kubelet's bootstrap kubeconfig (TLS
	// bootstrap with a short-lived token); the agent writes it from its
	// desired state, never a Revision.
	KubeletBootstrapPath = "/etc/kubernetes/bootstrap-kubelet.conf"
)

// ParseReleaseKey decodes one PEM ed25519 public key (PKIX). Errors say
// what is wrong with the text.
func ParseReleaseKey(text string) (ed25519.PublicKey, error) {
	blk, _ := pem.Decode([]byte(text))
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, errors.New("not a PEM \"PUBLIC KEY\" block (use the .pub file roost-image keygen writes)")
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("a %T key, want ed25519", k)
	}
	return pub, nil
}

// Load reads and validates the file at path (see Validate with
// requireHubs=false: an enrolled agent keeps the hub list and CA in its
// state dir, so a file may leave them out). Relative caFile paths are
// relative to the file's directory.
func Load(path string) (*AgentConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agent config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("agent config %s: %w", path, err)
	}
	if c.CAFile != "" && !filepath.IsAbs(c.CAFile) {
		c.CAFile = filepath.Join(filepath.Dir(path), c.CAFile)
	}
	return c, nil
}

// Parse decodes and validates a configuration document.
func Parse(data []byte) (*AgentConfig, error) {
	var c AgentConfig
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks the header, the hub addresses, the CA (inline PEM must
// hold a certificate; caBundle and caFile are exclusive) and the token
// format. Every field but the header may be empty: flags and the state dir
// fill them in; Complete checks that the agent has what it needs.
// Errors name the field.
func (c *AgentConfig) Validate() error {
	if c.APIVersion != APIVersion {
		return fmt.Errorf("apiVersion: got %q, want %q", c.APIVersion, APIVersion)
	}
	if c.Kind != Kind {
		return fmt.Errorf("kind: got %q, want %q", c.Kind, Kind)
	}
	if err := ValidateHubs(c.Hubs); err != nil {
		return err
	}
	if c.CABundle != "" && c.CAFile != "" {
		return errors.New("caBundle and caFile: give one, not both")
	}
	if c.CABundle != "" {
		if _, err := ParseCABundle([]byte(c.CABundle)); err != nil {
			return fmt.Errorf("caBundle: %w", err)
		}
	}
	for i, k := range c.ReleaseKeys {
		if _, err := ParseReleaseKey(k); err != nil {
			return fmt.Errorf("releaseKeys[%d]: %w", i, err)
		}
	}
	if c.Token != "" && !ValidToken(c.Token) {
		return errors.New("token: not an enrollment token (want 6 + 16 lower-case letters or digits: abcdef.0123456789abcdef)")
	}
	return nil
}

// CA returns the PEM CA bundle: CABundle, or the content of CAFile.
// It returns nil, nil when neither is set.
func (c *AgentConfig) CA() ([]byte, error) {
	if c.CABundle != "" {
		return []byte(c.CABundle), nil
	}
	if c.CAFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("caFile: %w", err)
	}
	if _, err := ParseCABundle(b); err != nil {
		return nil, fmt.Errorf("caFile %s: %w", c.CAFile, err)
	}
	return b, nil
}

// StateDirOrDefault returns StateDir, or DefaultStateDir when empty.
func (c *AgentConfig) StateDirOrDefault() string {
	if c.StateDir == "" {
		return DefaultStateDir
	}
	return c.StateDir
}

// ParseCABundle returns the certificates of a PEM bundle; it fails when it
// holds none or one does not parse.
func ParseCABundle(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := data
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(out)+1, err)
		}
		out = append(out, cert)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return out, nil
}

// ValidateHubs checks a list of host:port addresses: each well formed,
// none repeated.
func ValidateHubs(hubs []string) error {
	seen := map[string]bool{}
	for i, h := range hubs {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			return fmt.Errorf("hubs[%d]: address %q is not host:port", i, h)
		}
		if host == "" {
			return fmt.Errorf("hubs[%d]: address %q has no host", i, h)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("hubs[%d]: address %q has an invalid port", i, h)
		}
		if seen[h] {
			return fmt.Errorf("hubs[%d]: duplicate address %q", i, h)
		}
		seen[h] = true
	}
	return nil
}

// Write validates c and writes it to path atomically (temporary file,
// fsync, rename) with mode 0600, creating the parent directory (0755) when
// missing. An empty APIVersion or Kind is filled in; c is not modified.
func (c *AgentConfig) Write(path string) error {
	data, err := c.Marshal()
	if err != nil {
		return fmt.Errorf("agent config %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("agent config %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("agent config %s: %w", path, err)
	}
	return nil
}

// Marshal validates c and returns it as YAML (what Write writes), for
// callers that place the file themselves (an Ignition config).
func (c *AgentConfig) Marshal() ([]byte, error) {
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
	return yaml.Marshal(&out)
}
