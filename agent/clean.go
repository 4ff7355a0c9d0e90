package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/roostfleet/roost/agent/install"
	"github.com/roostfleet/roost/internal/atomicfile"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// CleanUnits are stopped before a cleaning wipes the disks: the kubelet,
// the pods it started (the kubelet's systemd cgroup driver puts them in
// kubepods.slice) and containerd, whose state lives on STATE, and
// systemd-journal-flush.service, whose stop (journalctl
// --smart-relinquish-var) moves journald from the persistent journal on
// STATE (/var/log/journal) back to /run.
var CleanUnits = []string{"kubelet.service", "kubepods.slice", "containerd.service", "systemd-journal-flush.service"}

// CleanedFile, in the state dir, marks a boot whose disks a cleaning let
// go (the state dir is then in RAM): an agent restarted in this boot runs
// no Revision, whatever roost.revision= the kernel command line says.
const CleanedFile = "cleaned"

// identityFiles are the state dir's files that make the agent who it is
// (see persistIdentity); a cleaning keeps them in RAM.
var identityFiles = []string{KeyFile, CertFile, CAFile, StateFile, ReleaseKeysFile}

// clean carries out the hub's cleaning instruction in place, from the OS
// that runs from RAM (the design's "cleaning boot": nothing on the disk is
// read but the agent's own identity, before the wipe):
//
//  1. the identity files of the state dir are read into memory;
//  2. CleanUnits are stopped;
//  3. the disks are let go: the ESP unmounted; STATE (mounted at the state
//     dir on an installed Server) shut down (FS_IOC_SHUTDOWN: it never
//     writes again, so nothing can rewrite what the wipe erased) and
//     detached with its bind mounts;
//  4. the identity is written back to the state dir, now a directory of
//     the RAM root, and its lock taken there: the agent keeps
//     authenticating as its Server; the agent unit's drop-in requiring
//     the STATE mount is removed (daemon-reload), so a restarted agent
//     does not wait for a partition that is gone;
//  5. every disk holding Roost's partition table is wiped by in.mode, and
//     with in.data_disks every other non-removable disk too.
//
// From step 3 on the Server boots no Revision: the agent reports booted
// revision 0, as the enrollment image's live agent does, and a new
// Revision installs from scratch. The result lists what each disk held and
// how it was wiped, or why the cleaning failed (the steps before the
// failure stay done: a retry goes on from there).
func (a *Agent) clean(ctx context.Context, in *roostv1.CleaningInstruction) *roostv1.CleaningResult {
	h, hs := a.host, a.hs
	res := &roostv1.CleaningResult{Index: in.GetIndex()}
	fail := func(step string, err error) *roostv1.CleaningResult {
		res.Error = fmt.Sprintf("%s: %v", step, err)
		a.log.Error("cleaning failed", "index", in.GetIndex(), "step", step, "err", err)
		return res
	}
	a.log.Info("cleaning the server", "index", in.GetIndex(), "mode", in.GetMode(), "data_disks", in.GetDataDisks())
	if !hs.detached() {
		ident, err := readIdentity(h.StateDir)
		if err != nil {
			return fail("keeping the agent identity in RAM", err)
		}
		for _, u := range CleanUnits {
			if err := h.Units.Stop(ctx, u); err != nil {
				return fail("stopping the Revision's workloads", err)
			}
		}
		if hs.espMounted {
			if err := h.Mounter.Unmount(h.ESPDir); err != nil {
				return fail("unmounting the ESP", err)
			}
			hs.espMounted = false
		}
		switch {
		case h.BootedRevision > 0: // STATE is the state dir
			if err := h.Mounter.Shutdown(h.StateDir); err != nil {
				return fail("shutting down STATE", err)
			}
			pts, err := h.Mounter.DetachAll(h.StateDir)
			if err != nil {
				return fail("detaching STATE", err)
			}
			a.log.Info("STATE detached", "mounts", pts)
		case hs.stateRoot == h.StateMountDir: // installed from this live boot
			if err := h.Mounter.Unmount(h.StateMountDir); err != nil {
				return fail("unmounting STATE", err)
			}
		}
		hs.stateRoot = ""
		if err := writeIdentity(h.StateDir, ident); err != nil {
			return fail("writing the agent identity to RAM", err)
		}
		if err := os.WriteFile(filepath.Join(h.StateDir, CleanedFile), []byte(fmt.Sprintf("%d\n", in.GetIndex())), 0o600); err != nil {
			return fail("marking the boot cleaned", err)
		}
		// a restarted agent must not wait for the wiped STATE's mount
		if err := os.Remove(h.AgentStateDropin); err == nil {
			if err := h.Units.Reload(ctx); err != nil {
				return fail("reloading systemd without the agent's STATE drop-in", err)
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			return fail("removing the agent's STATE drop-in", err)
		}
		// the lock file's descriptor would keep the detached STATE busy
		if err := a.relock(); err != nil {
			return fail("locking the state dir in RAM", err)
		}
		hs.setDetached()
		h.BootedRevision = 0
		for _, c := range []string{CondHealthy, CondInstalled, CondStaged, CondLeaseGranted} {
			hs.clear(c)
		}
	}
	mode := in.GetMode()
	if mode == "" {
		mode = install.WipeMetadata
	}
	var errs []string
	for _, d := range a.sentInventory().GetDisks() {
		if d.GetRemovable() || d.GetSizeBytes() == 0 {
			continue
		}
		dev := install.DevicePath(d)
		if !in.GetDataDisks() && !install.HoldsRoost(ctx, h.Disks, dev) {
			continue
		}
		line, err := install.Wipe(ctx, h.Disks, dev, mode)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		a.log.Info("disk wiped", "disk", dev, "result", line)
		res.Disks = append(res.Disks, line)
	}
	if len(errs) > 0 {
		return fail("wiping", errors.New(strings.Join(errs, "; ")))
	}
	res.Succeeded = true
	a.log.Info("cleaning done", "index", in.GetIndex(), "disks", res.Disks)
	return res
}

// fileCopy is a file's bytes and permissions.
type fileCopy struct {
	data []byte
	perm os.FileMode
}

// readIdentity reads the identity files of dir that exist.
func readIdentity(dir string) (map[string]fileCopy, error) {
	out := map[string]fileCopy{}
	for _, name := range identityFiles {
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		out[name] = fileCopy{b, st.Mode().Perm()}
	}
	if _, ok := out[KeyFile]; !ok {
		return nil, fmt.Errorf("no %s in %s", KeyFile, dir)
	}
	return out, nil
}

// writeIdentity writes files to dir (made 0700 when missing).
func writeIdentity(dir string, files map[string]fileCopy) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, f := range files {
		if err := atomicfile.WriteFile(filepath.Join(dir, name), f.data, f.perm); err != nil {
			return err
		}
	}
	return nil
}
