package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roostfleet/roost/agent"
	"github.com/roostfleet/roost/agent/install"
	"github.com/roostfleet/roost/agent/internal/fakehub"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func (rg *hostRig) clean(index uint64, mode string, dataDisks bool) {
	rg.hub.Send(&roostv1.HubMessage{Message: &roostv1.HubMessage_Desired{Desired: &roostv1.DesiredState{
		Cleaning: &roostv1.CleaningInstruction{Index: index, Mode: mode, DataDisks: dataDisks}}}})
}

func (rg *hostRig) waitCleaning(t *testing.T, n int) *roostv1.CleaningResult {
	t.Helper()
	fakehub.Eventually(t, "cleaning result", func() bool { return len(rg.hub.Cleanings()) >= n })
	return rg.hub.Cleanings()[n-1]
}

// TestCleanInstalledServer: a Server booted from disk (Revision 2, its
// STATE at the state dir, a bind mount of it for containerd, the kubelet
// running) is asked to clean with data disks while its data disk is
// read-only: the workloads stop, STATE is shut down and detached, the
// install disk is wiped and the failure names the data disk; the agent
// keeps its identity and reports no booted Revision. A retry (new index)
// with the disk writable succeeds; the same index again is answered again
// without a second wipe; a new Revision then installs from scratch.
func TestCleanInstalledServer(t *testing.T) {
	rel := newRelease(t, 3)
	rg := newHostRig(t, 2, rel.public())
	rg.hub.Blobs = rel.blobs
	rg.hub.Lease = func(int, *roostv1.AcquireLeaseRequest) (*roostv1.AcquireLeaseResponse, error) {
		return &roostv1.AcquireLeaseResponse{Granted: true, FencingToken: 7}, nil
	}
	if err := rg.disks.Add("data1", 64<<20); err != nil {
		t.Fatal(err)
	}
	rg.disks.SetReadOnly("data1", true)
	rg.extraDisks = []*roostv1.DiskInfo{{Name: "data1", SizeBytes: 64 << 20}, {Name: "sr0", SizeBytes: 1 << 20, Removable: true}}
	if _, err := install.Prepare(context.Background(), rg.disks, "/dev/fakedisk", install.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rg.host.ESPDir, install.EntriesDir, "roost-rev-2.conf"), []byte("title x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeRevisionRecord(t, rg.stateDir, newRelease(t, 2).spec)
	containerd := filepath.Join(t.TempDir(), "containerd")
	for _, m := range [][2]string{{"/dev/fakedisk2", rg.stateDir}, {"/dev/fakedisk2", containerd}, {"overlay", containerd + "/rootfs"}} {
		if err := rg.mounter.Mount(m[0], m[1], "ext4"); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(rg.host.AgentStateDropin, []byte("[Unit]\nRequiresMountsFor=/var/lib/roost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rg.units.Set("kubelet.service", "active")
	rg.units.Set("containerd.service", "active")
	for _, u := range newRelease(t, 2).spec.GetRequiredUnits() {
		rg.units.Set(u, "active")
	}
	rg.start(t)
	rg.waitCondition(t, agent.CondHealthy, "True", "BootAssessed")
	key, _ := os.ReadFile(filepath.Join(rg.stateDir, agent.KeyFile))

	rg.clean(7, install.WipeMetadata, true)
	r := rg.waitCleaning(t, 1)
	if r.GetIndex() != 7 || r.GetSucceeded() || !strings.Contains(r.GetError(), "wipe /dev/data1: open /dev/data1: read-only file system") {
		t.Fatalf("first result %v", r)
	}
	if got := rg.units.String(); !strings.Contains(got, "containerd.service inactive\nkubelet.service inactive\nkubepods.slice inactive\n") {
		t.Errorf("units:\n%s", got)
	}
	if got := rg.mounter.String(); got != "" {
		t.Errorf("still mounted:\n%s", got)
	}
	if !strings.HasPrefix(rg.disks.String(), "data1: 64Mi, 512-byte sectors, blank\nfakedisk: 3Gi, 512-byte sectors, blank\n") {
		t.Errorf("disks:\n%s", rg.disks.String())
	}
	if got, _ := os.ReadFile(filepath.Join(rg.stateDir, agent.KeyFile)); len(key) == 0 || string(got) != string(key) {
		t.Error("the agent key is not kept in the state dir")
	}
	if _, err := os.Stat(rg.host.AgentStateDropin); !os.IsNotExist(err) || rg.units.Reloads() != 1 {
		t.Errorf("the agent's STATE drop-in: %v, %d daemon-reloads", err, rg.units.Reloads())
	}
	if _, err := os.Stat(filepath.Join(rg.stateDir, agent.CleanedFile)); err != nil {
		t.Errorf("no %s mark in the state dir: %v", agent.CleanedFile, err)
	}
	fakehub.Eventually(t, "booted revision 0", func() bool {
		st := rg.hub.LastStatus()
		return st.GetBootedRevision() == 0 && rg.condition(agent.CondHealthy).GetStatus() == ""
	})

	rg.disks.SetReadOnly("data1", false)
	rg.disks.Log()
	rg.clean(8, install.WipeMetadata, true)
	r = rg.waitCleaning(t, 2)
	if r.GetIndex() != 8 || !r.GetSucceeded() || len(r.GetDisks()) != 2 || !strings.HasPrefix(r.GetDisks()[1], "/dev/data1: metadata:") {
		t.Fatalf("retry result %v", r)
	}
	// The same instruction again (a new stream): answered, not wiped again.
	rg.disks.Log()
	rg.clean(8, install.WipeMetadata, true)
	if r := rg.waitCleaning(t, 3); r.GetIndex() != 8 || !r.GetSucceeded() {
		t.Fatalf("resent result %v", r)
	}
	if log := rg.disks.Log(); len(log) != 0 {
		t.Errorf("wiped again: %v", log)
	}

	// A new Revision installs from scratch, as from the enrollment image.
	rg.desire(30, rel.spec, false)
	fakehub.Eventually(t, "reboot", func() bool { return rg.rebooter.Reboots() == 1 })
	if log := strings.Join(rg.disks.Log(), "\n"); !strings.Contains(log, "mkfs.ext4 fakedisk") {
		t.Errorf("not prepared again:\n%s", log)
	}
	if got, _ := os.ReadFile(filepath.Join(rg.host.StateMountDir, agent.KeyFile)); string(got) != string(key) {
		t.Error("the identity is not on the new STATE")
	}
	time.Sleep(10 * time.Millisecond)
}

// TestCleanWithoutHost: an agent that does not manage its host cannot
// wipe anything, so it answers a cleaning with a failure saying so (the
// Server stays out of the pool) instead of staying silent.
func TestCleanWithoutHost(t *testing.T) {
	ca := fakehub.NewCA(t)
	hub := fakehub.Start(t, ca)
	hub.Hubs = []string{hub.Addr}
	id, inv := simServer(2)
	startAgent(t, agent.Options{Hubs: []string{hub.Addr}, CA: ca.CertPEM, Token: hub.Token, Version: "v-test",
		Store: agent.FileStore{Dir: filepath.Join(t.TempDir(), "state")}, Identity: id, Inventory: inv})
	fakehub.Eventually(t, "hello", func() bool { h, _, _, _, _, _ := hub.Snapshot(); return len(h) == 1 })
	hub.Send(&roostv1.HubMessage{Message: &roostv1.HubMessage_Desired{Desired: &roostv1.DesiredState{
		Cleaning: &roostv1.CleaningInstruction{Index: 9, Mode: "metadata"}}}})
	fakehub.Eventually(t, "cleaning result", func() bool { return len(hub.Cleanings()) == 1 })
	if r := hub.Cleanings()[0]; r.GetIndex() != 9 || r.GetSucceeded() || !strings.Contains(r.GetError(), "does not manage its host") {
		t.Errorf("result %v", r)
	}
}
