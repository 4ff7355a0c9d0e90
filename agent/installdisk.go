package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/roostfleet/roost/agent/fetch"
	"github.com/roostfleet/roost/agent/install"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// installDisk makes sure the install disk is prepared, the boot loader
// installed, STATE holds the agent's identity and the ESP is mounted. An
// installed Server (booted from disk) only mounts its ESP: its STATE is
// mounted at the state dir, and the disk is in use.
func (a *Agent) installDisk(ctx context.Context, client roostv1.AgentServiceClient, spec *roostv1.RevisionSpec, inv *roostv1.Inventory) error {
	h, hs := a.host, a.hs
	if hs.espMounted {
		return nil
	}
	fail := func(reason string, err error) error {
		hs.set(CondInstalled, "False", reason, err.Error())
		return err
	}
	if h.BootedRevision > 0 {
		hs.stateRoot = h.StateDir
		if err := a.mountESP(""); err != nil {
			return fail("NoESP", err)
		}
		hs.set(CondInstalled, "True", "Installed", "booted from the install disk")
		return nil
	}
	disk, err := install.Choose(inv.GetDisks(), spec.GetInstallDisk())
	if err != nil {
		return fail("NoInstallDisk", err)
	}
	dev := install.DevicePath(disk)
	// The raw disk is written with no partition of it mounted: an earlier
	// attempt may have left STATE mounted.
	if hs.stateRoot == h.StateMountDir {
		if err := h.Mounter.Unmount(h.StateMountDir); err != nil {
			return fail("PrepareFailed", err)
		}
		hs.stateRoot = ""
	}
	res, err := install.Prepare(ctx, h.Disks, dev, install.Options{AllowWipe: spec.GetWipeForeignDisks()})
	if err != nil {
		reason := "PrepareFailed"
		if errors.Is(err, install.ErrForeignDisk) {
			reason = "ForeignDisk"
		}
		return fail(reason, err)
	}
	for _, act := range res.Actions {
		a.log.Info("install disk", "device", dev, "action", act)
	}
	if spec.GetBootLoader().GetSha256() == "" {
		return fail("NoBootLoader", errors.New("the image release has no boot loader artifact"))
	}
	// systemd-boot is small: fetched to RAM, so the disk stays unmounted
	// until the boot loader is on it
	path, err := fetch.Fetch(ctx, client, spec.GetBootLoader(), filepath.Join(filepath.Dir(h.StateMountDir), "bootloader"), nil)
	if err != nil {
		return fail("ArtifactsUnavailable", err)
	}
	efi, err := os.ReadFile(path)
	if err != nil {
		return fail("BootLoaderFailed", err)
	}
	if err := install.InstallBootLoader(ctx, h.Disks, dev, efi); err != nil {
		return fail("BootLoaderFailed", err)
	}
	statePart, espPart := partitionDevice(dev, install.StatePartition), partitionDevice(dev, install.ESPPartition)
	if err := waitForDevice(ctx, a.o.Clock, dev, espPart, statePart); err != nil {
		return fail("PrepareFailed", err)
	}
	// The boot loader went to the disk through dev; the mounts read
	// through the partition devices.
	if err := h.Disks.Sync(ctx, dev, espPart, statePart); err != nil {
		return fail("PrepareFailed", err)
	}
	if err := h.Mounter.Mount(statePart, h.StateMountDir, "ext4"); err != nil {
		return fail("PrepareFailed", err)
	}
	hs.stateRoot = h.StateMountDir
	if err := a.persistIdentity(); err != nil {
		return fail("PrepareFailed", err)
	}
	if err := a.mountESP(espPart); err != nil {
		return fail("PrepareFailed", err)
	}
	hs.set(CondInstalled, "True", "Installed", fmt.Sprintf("install disk %s (%s): %s and %s, systemd-boot", dev, install.FormatSize(disk.GetSizeBytes()), install.ESPName, install.StateName))
	return nil
}

// mountESP mounts the ESP (dev, or the partition named install.ESPName).
func (a *Agent) mountESP(dev string) error {
	h, hs := a.host, a.hs
	if hs.espMounted {
		return nil
	}
	if dev == "" {
		var err error
		if dev, err = h.FindPartition(install.ESPName); err != nil {
			return err
		}
	}
	if err := h.Mounter.Mount(dev, h.ESPDir, "vfat"); err != nil {
		return err
	}
	hs.espMounted = true
	return nil
}

// partitionDevice names partition n of disk dev: /dev/sda → /dev/sda2,
// /dev/nvme0n1 → /dev/nvme0n1p2 (a "p" when the disk name ends in a digit).
func partitionDevice(dev string, n int) string {
	if dev != "" && dev[len(dev)-1] >= '0' && dev[len(dev)-1] <= '9' {
		return fmt.Sprintf("%sp%d", dev, n)
	}
	return fmt.Sprintf("%s%d", dev, n)
}

// waitForDevice waits up to 10 s for the partition device nodes devs of
// disk to appear (the kernel re-reads the partition table after Prepare).
// When disk is no device node (fake disks in tests are image files named
// /dev/NAME only to Disks) nothing is waited for, and so are paths that
// are not under /dev.
func waitForDevice(ctx context.Context, clock Clock, disk string, devs ...string) error {
	if st, err := os.Stat(disk); err != nil || st.Mode()&os.ModeDevice == 0 {
		return nil
	}
	for _, d := range devs {
		if !strings.HasPrefix(d, "/dev/") {
			continue
		}
		deadline := clock.Now().Add(10 * time.Second)
		for {
			if _, err := os.Stat(d); err == nil {
				break
			}
			if !clock.Now().Before(deadline) {
				return fmt.Errorf("%s did not appear after the partition table was written", d)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-clock.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}
