package e2e

import (
	"context"
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

// cmdlineRevision matches the kernel's echo of its command line when it
// carries roost.revision=N (a boot of a staged Revision from the disk).
var cmdlineRevision = regexp.MustCompile(`Command line:[^\n]*\broost\.revision=(\d+)`)

// testbed is what every QEMU test starts from: the binaries (make build),
// the testbed release bundle and the public key it is signed with (make
// testbed).
type testbed struct {
	Bin        string // directory with roost-hub, roostctl, roost-image
	Bundle     string // release bundle directory (release.json, artifacts)
	ReleaseKey string // ed25519 public key (.pub) that signed Bundle
	// Agent is the roost-agent system extension (.raw, with its signed
	// manifest beside it): the testbed OS has no agent of its own.
	Agent string
}

// needTestbed skips the test unless ROOST_E2E is set, and fails it when
// the binaries, the bundle, its key or the OpenSSH client are missing.
// ROOST_BIN, ROOST_TESTBED_BUNDLE and ROOST_TESTBED_KEY override the
// defaults (bin/, _output/testbed/bundle and the release-key.pub beside it);
// the agent extension is the roost-agent.raw beside the bundle.
func needTestbed(t *testing.T) testbed {
	t.Helper()
	if os.Getenv("ROOST_E2E") == "" {
		t.Skip("set ROOST_E2E=1 (QEMU boots take minutes)")
	}
	var tb testbed
	tb.Bin, _ = filepath.Abs(os.Getenv("ROOST_BIN"))
	if os.Getenv("ROOST_BIN") == "" {
		tb.Bin, _ = filepath.Abs(repoPath("bin"))
	}
	for _, b := range []string{"roost-hub", "roostctl", "roost-image"} {
		if _, err := os.Stat(filepath.Join(tb.Bin, b)); err != nil {
			t.Fatalf("%s missing in %s (make build): %v", b, tb.Bin, err)
		}
	}
	tb.Bundle = os.Getenv("ROOST_TESTBED_BUNDLE")
	if tb.Bundle == "" {
		tb.Bundle = repoPath("_output", "testbed", "bundle")
	}
	tb.Bundle, _ = filepath.Abs(tb.Bundle)
	if _, err := os.Stat(filepath.Join(tb.Bundle, "release.json")); err != nil {
		t.Fatalf("no testbed bundle (make testbed): %v", err)
	}
	// build.sh signs the bundle with _output/testbed/release-key.key and
	// leaves the public key next to it; the agent installs only releases
	// signed by a key it trusts
	tb.ReleaseKey = os.Getenv("ROOST_TESTBED_KEY")
	if tb.ReleaseKey == "" {
		tb.ReleaseKey = filepath.Join(filepath.Dir(tb.Bundle), "release-key.pub")
	}
	if _, err := os.Stat(tb.ReleaseKey); err != nil {
		t.Fatalf("the testbed release key: %v", err)
	}
	tb.Agent = filepath.Join(filepath.Dir(tb.Bundle), "roost-agent.raw")
	if _, err := os.Stat(tb.Agent + ".manifest.json.sig"); err != nil {
		t.Fatalf("the testbed's signed agent extension (make testbed): %v", err)
	}
	for _, c := range []string{"ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("%s missing (images/deps.sh --e2e installs openssh-client)", c)
		}
	}
	return tb
}

// job is what the steps of a QEMU test share: the hub, the servers, the
// deadline and the timings it reports.
type job struct {
	t       *testing.T
	ctx     context.Context
	tb      testbed
	hub     *Hub
	vms     []*VM
	sshKey  string // private key file; the MachineClass authorizes its .pub
	timings []string
	// describe lists "kind name" pairs whose roostctl describe output
	// helps when a wait fails.
	describe []string
}

