package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/roostfleet/roost/internal/atomicfile"
)

// State is what the agent remembers across restarts besides its key and
// certificate.
type State struct {
	// ServerName is the Server's name in the hub (EnrollResponse.server_name).
	ServerName string `json:"serverName,omitempty"`
	// Hubs are the API addresses of the hub members, as the hub last said.
	Hubs []string `json:"hubs,omitempty"`
	// LastAppliedGeneration is the newest DesiredState generation applied.
	LastAppliedGeneration int64 `json:"lastAppliedGeneration,omitempty"`
	// BootedRevision is the Revision number the Server runs (0: enrollment image).
	BootedRevision int64 `json:"bootedRevision,omitempty"`
	// ConfiguredHubs are the hub addresses the agent was configured with
	// (they may differ from what the hub advertises, e.g. behind NAT); a
	// later configuration without hubs (a Revision's) uses them.
	ConfiguredHubs []string `json:"configuredHubs,omitempty"`
	// KubeletBootstrapSHA256 is the sha256 of the kubelet bootstrap
	// kubeconfig the agent last wrote (empty: none); the agent removes the
	// file only while it holds that content.
	KubeletBootstrapSHA256 string `json:"kubeletBootstrapSha256,omitempty"`
}

// Store keeps the agent's identity and progress. Missing items read as
// empty (nil, zero State) without error.
type Store interface {
	// Key returns the PEM private key, nil when none was saved.
	Key() ([]byte, error)
	SaveKey(pemKey []byte) error
	// Certificate returns the PEM client certificate and hub CA bundle.
	Certificate() (cert, ca []byte, err error)
	SaveCertificate(cert, ca []byte) error
	State() (State, error)
	SaveState(State) error
}

// File names in a FileStore directory.
const (
	KeyFile   = "agent.key" // PKCS#8 PEM, mode 0600
	CertFile  = "agent.crt" // PEM client certificate
	CAFile    = "hub-ca.pem"
	StateFile = "state.json"
)

// FileStore is a Store in a directory (the agent's --state-dir). Every
// write is atomic (temporary file, fsync, rename). The directory is created
// with mode 0700.
type FileStore struct {
	Dir string
}

func (s FileStore) path(name string) string { return filepath.Join(s.Dir, name) }

func (s FileStore) read(name string) ([]byte, error) {
	b, err := os.ReadFile(s.path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

func (s FileStore) write(name string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if err := atomicfile.WriteFile(s.path(name), data, perm); err != nil {
		return fmt.Errorf("state dir: write %s: %w", name, err)
	}
	return nil
}

func (s FileStore) Key() ([]byte, error)     { return s.read(KeyFile) }
func (s FileStore) SaveKey(k []byte) error   { return s.write(KeyFile, k, 0o600) }
func (s FileStore) SaveState(st State) error { return s.saveJSON(st) }
func (s FileStore) saveJSON(st State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return s.write(StateFile, append(b, '\n'), 0o644)
}

func (s FileStore) Certificate() ([]byte, []byte, error) {
	cert, err := s.read(CertFile)
	if err != nil {
		return nil, nil, err
	}
	ca, err := s.read(CAFile)
	return cert, ca, err
}

// SaveCertificate writes the CA bundle first and the certificate last: a
// certificate on disk means the agent is enrolled.
func (s FileStore) SaveCertificate(cert, ca []byte) error {
	if len(ca) > 0 {
		if err := s.write(CAFile, ca, 0o644); err != nil {
			return err
		}
	}
	return s.write(CertFile, cert, 0o644)
}

func (s FileStore) State() (State, error) {
	var st State
	b, err := s.read(StateFile)
	if err != nil || b == nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("state dir: %s: %w", StateFile, err)
	}
	return st, nil
}

// MemStore is a Store in memory (the simulator's agents, unit tests).
type MemStore struct {
	mu       sync.Mutex
	key      []byte
	cert, ca []byte
	state    State
}

func (m *MemStore) Key() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.key, nil
}

func (m *MemStore) SaveKey(k []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.key = k
	return nil
}

func (m *MemStore) Certificate() ([]byte, []byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cert, m.ca, nil
}

func (m *MemStore) SaveCertificate(cert, ca []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cert = cert
	if len(ca) > 0 {
		m.ca = ca
	}
	return nil
}

func (m *MemStore) State() (State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.state
	st.Hubs = append([]string(nil), st.Hubs...)
	return st, nil
}

func (m *MemStore) SaveState(st State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	st.Hubs = append([]string(nil), st.Hubs...)
	m.state = st
	return nil
}
