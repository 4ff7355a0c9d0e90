package hub

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/roostfleet/roost/internal/atomicfile"
)

// dataDir names the files of a member's data directory.
type dataDir string

func (d dataDir) path(elem ...string) string {
	return filepath.Join(append([]string{string(d)}, elem...)...)
}
func (d dataDir) raft() string        { return d.path("raft") }
func (d dataDir) caCert() string      { return d.path("tls", "ca.crt") }
func (d dataDir) caKey() string       { return d.path("tls", "ca.key") }
func (d dataDir) memberCert() string  { return d.path("tls", "member.crt") }
func (d dataDir) memberKey() string   { return d.path("tls", "member.key") }
func (d dataDir) adminConfig() string { return d.path("admin.conf") }

// audit is the audit log (api.AuditEntry JSON lines); rotated files sit
// next to it (audit-TIME.log).
func (d dataDir) audit() string { return d.path("audit", "audit.log") }

// The audit log's bounds: rotated at auditMaxMB megabytes, auditBackups
// old files kept (about 1 GB in all).
const (
	auditMaxMB   = 100
	auditBackups = 9
)

// joined marks a member whose join completed (it was added as a voter).
func (d dataDir) joined() string { return d.path("joined") }

// nodeID returns the member's ID, creating DIR/node-id with want (or a
// random "hub-xxxxxxxx" when want is empty) on first start. A later start
// with a different want is an error: Raft IDs must not change.
func (d dataDir) nodeID(want string) (string, error) {
	b, err := os.ReadFile(d.path("node-id"))
	if err == nil {
		id := strings.TrimSpace(string(b))
		if want != "" && want != id {
			return "", fmt.Errorf("%s says this member is %q, not %q; a member's ID cannot change", d.path("node-id"), id, want)
		}
		return id, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	id := want
	if id == "" {
		r := make([]byte, 4)
		if _, err := rand.Read(r); err != nil {
			return "", err
		}
		id = "hub-" + hex.EncodeToString(r)
	}
	return id, writeFile(d.path("node-id"), []byte(id+"\n"), 0o600)
}

// writeFile writes data atomically (atomicfile.WriteFile), creating
// parent directories with mode 0700.
func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, mode)
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// lock takes an exclusive advisory lock (flock(2)) on DIR/lock, so that a
// second roost-hub on the same data dir fails at once instead of waiting
// on the log store's lock. The lock is released by unlock or at exit.
func (d dataDir) lock() (unlock func(), err error) {
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(d.path("lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %s is in use by another roost-hub", string(d))
		}
		return nil, fmt.Errorf("lock %s: %w", d.path("lock"), err)
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}
