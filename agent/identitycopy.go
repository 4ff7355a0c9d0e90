package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/roostfleet/roost/agent/install"
	"github.com/roostfleet/roost/internal/atomicfile"
)

// persistIdentity copies the agent's state files to STATE when the state
// dir is elsewhere (the enrollment image runs from RAM), so the installed
// Server keeps its identity.
func (a *Agent) persistIdentity() error {
	h, hs := a.host, a.hs
	if hs.stateRoot == "" || filepath.Clean(hs.stateRoot) == filepath.Clean(h.StateDir) {
		return nil
	}
	for _, name := range []string{KeyFile, CertFile, CAFile, StateFile, ReleaseKeysFile} {
		if err := copyFile(filepath.Join(h.StateDir, name), filepath.Join(hs.stateRoot, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("keep the agent identity on %s: %w", install.StateName, err)
		}
	}
	return nil
}

// copyFile copies src to dst atomically (atomicfile.WriteFile) with src's
// permissions.
func copyFile(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(dst, data, st.Mode().Perm())
}
