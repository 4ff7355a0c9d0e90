package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

// cmdlineRevision matches the kernel's echo of its command line when it
// carries roost.revision=N (a boot of a staged Revision from the disk).
var cmdlineRevision = regexp.MustCompile(`Command line:[^\n]*\broost\.revision=(\d+)`)

// mainJob holds what the steps of TestMainJob share.
type mainJob struct {
	t       *testing.T
	ctx     context.Context
	bin     string
	hub     *Hub
	vm      *VM
	sshKey  string // private key file
	sshPort int
	server  string
	machine string
	timings []string
}

func (j *mainJob) logTiming(what string, d time.Duration) {
	s := fmt.Sprintf("%s: %ds", what, int(d.Round(time.Second).Seconds()))
	j.timings = append(j.timings, s)
	j.t.Logf("TIMING %s", s)
}

// fatalf fails with the console tail, the hub log tail and roostctl's view
// of the Machine and the Server.
func (j *mainJob) fatalf(format string, args ...any) {
	j.t.Helper()
	j.vm.Fatalf(format, args...)
}

// diagnose is the VM's Diagnose hook.
func (j *mainJob) diagnose() string {
	var b strings.Builder
	fmt.Fprintf(&b, "----- hub log tail (%s) -----\n%s\n", j.hub.Log, tailFile(j.hub.Log, 6000))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	show := func(args ...string) {
		out, err := j.hub.Ctl(ctx, args...)
		fmt.Fprintf(&b, "----- roostctl %s -----\n%s", strings.Join(args, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "%v\n", err)
		}
	}
	if j.machine != "" {
		show("describe", "machine", j.machine)
	}
	if j.server != "" {
		show("describe", "server", j.server)
	}
	show("get", "servers", "-o", "wide")
	show("get", "machines", "-o", "wide")
	return b.String()
}

// poll calls ok every 3 s until it returns true, failing after timeout with
// the last state it described.
func (j *mainJob) poll(what string, timeout time.Duration, ok func() (bool, string)) {
	j.t.Helper()
	ctx, cancel := context.WithTimeout(j.ctx, timeout)
	defer cancel()
	last := ""
	for {
		done, state := ok()
		if state != last && state != "" {
			j.t.Logf("  %s: %s", what, state)
			last = state
		}
		if done {
			return
		}
		if !j.vm.Running() {
			j.fatalf("waiting for %s: QEMU exited (last: %s)\nqemu log:\n%s", what, last, tailFile(j.vm.QEMULog, 2000))
		}
		select {
		case <-ctx.Done():
			j.fatalf("timed out after %s waiting for %s (last: %s)", timeout, what, last)
		case <-time.After(3 * time.Second):
		}
	}
}

func (j *mainJob) getMachine() (*Machine, error) {
	var m Machine
	if err := j.hub.GetJSON(j.ctx, &m, "machine", j.machine); err != nil {
		return nil, err
	}
	return &m, nil
}

func (j *mainJob) getServer() (*Server, error) {
	var s Server
	if err := j.hub.GetJSON(j.ctx, &s, "server", j.server); err != nil {
		return nil, err
	}
	return &s, nil
}

func machineState(m *Machine) string {
	st := m.Status
	ready := "?"
	if c := condition(st.Conditions, "Ready"); c != nil {
		ready = c.Status
		if c.Reason != "" {
			ready += " (" + c.Reason + ")"
		}
	}
	return fmt.Sprintf("phase=%s revision=%d booted=%d failed=%d Ready=%s", st.Phase, st.Revision, st.BootedRevision, st.FailedRevision, ready)
}

