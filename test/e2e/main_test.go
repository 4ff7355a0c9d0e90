package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The test's server: its SMBIOS UUID (the hub names Servers by it) and
// management MAC.
const (
	vmUUID  = "6f0e3c2a-52d1-4b7e-9a51-00000000e2e1"
	mgmtMAC = "52:54:00:e2:00:01"
)

// mainJob is the one-server job of TestMainJob.
type mainJob struct {
	*job
	vm      *VM
	sshPort int
	server  string
	machine string
}

func (j *mainJob) getMachine() (*Machine, error) { return j.job.getMachine(j.machine) }
func (j *mainJob) getServer() (*Server, error)   { return j.job.getServer(j.server) }

func (j *mainJob) waitReady(what string, want int64, timeout time.Duration) int64 {
	j.t.Helper()
	return j.job.waitReady(j.machine, what, want, timeout)
}

func (j *mainJob) ssh(command string) (string, error) { return j.job.ssh(j.sshPort, command) }

// TestMainJob is the main job on one UEFI QEMU server with an empty disk:
// enroll from the ISO, assign to a Pool of standalone hosts, install and
// boot the Revision from disk (hostname, bonds, VLAN, bridge, SSH), survive
// a power cycle, take a new Revision on a label change, fall back from
// a Revision whose kernel cannot start, and be cleaned when released: the
// disk image holds nothing of Roost's afterwards, a new claim installs from
// scratch, and a cleaning that cannot wipe its read-only data disk leaves
// it CleaningFailed until 'roostctl server clean' (see releaseAndClean).
func TestMainJob(t *testing.T) {
	tb := needTestbed(t)
	t.Parallel() // with TestWorker: one vCPU each, see doc.go
	j := &mainJob{job: newJob(t, tb, 55*time.Minute)}
	ctx := j.ctx
	var bootToEnrolled, assignToReady time.Duration
	defer func() {
		t.Logf("boot-to-enrolled: %ds, assign-to-Ready: %ds",
			int(bootToEnrolled.Round(time.Second).Seconds()), int(assignToReady.Round(time.Second).Seconds()))
	}()

	// ---- 1. enrollment ISO and the fleet ------------------------------------
	iso := j.enrollmentISO()
	pub := j.sshPub()
	fleet, err := os.ReadFile(filepath.Join("testdata", "fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// the MachineClass first: the Pool refers to it
	j.apply("fleet.yaml", machineClass(pub)+"---\n"+string(fleet))

	// ---- 3. boot the server from the ISO; it enrolls -----------------------
	j.sshPort = freePort(t)
	j.vm = j.newVM(VMConfig{Dir: filepath.Join(t.TempDir(), "vm"), ISO: iso, UUID: vmUUID, MgmtMAC: mgmtMAC, SSHPort: j.sshPort, BondNICs: true,
		ReadOnlyDataDisk: true}) // for the failing cleaning of step 8
	before, err := j.hub.listServers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, s := range before {
		known[s.Metadata.Name] = true
	}
	booted := time.Now()
	j.vm.Start()
	j.poll("a new Server, Available", 15*time.Minute, func() (bool, string) {
		ss, err := j.hub.listServers(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, s := range ss {
			if known[s.Metadata.Name] {
				continue
			}
			j.server = s.Metadata.Name
			return s.Status.State == "Available", fmt.Sprintf("server %s state=%s %s", s.Metadata.Name, s.Status.State, s.Status.StateReason)
		}
		return false, "no new server yet"
	})
	bootToEnrolled = time.Since(booted)
	j.logTiming("boot-to-enrolled", bootToEnrolled)
	if !strings.EqualFold(j.server, vmUUID) {
		t.Logf("note: server name %q is not the SMBIOS UUID %s", j.server, vmUUID)
	}

	// ---- 4. assign; install; boot the Revision from disk -------------------
	offset := j.vm.ConsoleOffset()
	assigned := time.Now()
	j.machine = j.assign("demo", j.server, "demo-1")
	rev := j.waitReady("Machine Ready on its Revision", 0, 15*time.Minute)
	assignToReady = time.Since(assigned)
	j.logTiming("assign-to-Ready", assignToReady)
	if m, err := j.getMachine(); err == nil && m.Spec.Hostname != "" && m.Spec.Hostname != "demo-1" {
		j.fatalf("machine spec.hostname = %q, want demo-1", m.Spec.Hostname)
	}
	reboot := j.vm.WaitConsole(ctx, offset, "reboot: Restarting system", time.Minute)
	n, _ := j.waitBoot(j.vm, reboot, time.Minute)
	if n != rev {
		j.fatalf("the server booted roost.revision=%d from disk, the Machine says revision %d", n, rev)
	}
	t.Logf("revision %d: the console shows a reboot and the disk boot with roost.revision=%d", rev, n)
	j.checkHost()

	// ---- 5. power cycle: boots from disk on the same Revision --------------
	step := time.Now()
	j.vm.PowerOff()
	offset = j.vm.ConsoleOffset()
	j.vm.PowerOn()
	n, _ = j.waitBoot(j.vm, offset, 10*time.Minute)
	if n != rev {
		j.fatalf("after a power cycle the server booted roost.revision=%d, want %d", n, rev)
	}
	// SSH answering proves this boot is up (the hub may not even have
	// noticed the power cut); then the agent must be back and Ready
	if got := j.waitSSH(j.sshPort, "hostname"); got != "demo-1" {
		j.fatalf("after the power cycle: hostname over SSH %q, want demo-1", got)
	}
	j.waitReachable(10 * time.Minute)
	j.waitReady("Machine Ready again after the power cycle", rev, 10*time.Minute)
	j.logTiming("power-cycle-to-Ready", time.Since(step))

	// ---- 6. a label change renders a new Revision; the server reboots -----
	step = time.Now()
	offset = j.vm.ConsoleOffset()
	j.hub.MustCtl(t, ctx, "server", "label", j.server, "e2e/step=relabel")
	var rev2 int64
	j.poll("a new Revision after the label change", 5*time.Minute, func() (bool, string) {
		m, err := j.getMachine()
		if err != nil {
			return false, err.Error()
		}
		rev2 = int64(m.Status.Revision)
		return rev2 > rev, machineState(m)
	})
	j.waitReady("Machine Ready on the relabel Revision", rev2, 15*time.Minute)
	if n, _ = j.waitBoot(j.vm, offset, time.Minute); n != rev2 {
		j.fatalf("after the label change the server booted roost.revision=%d, want %d", n, rev2)
	}
	j.logTiming(fmt.Sprintf("relabel-to-Ready (revision %d -> %d)", rev, rev2), time.Since(step))

	// ---- 7. a Revision that never boots: boot counting falls back ----------
	step = time.Now()
	offset = j.vm.ConsoleOffset()
	j.apply("machineclass-broken.yaml", machineClassArgs(pub, []string{"rdinit=/roost-broken", "panic=5"}))
	var rev3 int64
	j.poll("a new Revision with the broken kernel arguments", 5*time.Minute, func() (bool, string) {
		m, err := j.getMachine()
		if err != nil {
			return false, err.Error()
		}
		rev3 = int64(m.Status.Revision)
		return rev3 > rev2, machineState(m)
	})
	t.Logf("broken revision %d rendered", rev3)
	j.poll(fmt.Sprintf("failedRevision=%d, booted %d, Ready", rev3, rev2), 30*time.Minute, func() (bool, string) {
		m, err := j.getMachine()
		if err != nil {
			return false, err.Error()
		}
		st := m.Status
		state := machineState(m) + fmt.Sprintf(" (boots of revision %d so far: %d)", rev3, bootsOf(j.vm, offset, rev3))
		return int64(st.FailedRevision) == rev3 && int64(st.BootedRevision) == rev2 && st.Phase == "Ready", state
	})
	tries := bootsOf(j.vm, offset, rev3)
	t.Logf("revision %d was tried %d times (console), kernel panics seen: %d", rev3, tries, j.vm.CountConsole(offset, "Kernel panic"))
	var r Revision
	revName := fmt.Sprintf("%s-%d", j.server, rev3)
	if err := j.hub.GetJSON(ctx, &r, "revision", revName); err != nil {
		j.fatalf("%v", err)
	}
	if r.Status.Phase != "Failed" || r.Status.Reason == "" {
		j.fatalf("revision %s: phase %q reason %q, want Failed with a reason", revName, r.Status.Phase, r.Status.Reason)
	}
	t.Logf("revision %s: Failed: %s", revName, r.Status.Reason)
	j.logTiming(fmt.Sprintf("broken-revision-to-fallback (revision %d failed, back on %d)", rev3, rev2), time.Since(step))

	// ---- 8. release: cleaning, a fresh install, a failed cleaning ---------
	// Restore the MachineClass (now with a cleaning policy), resume the
	// rollout the failed Revision halted, wait for the Revision that
	// follows, then acceptance 1 of the cleaning (cleaning_test.go).
	step = time.Now()
	j.apply("machineclass.yaml", cleaningClass(pub, "discard", false))
	out, err := j.hub.Ctl(ctx, "rollout", "resume", "demo")
	t.Logf("roostctl rollout resume demo: %s (%v)", strings.TrimSpace(out), err)
	var rev4 int64
	j.poll("a new Revision after restoring the MachineClass", 5*time.Minute, func() (bool, string) {
		m, err := j.getMachine()
		if err != nil {
			return false, err.Error()
		}
		rev4 = int64(m.Status.Revision)
		return rev4 > rev3, machineState(m)
	})
	j.waitReady("Machine Ready on the restored class", rev4, 15*time.Minute)
	j.logTiming(fmt.Sprintf("restored-class-to-Ready (revision %d)", rev4), time.Since(step))
	j.releaseAndClean(pub)
}

// machineName reads the Machine's name from roostctl pool assign -o json:
// a Machine, a List of Machines, or a response naming them.
func machineName(out string) string {
	var v any
	if json.Unmarshal([]byte(out), &v) != nil {
		return ""
	}
	var find func(v any) string
	find = func(v any) string {
		switch x := v.(type) {
		case map[string]any:
			if k, _ := x["kind"].(string); k == "Machine" {
				if md, ok := x["metadata"].(map[string]any); ok {
					if n, _ := md["name"].(string); n != "" {
						return n
					}
				}
			}
			for _, key := range []string{"items", "machines", "objects"} {
				if n := find(x[key]); n != "" {
					return n
				}
			}
			if ms, ok := x["machineNames"].([]any); ok && len(ms) > 0 {
				n, _ := ms[0].(string)
				return n
			}
			if n, _ := x["machine"].(string); n != "" {
				return n
			}
		case []any:
			for _, e := range x {
				if n := find(e); n != "" {
					return n
				}
			}
		}
		return ""
	}
	return find(v)
}

// waitReachable waits for the agent to be back (the Server Reachable).
func (j *mainJob) waitReachable(timeout time.Duration) {
	j.t.Helper()
	j.poll("the Server Reachable again", timeout, func() (bool, string) {
		s, err := j.getServer()
		if err != nil {
			return false, err.Error()
		}
		return s.Status.Reachability == "Reachable", "reachability=" + s.Status.Reachability
	})
}

// checkHost logs in over SSH and checks the host name and the links of the
// NetworkProfile, and the Server's NetworkVerified condition.
func (j *mainJob) checkHost() {
	j.t.Helper()
	if got := j.waitSSH(j.sshPort, "hostname"); got != "demo-1" {
		j.fatalf("hostname over SSH: %q, want demo-1", got)
	}
	checks := []struct {
		cmd  string
		want []string
	}{
		{"ip -d link show bond0", []string{"bond mode 802.3ad", "miimon 100"}},
		{"ip -d link show bond1", []string{"bond mode active-backup", "miimon 100"}},
		{"ip -d link show bond0.100", []string{"vlan protocol 802.1Q id 100", "master br100", "@bond0"}},
		{"ip -d link show br100", []string{"bridge "}},
		{"ip -4 addr show dev br100", []string{"192.168.100.10/24"}},
		{"ip -d link show bm0", []string{"master bond0"}},
		{"ip -d link show bm1", []string{"master bond0"}},
		{"ip -d link show ab0", []string{"master bond1"}},
		{"ip -d link show ab1", []string{"master bond1"}},
	}
	for _, c := range checks {
		out, err := j.ssh(c.cmd)
		if err != nil {
			j.fatalf("%v", err)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				j.fatalf("%s: no %q in:\n%s", c.cmd, w, out)
			}
		}
	}
	j.t.Logf("ssh core@127.0.0.1:%d: hostname demo-1; bond0 802.3ad, bond1 active-backup, bond0.100 (VLAN 100) in br100 with 192.168.100.10/24", j.sshPort)
	j.poll("Server condition NetworkVerified=True", 3*time.Minute, func() (bool, string) {
		s, err := j.getServer()
		if err != nil {
			return false, err.Error()
		}
		c := condition(s.Status.Conditions, "NetworkVerified")
		if c == nil {
			return false, "no NetworkVerified condition"
		}
		return c.Status == "True", fmt.Sprintf("NetworkVerified=%s %s %s", c.Status, c.Reason, c.Message)
	})
}
