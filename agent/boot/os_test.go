package boot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type errUnits struct{ FakeUnits }

func (u *errUnits) ActiveState(ctx context.Context, name string) (string, error) {
	if name == "broken.service" {
		return "", errors.New("connection refused")
	}
	return u.FakeUnits.ActiveState(ctx, name)
}

func TestCheckUnits(t *testing.T) {
	u := &errUnits{}
	u.Set("kubelet.service", "activating")
	u.Set("containerd.service", "active")
	u.Set("foo.service", "failed")
	ctx := context.Background()
	if err := CheckUnits(ctx, u, []string{"containerd.service"}); err != nil {
		t.Errorf("CheckUnits(active) = %v", err)
	}
	if err := CheckUnits(ctx, u, nil); err != nil {
		t.Errorf("CheckUnits(none) = %v", err)
	}
	err := CheckUnits(ctx, u, []string{"kubelet.service", "containerd.service", "foo.service", "missing.service", "broken.service"})
	want := "units not active: kubelet.service (activating), foo.service (failed), missing.service (inactive), broken.service (connection refused)"
	if err == nil || err.Error() != want {
		t.Errorf("CheckUnits = %v\nwant %s", err, want)
	}
	if got := u.String(); got != "containerd.service active\nfoo.service failed\nkubelet.service activating" {
		t.Errorf("FakeUnits =\n%s", got)
	}
}

func TestFakeRebooter(t *testing.T) {
	var r FakeRebooter
	if err := r.Reboot(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.Err = errors.New("no")
	if err := r.Reboot(context.Background()); err == nil {
		t.Error("Reboot with Err = nil")
	}
	if got := r.String(); got != "reboots: 1" {
		t.Errorf("FakeRebooter = %q", got)
	}
}

func TestFakeMounter(t *testing.T) {
	var m FakeMounter
	if err := m.Mount("/dev/sda1", "/run/roost/esp", "vfat"); err != nil {
		t.Fatal(err)
	}
	if err := m.Mount("/dev/sda2", "/var/lib/roost", "ext4"); err != nil {
		t.Fatal(err)
	}
	if err := m.Mount("/dev/sdb1", "/run/roost/esp", "vfat"); err == nil {
		t.Error("second Mount on a dir = nil")
	}
	if got := m.String(); got != "/dev/sda1 on /run/roost/esp type vfat\n/dev/sda2 on /var/lib/roost type ext4\n" {
		t.Errorf("FakeMounter =\n%s", got)
	}
	if err := m.Unmount("/run/roost/esp"); err != nil {
		t.Fatal(err)
	}
	if err := m.Unmount("/run/roost/esp"); err == nil {
		t.Error("second Unmount = nil")
	}
	if got := m.String(); got != "/dev/sda2 on /var/lib/roost type ext4\n" {
		t.Errorf("FakeMounter =\n%s", got)
	}
}

func TestFindPartition(t *testing.T) {
	root := t.TempDir()
	dev, sys := filepath.Join(root, "dev"), filepath.Join(root, "sys")
	write := func(p, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(sys, "class/block/sda/uevent"), "MAJOR=8\nMINOR=0\nDEVNAME=sda\nDEVTYPE=disk\n")
	write(filepath.Join(sys, "class/block/sda1/uevent"), "MAJOR=8\nMINOR=1\nDEVNAME=sda1\nDEVTYPE=partition\nPARTN=1\nPARTNAME=ROOST-ESP\n")
	write(filepath.Join(sys, "class/block/sda2/uevent"), "MAJOR=8\nMINOR=2\nDEVNAME=sda2\nDEVTYPE=partition\nPARTN=2\nPARTNAME=ROOST-STATE\n")
	write(filepath.Join(sys, "class/block/nvme0n1p1/uevent"), "DEVNAME=nvme0n1p1\nPARTNAME=ROOST-STATE-OLD\n")

	// No udev link yet: the uevent scan finds it.
	if got, err := findPartition(dev, sys, "ROOST-ESP"); err != nil || got != filepath.Join(dev, "sda1") {
		t.Errorf("findPartition(ROOST-ESP) = %q, %v", got, err)
	}
	// The udev link wins.
	write(filepath.Join(dev, "vdb2"), "")
	if err := os.MkdirAll(filepath.Join(dev, "disk/by-partlabel"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../vdb2", filepath.Join(dev, "disk/by-partlabel/ROOST-STATE")); err != nil {
		t.Fatal(err)
	}
	if got, err := findPartition(dev, sys, "ROOST-STATE"); err != nil || got != filepath.Join(dev, "vdb2") {
		t.Errorf("findPartition(ROOST-STATE) = %q, %v", got, err)
	}
	if _, err := findPartition(dev, sys, "ROOST-NONE"); err == nil || !strings.Contains(err.Error(), "PARTNAME=ROOST-NONE") {
		t.Errorf("findPartition(ROOST-NONE) = %v", err)
	}
	write(filepath.Join(sys, "class/block/sdb1/uevent"), "DEVNAME=sdb1\nPARTNAME=ROOST-ESP\n")
	if _, err := findPartition(dev, sys, "ROOST-ESP"); err == nil || !strings.Contains(err.Error(), "several") {
		t.Errorf("findPartition(two ROOST-ESP) = %v", err)
	}
	for _, bad := range []string{"", "../x", "a/b"} {
		if _, err := findPartition(dev, sys, bad); err == nil {
			t.Errorf("findPartition(%q) = nil", bad)
		}
	}
}