// waitReady waits until the Machine is Ready on its desired Revision and
// returns that Revision. want > 0 also requires that exact Revision.
func (j *mainJob) waitReady(what string, want int64, timeout time.Duration) int64 {
	j.t.Helper()
	var rev int64
	j.poll(what, timeout, func() (bool, string) {
		m, err := j.getMachine()
		if err != nil {
			return false, err.Error()
		}
		st := m.Status
		rev = int64(st.Revision)
		ok := st.Phase == "Ready" && st.Revision > 0 && st.BootedRevision == st.Revision && (want == 0 || int64(st.Revision) == want)
		return ok, machineState(m)
	})
	return rev
}

// waitBoot waits for a kernel booted from a staged Revision after offset
// and returns the Revision number on its command line and the offset past it.
func (j *mainJob) waitBoot(offset int64, timeout time.Duration) (int64, int64) {
	j.t.Helper()
	end, subs := j.vm.WaitConsoleRegexp(j.ctx, offset, cmdlineRevision, timeout)
	n, _ := strconv.ParseInt(subs[1], 10, 64)
	return n, end
}

// bootsOf counts the kernel boots of Revision rev on the console after offset.
func (j *mainJob) bootsOf(offset, rev int64) int {
	n := 0
	for _, m := range cmdlineRevision.FindAllStringSubmatch(j.vm.ConsoleSince(offset), -1) {
		if m[1] == strconv.FormatInt(rev, 10) {
			n++
		}
	}
	return n
}

// ssh runs a command on the server as core and returns its output.
func (j *mainJob) ssh(command string) (string, error) {
	ctx, cancel := context.WithTimeout(j.ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", "-F", "/dev/null",
		"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "ConnectTimeout=15", "-o", "LogLevel=ERROR", "-o", "IdentitiesOnly=yes",
		"-i", j.sshKey, "-p", strconv.Itoa(j.sshPort), "core@127.0.0.1", command)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ssh %q: %v\n%s", command, err, out)
	}
	return string(out), nil
}

// machineClass renders the MachineClass "e2e" with the test's SSH key.
func machineClass(pubKey string, kernelArgs ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: roost.io/v1\nkind: MachineClass\nmetadata:\n  name: e2e\nspec:\n")
	b.WriteString("  installDisk:\n    minSize: 8Gi\n")
	fmt.Fprintf(&b, "  sshAuthorizedKeys:\n    - %q\n", strings.TrimSpace(pubKey))
	if len(kernelArgs) > 0 {
		b.WriteString("  kernelArgs:\n")
		for _, a := range kernelArgs {
			fmt.Fprintf(&b, "    - %q\n", a)
		}
	}
	return b.String()
}

func (j *mainJob) apply(name, manifest string) {
	j.t.Helper()
	f := filepath.Join(j.t.TempDir(), name)
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		j.t.Fatal(err)
	}
	out := j.hub.MustCtl(j.t, j.ctx, "apply", "-f", f)
	j.t.Logf("roostctl apply -f %s:\n%s", name, strings.TrimSpace(out))
}

