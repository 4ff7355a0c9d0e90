package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/roostfleet/roost/agent/install"
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

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
