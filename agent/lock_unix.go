//go:build unix

package agent

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// LockFile is the file of a FileStore directory that a running agent holds
// an exclusive flock(2) on.
const LockFile = "lock"

// Lock takes an exclusive advisory lock on DIR/lock, so that a second agent
// on the same state dir (a roost-agent started by hand next to the service)
// fails at once instead of generating a second key: two agents enrolling
// together left a certificate on disk that did not fit the key on disk.
// The lock is released by unlock, or when the process exits.
func (s FileStore) Lock() (unlock func(), err error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	f, err := os.OpenFile(s.path(LockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("state dir %s is in use by another roost-agent (stop it first: one agent per state dir)", s.Dir)
		}
		return nil, fmt.Errorf("state dir: lock %s: %w", s.path(LockFile), err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}