// TestMainJob is the main job on one UEFI QEMU server with an empty disk:
// enroll from the ISO, assign to a Pool of standalone hosts, install and
// boot the Revision from disk (hostname, bonds, VLAN, bridge, SSH), survive
// a power cycle, take a new Revision on a label change, and fall back from
// a Revision whose kernel cannot start.
func TestMainJob(t *testing.T) {
	if os.Getenv("ROOST_E2E") == "" {
		t.Skip("set ROOST_E2E=1 (QEMU boots take minutes)")
	}
	bin, _ := filepath.Abs(os.Getenv("ROOST_BIN"))
	if os.Getenv("ROOST_BIN") == "" {
		bin, _ = filepath.Abs(repoPath("bin"))
	}
	for _, b := range []string{"roost-hub", "roostctl", "roost-image"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("%s missing in %s (make build): %v", b, bin, err)
		}
	}
	bundle := os.Getenv("ROOST_TESTBED_BUNDLE")
	if bundle == "" {
		bundle = repoPath("_output", "testbed", "bundle")
	}
	bundle, _ = filepath.Abs(bundle)
	if _, err := os.Stat(filepath.Join(bundle, "release.json")); err != nil {
		t.Fatalf("no testbed bundle (make testbed): %v", err)
	}
	// build.sh signs the bundle with _output/testbed/release-key.key and
	// leaves the public key next to it
	pubKey := os.Getenv("ROOST_TESTBED_KEY")
	if pubKey == "" {
		pubKey = filepath.Join(filepath.Dir(bundle), "release-key.pub")
	}
	for _, c := range []string{"ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("%s missing (images/deps.sh --e2e installs openssh-client)", c)
		}
	}

	// a deadline for the whole job, a little before go test's -timeout
	deadline := time.Now().Add(55 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-time.Minute).Before(deadline) {
		deadline = d.Add(-time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	t.Cleanup(cancel)

	j := &mainJob{t: t, ctx: ctx, bin: bin}
	var bootToEnrolled, assignToReady time.Duration
	defer func() {
		t.Logf("timings: %s", strings.Join(j.timings, ", "))
		t.Logf("boot-to-enrolled: %ds, assign-to-Ready: %ds",
			int(bootToEnrolled.Round(time.Second).Seconds()), int(assignToReady.Round(time.Second).Seconds()))
	}()

	// ---- 1. hub, image, enrollment ISO ------------------------------------
	step := time.Now()
	j.hub = StartHub(t, bin)
	t.Logf("hub: 127.0.0.1:%d, data %s, log %s", j.hub.APIPort, j.hub.Dir, j.hub.Log)
	push := []string{"image", "push", bundle}
	if _, err := os.Stat(pubKey); err == nil {
		push = append(push, "--key", pubKey)
	}
	out := j.hub.MustCtl(t, ctx, push...)
	t.Logf("roostctl %s:\n%s", strings.Join(push, " "), strings.TrimSpace(out))
	j.logTiming("hub start and image push", time.Since(step))

	step = time.Now()
	work := t.TempDir()
	iso := filepath.Join(work, "enroll.iso")
	if _, err := os.Stat(pubKey); err != nil {
		t.Fatalf("the testbed release key (the agent installs only releases signed by a key it trusts): %v", err)
	}
	if out, err := exec.CommandContext(ctx, filepath.Join(bin, "roost-image"), "enroll", "--release", bundle,
		"--config", j.hub.Admin, "--hub", fmt.Sprintf("10.0.2.2:%d", j.hub.APIPort), "--release-key", pubKey,
		"--create-token", "--expires", "1h", "-o", iso).CombinedOutput(); err != nil {
		t.Fatalf("roost-image enroll: %v\n%s", err, out)
	}
	j.logTiming("enrollment ISO", time.Since(step))

	// ---- 2. the fleet -------------------------------------------------------
	j.sshKey = filepath.Join(work, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "roost-e2e", "-f", j.sshKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(j.sshKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := os.ReadFile(filepath.Join("testdata", "fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// the MachineClass first: the Pool refers to it
	j.apply("fleet.yaml", machineClass(string(pub))+"---\n"+string(fleet))

	// ---- 3. boot the server from the ISO; it enrolls -----------------------
	j.sshPort = freePort(t)
	j.vm = NewVM(t, VMConfig{Dir: filepath.Join(work, "vm"), ISO: iso, UUID: vmUUID, MgmtMAC: mgmtMAC, SSHPort: j.sshPort})
	j.vm.Diagnose = j.diagnose
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
	out, err = j.hub.Ctl(ctx, "pool", "assign", "demo", j.server, "--hostname", "demo-1", "-o", "json")
	if err != nil {
		j.fatalf("roostctl pool assign: %v\n%s", err, out)
	}
	j.machine = machineName(out)
	if j.machine == "" {
		// fall back to the Machine that claims the server
		j.poll("the Machine of server "+j.server, 2*time.Minute, func() (bool, string) {
			var l struct {
				Items []Machine `json:"items"`
			}
			o, err := j.hub.Ctl(ctx, "get", "machines", "-o", "json")
			if err != nil {
				return false, err.Error()
			}
			if json.Unmarshal([]byte(o), &l) != nil || len(l.Items) == 0 {
				var m Machine
				if json.Unmarshal([]byte(o), &m) == nil && m.Metadata.Name != "" {
					l.Items = []Machine{m}
				}
			}
			for _, m := range l.Items {
				if m.Spec.Server == j.server {
					j.machine = m.Metadata.Name
					return true, "machine " + m.Metadata.Name
				}
			}
			return false, "no machine for the server yet"
		})
	}
	t.Logf("pool assign: Machine %s", j.machine)
	rev := j.waitReady("Machine Ready on its Revision", 0, 15*time.Minute)
	assignToReady = time.Since(assigned)
	j.logTiming("assign-to-Ready", assignToReady)
	if m, err := j.getMachine(); err == nil && m.Spec.Hostname != "" && m.Spec.Hostname != "demo-1" {
		j.fatalf("machine spec.hostname = %q, want demo-1", m.Spec.Hostname)
	}
	reboot := j.vm.WaitConsole(ctx, offset, "reboot: Restarting system", time.Minute)
	n, _ := j.waitBoot(reboot, time.Minute)
	if n != rev {
		j.fatalf("the server booted roost.revision=%d from disk, the Machine says revision %d", n, rev)
	}
	t.Logf("revision %d: the console shows a reboot and the disk boot with roost.revision=%d", rev, n)
	j.checkHost()

	// ---- 5. power cycle: boots from disk on the same Revision --------------
	step = time.Now()
	j.vm.PowerOff()
	offset = j.vm.ConsoleOffset()
	j.vm.PowerOn()
	n, _ = j.waitBoot(offset, 10*time.Minute)
	if n != rev {
		j.fatalf("after a power cycle the server booted roost.revision=%d, want %d", n, rev)
	}
	// SSH answering proves this boot is up (the hub may not even have
	// noticed the power cut); then the agent must be back and Ready
	if got := j.waitSSHHostname(); got != "demo-1" {
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
	if n, _ = j.waitBoot(offset, time.Minute); n != rev2 {
		j.fatalf("after the label change the server booted roost.revision=%d, want %d", n, rev2)
	}
	j.logTiming(fmt.Sprintf("relabel-to-Ready (revision %d -> %d)", rev, rev2), time.Since(step))

	// ---- 7. a Revision that never boots: boot counting falls back ----------
	step = time.Now()
	offset = j.vm.ConsoleOffset()
	j.apply("machineclass-broken.yaml", machineClass(string(pub), "rdinit=/roost-broken", "panic=5"))
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
		state := machineState(m) + fmt.Sprintf(" (boots of revision %d so far: %d)", rev3, j.bootsOf(offset, rev3))
		return int64(st.FailedRevision) == rev3 && int64(st.BootedRevision) == rev2 && st.Phase == "Ready", state
	})
	tries := j.bootsOf(offset, rev3)
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

	// restore the MachineClass; the Revision that follows is not waited for
	j.apply("machineclass.yaml", machineClass(string(pub)))
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

// waitSSHHostname logs in as core (retrying while sshd starts: it makes
// its host keys at boot) and returns the host name.
func (j *mainJob) waitSSHHostname() string {
	j.t.Helper()
	var out string
	j.poll("SSH as core", 5*time.Minute, func() (bool, string) {
		o, err := j.ssh("hostname")
		if err != nil {
			return false, strings.TrimSpace(err.Error())
		}
		out = strings.TrimSpace(o)
		return true, "ssh ok: hostname " + out
	})
	return out
}

// checkHost logs in over SSH and checks the host name and the links of the
// NetworkProfile, and the Server's NetworkVerified condition.
func (j *mainJob) checkHost() {
	j.t.Helper()
	if got := j.waitSSHHostname(); got != "demo-1" {
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