// newJob starts a one-member hub with a deadline for the whole test (at
// most max, a minute before go test's -timeout), pushes the testbed
// release and the agent extension, and makes an SSH key.
func newJob(t *testing.T, tb testbed, max time.Duration) *job {
	t.Helper()
	deadline := time.Now().Add(max)
	if d, ok := t.Deadline(); ok && d.Add(-time.Minute).Before(deadline) {
		deadline = d.Add(-time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	t.Cleanup(cancel)
	j := &job{t: t, ctx: ctx, tb: tb}
	t.Cleanup(func() {
		if len(j.timings) > 0 {
			t.Logf("timings: %s", strings.Join(j.timings, ", "))
		}
	})
	step := time.Now()
	j.hub = StartHub(t, tb.Bin)
	t.Logf("hub: 127.0.0.1:%d, data %s, log %s", j.hub.APIPort, j.hub.Dir, j.hub.Log)
	j.pushImage(tb.Bundle)
	// every Revision runs the newest pushed roost-agent: the testbed OS,
	// like a stock Flatcar, has none
	j.hub.MustCtl(t, ctx, "extension", "push", tb.Agent)
	j.logTiming("hub start, image and agent extension push", time.Since(step))

	j.sshKey = filepath.Join(t.TempDir(), "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "roost-e2e", "-f", j.sshKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	return j
}

// pushImage pushes a release bundle signed by the testbed key.
func (j *job) pushImage(bundle string) {
	j.t.Helper()
	args := []string{"image", "push", bundle, "--key", j.tb.ReleaseKey}
	out := j.hub.MustCtl(j.t, j.ctx, args...)
	j.t.Logf("roostctl %s:\n%s", strings.Join(args, " "), strings.TrimSpace(out))
}

// enrollmentISO bakes the enrollment ISO of the testbed release: the hub
// as QEMU's user network sees the host (10.0.2.2), a fresh token, the
// testbed release key, the agent extension.
func (j *job) enrollmentISO() string {
	j.t.Helper()
	step := time.Now()
	iso := filepath.Join(j.t.TempDir(), "enroll.iso")
	if out, err := exec.CommandContext(j.ctx, filepath.Join(j.tb.Bin, "roost-image"), "enroll", "--release", j.tb.Bundle,
		"--config", j.hub.Admin, "--hub", fmt.Sprintf("10.0.2.2:%d", j.hub.APIPort), "--release-key", j.tb.ReleaseKey,
		"--extension", j.tb.Agent, "--create-token", "--expires", "1h", "-o", iso).CombinedOutput(); err != nil {
		j.t.Fatalf("roost-image enroll: %v\n%s", err, out)
	}
	j.logTiming("enrollment ISO", time.Since(step))
	return iso
}

// sshPub is the public key the MachineClass authorizes.
func (j *job) sshPub() string {
	j.t.Helper()
	pub, err := os.ReadFile(j.sshKey + ".pub")
	if err != nil {
		j.t.Fatal(err)
	}
	return string(pub)
}

// newVM prepares a server whose failing waits print this job's diagnosis.
func (j *job) newVM(cfg VMConfig) *VM {
	j.t.Helper()
	v := NewVM(j.t, cfg)
	v.Diagnose = j.diagnose
	j.vms = append(j.vms, v)
	return v
}

func (j *job) logTiming(what string, d time.Duration) {
	s := fmt.Sprintf("%s: %ds", what, int(d.Round(time.Second).Seconds()))
	j.timings = append(j.timings, s)
	j.t.Logf("TIMING %s", s)
}

// fatalf fails with the console tails of the servers, the hub log tail and
// roostctl's view of the fleet.
func (j *job) fatalf(format string, args ...any) {
	j.t.Helper()
	switch len(j.vms) {
	case 0:
		j.t.Fatalf("%s\n%s", fmt.Sprintf(format, args...), j.diagnose())
	case 1:
		j.vms[0].Fatalf(format, args...)
	default:
		var b strings.Builder
		for _, v := range j.vms {
			fmt.Fprintf(&b, "----- console tail (%s) -----\n%s\n", v.Console, tail(sanitize(v.ConsoleSince(0)), 5000))
		}
		j.t.Fatalf("%s\n%s%s", fmt.Sprintf(format, args...), b.String(), j.diagnose())
	}
}

// diagnose is the hub log tail and roostctl's view of the fleet.
func (j *job) diagnose() string {
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
	for _, d := range j.describe {
		show(append([]string{"describe"}, strings.Fields(d)...)...)
	}
	show("get", "servers", "-o", "wide")
	show("get", "machines", "-o", "wide")
	show("get", "leases")
	return b.String()
}

// poll calls ok every 3 s until it returns true, failing after timeout
// (or when a server's QEMU exits) with the last state it described.
func (j *job) poll(what string, timeout time.Duration, ok func() (bool, string)) {
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
		for _, v := range j.vms {
			if v.Died() {
				j.fatalf("waiting for %s: QEMU exited (last: %s)\nqemu log:\n%s", what, last, tailFile(v.QEMULog, 2000))
			}
		}
		select {
		case <-ctx.Done():
			j.fatalf("timed out after %s waiting for %s (last: %s)", timeout, what, last)
		case <-time.After(3 * time.Second):
		}
	}
}

// apply writes manifest to a file and applies it with roostctl.
func (j *job) apply(name, manifest string) {
	j.t.Helper()
	f := filepath.Join(j.t.TempDir(), name)
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		j.t.Fatal(err)
	}
	out := j.hub.MustCtl(j.t, j.ctx, "apply", "-f", f)
	j.t.Logf("roostctl apply -f %s:\n%s", name, strings.TrimSpace(out))
}

func (j *job) getMachine(name string) (*Machine, error) {
	var m Machine
	if err := j.hub.GetJSON(j.ctx, &m, "machine", name); err != nil {
		return nil, err
	}
	return &m, nil
}

func (j *job) getServer(name string) (*Server, error) {
	var s Server
	if err := j.hub.GetJSON(j.ctx, &s, "server", name); err != nil {
		return nil, err
	}
	return &s, nil
}

// waitEnrolled waits until every one of the servers named by SMBIOS UUID
// is Available on the hub (the hub names a Server by its system UUID).
func (j *job) waitEnrolled(timeout time.Duration, uuids ...string) {
	j.t.Helper()
	j.poll(fmt.Sprintf("%d Server(s) Available", len(uuids)), timeout, func() (bool, string) {
		ss, err := j.hub.listServers(j.ctx)
		if err != nil {
			return false, err.Error()
		}
		state := map[string]string{}
		for _, s := range ss {
			state[strings.ToLower(s.Metadata.Name)] = s.Status.State
		}
		var parts []string
		done := true
		for _, u := range uuids {
			st := state[strings.ToLower(u)]
			if st == "" {
				st = "not enrolled"
			}
			done = done && st == "Available"
			parts = append(parts, fmt.Sprintf("%s %s", u, st))
		}
		return done, strings.Join(parts, ", ")
	})
}

// assign assigns a Server to a Pool with a host name and returns the
// Machine's name.
func (j *job) assign(pool, server, hostname string) string {
	j.t.Helper()
	out, err := j.hub.Ctl(j.ctx, "pool", "assign", pool, server, "--hostname", hostname, "-o", "json")
	if err != nil {
		j.fatalf("roostctl pool assign: %v\n%s", err, out)
	}
	name := machineName(out)
	if name == "" {
		j.fatalf("roostctl pool assign %s %s -o json names no Machine:\n%s", pool, server, out)
	}
	j.describe = append(j.describe, "machine "+name, "server "+server)
	j.t.Logf("pool assign %s %s: Machine %s (%s)", pool, server, name, hostname)
	return name
}

// waitReady waits until Machine name is Ready on its desired Revision and
// returns that Revision. want > 0 also requires that exact Revision.
func (j *job) waitReady(name, what string, want int64, timeout time.Duration) int64 {
	j.t.Helper()
	var rev int64
	j.poll(what, timeout, func() (bool, string) {
		m, err := j.getMachine(name)
		if err != nil {
			return false, err.Error()
		}
		rev = int64(m.Status.Revision)
		return readyOn(m, want), machineState(m)
	})
	return rev
}

// readyOn reports whether m is Ready on its desired Revision (and, with
// want > 0, that Revision is want).
func readyOn(m *Machine, want int64) bool {
	st := m.Status
	return st.Phase == "Ready" && st.Revision > 0 && st.BootedRevision == st.Revision && (want == 0 || int64(st.Revision) == want)
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

// waitBoot waits for a kernel booted from a staged Revision on v's console
// after offset and returns the Revision number on its command line and the
// offset past it.
func (j *job) waitBoot(v *VM, offset int64, timeout time.Duration) (int64, int64) {
	j.t.Helper()
	end, subs := v.WaitConsoleRegexp(j.ctx, offset, cmdlineRevision, timeout)
	n, _ := strconv.ParseInt(subs[1], 10, 64)
	return n, end
}

// bootsOf counts the kernel boots of Revision rev on v's console after offset.
func bootsOf(v *VM, offset, rev int64) int {
	n := 0
	for _, m := range cmdlineRevision.FindAllStringSubmatch(v.ConsoleSince(offset), -1) {
		if m[1] == strconv.FormatInt(rev, 10) {
			n++
		}
	}
	return n
}

// ssh runs a command on a server (its SSH port forwarded to loopback) as
// core and returns its output.
func (j *job) ssh(port int, command string) (string, error) {
	ctx, cancel := context.WithTimeout(j.ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", append(sshOptions(j.sshKey, port), command)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ssh %q: %v\n%s", command, err, out)
	}
	return string(out), nil
}

// sshOptions are ssh's arguments to log in as core with key on the
// server whose SSH port is forwarded to 127.0.0.1:port.
func sshOptions(key string, port int) []string {
	return []string{"-F", "/dev/null",
		"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "ConnectTimeout=15", "-o", "LogLevel=ERROR", "-o", "IdentitiesOnly=yes",
		"-i", key, "-p", strconv.Itoa(port), "core@127.0.0.1"}
}

// waitSSH logs in as core on port (retrying while sshd starts: it makes its
// host keys at boot) and returns the output of command.
func (j *job) waitSSH(port int, command string) string {
	j.t.Helper()
	var out string
	j.poll("SSH as core: "+command, 5*time.Minute, func() (bool, string) {
		o, err := j.ssh(port, command)
		if err != nil {
			return false, strings.TrimSpace(err.Error())
		}
		out = strings.TrimSpace(o)
		return true, "ssh ok: " + out
	})
	return out
}

// machineClass renders the MachineClass "e2e" with the test's SSH key
// and, by name, the extensions its Machines run.
func machineClass(pubKey string, extensions ...string) string {
	return machineClassArgs(pubKey, nil, extensions...)
}

// machineClassArgs is machineClass with kernel arguments.
func machineClassArgs(pubKey string, kernelArgs []string, extensions ...string) string {
	return machineClassSpec(pubKey, "", kernelArgs, extensions...)
}

// machineClassWith is machineClass with more spec lines (YAML, indented
// two spaces).
func machineClassWith(pubKey, more string, extensions ...string) string {
	return machineClassSpec(pubKey, more, nil, extensions...)
}

func machineClassSpec(pubKey, more string, kernelArgs []string, extensions ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: roost.io/v1\nkind: MachineClass\nmetadata:\n  name: e2e\nspec:\n")
	b.WriteString(more)
	b.WriteString("  installDisk:\n    minSize: 8Gi\n")
	fmt.Fprintf(&b, "  sshAuthorizedKeys:\n    - %q\n", strings.TrimSpace(pubKey))
	if len(extensions) > 0 {
		fmt.Fprintf(&b, "  extensions: [%s]\n", strings.Join(extensions, ", "))
	}
	if len(kernelArgs) > 0 {
		b.WriteString("  kernelArgs:\n")
		for _, a := range kernelArgs {
			fmt.Fprintf(&b, "    - %q\n", a)
		}
	}
	return b.String()
}
