package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roostfleet/roost/imagebuilder/release"
	"github.com/roostfleet/roost/internal/cpio"
)

// rebootLine is what the kernel prints when a server restarts.
const rebootLine = "reboot: Restarting system"

// v2ReleaseFile is the file release v2 adds to the testbed's initrd; it
// holds "v2".
const v2ReleaseFile = "/etc/roost-e2e-release"

// appendReleaseFile writes dst: the initrd src, zero padding to 512
// bytes, and a newc cpio archive holding v2ReleaseFile. The kernel unpacks
// concatenated initramfs archives in order (skipping zero padding), as it
// does for the Revision's config initrd after the image initrd.
func appendReleaseFile(t *testing.T, src, dst string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	buf := bytes.NewBuffer(data)
	buf.Write(make([]byte, (512-len(data)%512)%512))
	if err := cpio.Write(buf, []cpio.File{{Path: v2ReleaseFile, Mode: 0o644, Data: []byte("v2\n")}}, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// v2Marker is the kernel argument release v2 adds, so the hosts themselves
// show (in /proc/cmdline) that they run v2's boot entry.
const v2Marker = "roost.e2e.release=v2"

// rolloutPool is the Pool of TestRolloutTwoServers: standalone hosts that
// follow the testbed channel, one reboot at a time, inside window e2e.
const rolloutPool = `apiVersion: roost.io/v1
kind: Pool
metadata:
  name: rollout
spec:
  machineClass: e2e
  imageChannel: test
  maintenanceWindows: [e2e]
  rollout:
    maxUnavailable: 1
`

// maintenanceWindow is window "e2e": a daily opening of length d that
// starts at start's time of day (UTC).
func maintenanceWindow(start time.Time, d time.Duration) string {
	start = start.UTC()
	return fmt.Sprintf(`apiVersion: roost.io/v1
kind: MaintenanceWindow
metadata:
  name: e2e
spec:
  rrule: FREQ=DAILY;BYHOUR=%d;BYMINUTE=%d;BYSECOND=0
  duration: %s
  timeZone: UTC
`, start.Hour(), start.Minute(), d)
}

// rolloutNode is one server of the rollout and what the test saw of it.
type rolloutNode struct {
	uuid, machine, hostname string
	vm                      *VM
	sshPort                 int
	rev1, rev2              int64     // Revisions on release v1 and v2
	rebootAt, readyAt       time.Time // when the reboot into rev2 and Ready on it were seen
}

// TestRolloutTwoServers is a monthly rollout on two UEFI QEMU servers of
// one Pool (maxUnavailable 1) that follows channel test: both install
// release v1; release v2 (the same kernel and initrd, a later date, a
// marker kernel argument, signed by the testbed key) is pushed and
// promoted to the channel while the Pool's maintenance window is closed, so the agents pre-stage it and nothing reboots; the window
// opens and the servers move to v2 one at a time, and both report v2.
func TestRolloutTwoServers(t *testing.T) {
	tb := needTestbed(t)
	j := newJob(t, tb, 50*time.Minute)
	ctx := j.ctx
	v1 := readRelease(t, tb.Bundle).Version
	v2dir, v2 := j.releaseV2()
	// a pushed release is on no channel until it is promoted
	j.promote(v1, "test")

	// ---- the fleet: the window is closed for the next hours ----------------
	iso := j.enrollmentISO()
	j.apply("fleet.yaml", machineClass(j.sshPub())+"---\n"+rolloutPool+"---\n"+maintenanceWindow(time.Now().Add(6*time.Hour), time.Hour))
	j.describe = append(j.describe, "pool rollout")
	t.Logf("roostctl window next --pool rollout:\n%s", j.hub.MustCtl(t, ctx, "window", "next", "--pool", "rollout", "-n", "2"))

	// ---- two servers enroll and install v1, one at a time ------------------
	// rollout-1 has never booted and has no CD: it sits powered off under
	// its (emulated) BMC, registered with the hub and provisioned with one
	// command; rollout-2 boots the ISO from its CD drive.
	nodes := []*rolloutNode{
		{uuid: "6f0e3c2a-52d1-4b7e-9a51-00000000e2f1", hostname: "rollout-1"},
		{uuid: "6f0e3c2a-52d1-4b7e-9a51-00000000e2f2", hostname: "rollout-2"},
	}
	step := time.Now()
	for i, n := range nodes {
		n.sshPort = freePort(t)
		n.vm = j.newVM(VMConfig{Dir: filepath.Join(t.TempDir(), n.hostname), ISO: iso, UUID: n.uuid,
			MgmtMAC: fmt.Sprintf("52:54:00:e2:01:%02x", i+1), SSHPort: n.sshPort})
		if i > 0 {
			n.vm.Start()
		}
	}
	bmcNode := j.provisionByBMC(nodes[0], "52:54:00:e2:01:01", iso)
	j.waitEnrolled(15*time.Minute, nodes[0].uuid, nodes[1].uuid)
	j.logTiming("boot-to-enrolled (both)", time.Since(step))
	bmcNode.checkEnrolled(j)
	step = time.Now()
	for _, n := range nodes {
		n.machine = j.assign("rollout", n.uuid, n.hostname)
	}
	for _, n := range nodes {
		n.rev1 = j.waitReady(n.machine, n.hostname+" Ready on release v1", 0, 25*time.Minute)
	}
	j.logTiming("assign-to-Ready on v1 (both)", time.Since(step))
	for _, n := range nodes {
		j.checkImage(n, v1)
		if got := j.waitSSH(n.sshPort, "cat "+v2ReleaseFile+" 2>/dev/null || echo none"); got != "none" {
			j.fatalf("%s on v1 has %s (%q)", n.hostname, v2ReleaseFile, got)
		}
	}

	// ---- v2 arrives while the window is closed: staged, no reboot ----------
	step = time.Now()
	offsets := map[*rolloutNode]int64{}
	for _, n := range nodes {
		offsets[n] = n.vm.ConsoleOffset()
	}
	j.pushImage(v2dir)
	j.promote(v2, "test")
	for _, n := range nodes {
		n.rev2 = j.waitStaged(n)
	}
	j.logTiming("v2 pushed to pre-staged (both)", time.Since(step))
	// one lease retry of the agents (30 s) later, the pool still waits
	time.Sleep(35 * time.Second)
	p := j.getPool("rollout")
	if p.Status.Rollout.Phase != "Waiting" || p.Status.Rollout.TargetVersion != v2 || p.Status.Rollout.NextWindowStart == "" {
		j.fatalf("window closed: rollout %+v, want phase Waiting, target %s and the next window start", p.Status.Rollout, v2)
	}
	if ls := j.leases("rollout"); len(ls) > 0 {
		j.fatalf("window closed, yet Leases are held: %+v", ls)
	}
	for _, n := range nodes {
		if c := n.vm.CountConsole(offsets[n], rebootLine); c > 0 {
			j.fatalf("%s rebooted %d time(s) while the window was closed", n.hostname, c)
		}
		if s, err := j.getServer(n.uuid); err == nil {
			if c := condition(s.Status.Conditions, "LeaseGranted"); c != nil {
				t.Logf("%s while the window is closed: LeaseGranted=%s %s: %s", n.hostname, c.Status, c.Reason, c.Message)
			}
		}
	}
	t.Logf("window closed: roostctl rollout status rollout:\n%s", j.hub.MustCtl(t, ctx, "rollout", "status", "rollout"))

	// ---- the window opens: one server at a time moves to v2 ----------------
	step = time.Now()
	j.apply("window-open.yaml", maintenanceWindow(time.Now().Add(-10*time.Minute), 3*time.Hour))
	maxLeases, tokens := j.watchRollout(nodes, offsets, 30*time.Minute)
	j.logTiming("window open to both Ready on v2", time.Since(step))
	first, second := nodes[0], nodes[1]
	if second.rebootAt.Before(first.rebootAt) {
		first, second = second, first
	}
	t.Logf("%s rebooted at +%ds, Ready on v2 at +%ds; %s rebooted at +%ds, Ready on v2 at +%ds",
		first.hostname, secs(first.rebootAt.Sub(step)), secs(first.readyAt.Sub(step)),
		second.hostname, secs(second.rebootAt.Sub(step)), secs(second.readyAt.Sub(step)))
	if !second.rebootAt.After(first.readyAt) {
		j.fatalf("%s rebooted before %s was Ready on v2", second.hostname, first.hostname)
	}
	if maxLeases != 1 {
		j.fatalf("at most %d Lease(s) of pool rollout were seen at once, want exactly 1", maxLeases)
	}
	for _, n := range nodes {
		if len(tokens[n.uuid]) != 1 {
			j.fatalf("%s held Leases with fencing tokens %v, want exactly one", n.hostname, tokens[n.uuid])
		}
		if b := bootsOf(n.vm, offsets[n], n.rev2); b != 1 {
			j.fatalf("%s booted revision %d %d times, want once", n.hostname, n.rev2, b)
		}
		j.checkImage(n, v2)
		if cmdline := j.waitSSH(n.sshPort, "cat /proc/cmdline"); !strings.Contains(cmdline, v2Marker) || !strings.Contains(cmdline, fmt.Sprintf("roost.revision=%d", n.rev2)) {
			j.fatalf("%s /proc/cmdline %q: want %s and roost.revision=%d", n.hostname, cmdline, v2Marker, n.rev2)
		}
		if got := j.waitSSH(n.sshPort, "cat "+v2ReleaseFile); got != "v2" {
			j.fatalf("%s %s: %q, want v2 (the v2 initrd)", n.hostname, v2ReleaseFile, got)
		}
	}
	j.poll("pool rollout Idle on v2", 2*time.Minute, func() (bool, string) {
		r := j.getPool("rollout").Status.Rollout
		return r.Phase == "Idle" && r.TargetVersion == v2 && r.Updated == 2 && r.Total == 2,
			fmt.Sprintf("phase=%s target=%s updated=%d/%d", r.Phase, r.TargetVersion, r.Updated, r.Total)
	})
	t.Logf("roostctl rollout status rollout:\n%s", j.hub.MustCtl(t, ctx, "rollout", "status", "rollout"))
	t.Logf("roostctl get servers:\n%s", j.hub.MustCtl(t, ctx, "get", "servers"))
}

func secs(d time.Duration) int { return int(d.Round(time.Second).Seconds()) }

// readRelease reads a bundle's release.json.
func readRelease(t *testing.T, bundle string) *release.Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(bundle, "release.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m release.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s/release.json: %v", bundle, err)
	}
	return &m
}

// releaseV2 builds release v2 of the testbed with roost-image release: the
// bundle's kernel and boot loader, its initrd with v2ReleaseFile appended
// (so v2 is a new download and the hosts show which initrd they run),
// version v1+"-v2" a month later, the default console arguments plus v2Marker, signed
// with the testbed key. It returns the bundle directory and the version.
func (j *job) releaseV2() (string, string) {
	j.t.Helper()
	v1 := readRelease(j.t, j.tb.Bundle)
	d := release.Definition{
		APIVersion:  release.APIVersion,
		Kind:        release.DefinitionKind,
		Name:        v1.Name,
		Version:     v1.Version + "-v2",
		Channel:     v1.Channel,
		Date:        v1.Date.AddDate(0, 1, 0),
		Description: "the testbed release " + v1.Version + " again, as next month's release",
		Cmdline:     []string{"console=tty0", "console=ttyS0,115200n8", v2Marker},
		Components:  v1.Components,
	}
	for _, s := range []struct {
		name string
		src  *release.Source
	}{{"kernel", &d.Kernel}, {"initrd", &d.Initrd}, {"bootloader", &d.Bootloader}} {
		a, ok := v1.Artifact(s.name)
		if !ok {
			j.t.Fatalf("%s/release.json has no %s", j.tb.Bundle, s.name)
		}
		s.src.Path = filepath.Join(j.tb.Bundle, a.File)
	}
	dir := j.t.TempDir()
	d.Initrd.Path = appendReleaseFile(j.t, d.Initrd.Path, filepath.Join(dir, "initrd-v2.img"))
	def, err := json.Marshal(d)
	if err != nil {
		j.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "v2.yaml"), def, 0o644); err != nil {
		j.t.Fatal(err)
	}
	key := strings.TrimSuffix(j.tb.ReleaseKey, ".pub") + ".key"
	out, err := exec.CommandContext(j.ctx, filepath.Join(j.tb.Bin, "roost-image"), "release",
		"--manifest", filepath.Join(dir, "v2.yaml"), "--key", key, "-o", filepath.Join(dir, "bundle")).CombinedOutput()
	if err != nil {
		j.t.Fatalf("roost-image release (v2): %v\n%s", err, out)
	}
	j.t.Logf("release v2:\n%s", strings.TrimSpace(string(out)))
	return filepath.Join(dir, "bundle"), d.Version
}

// promote puts release version on channel.
func (j *job) promote(version, channel string) {
	j.t.Helper()
	out := j.hub.MustCtl(j.t, j.ctx, "image", "promote", version, "--channel", channel)
	j.t.Logf("roostctl image promote %s --channel %s: %s", version, channel, strings.TrimSpace(out))
}

// checkImage checks that a server reports the image version want (the
// image of the Revision its agent says it booted).
func (j *job) checkImage(n *rolloutNode, want string) {
	j.t.Helper()
	j.poll(n.hostname+" reports image "+want, 2*time.Minute, func() (bool, string) {
		s, err := j.getServer(n.uuid)
		if err != nil {
			return false, err.Error()
		}
		return s.Status.ImageVersion == want, fmt.Sprintf("image %q booted revision %d", s.Status.ImageVersion, s.Status.BootedRevision)
	})
}

// waitStaged waits until n's Machine wants a Revision newer than rev1 and
// its agent staged that Revision's boot entry (condition Staged), and
// returns the Revision.
func (j *job) waitStaged(n *rolloutNode) int64 {
	j.t.Helper()
	var rev int64
	j.poll(n.hostname+" stages the v2 Revision", 10*time.Minute, func() (bool, string) {
		m, err := j.getMachine(n.machine)
		if err != nil {
			return false, err.Error()
		}
		rev = int64(m.Status.Revision)
		if rev <= n.rev1 {
			return false, machineState(m)
		}
		s, err := j.getServer(n.uuid)
		if err != nil {
			return false, err.Error()
		}
		c := condition(s.Status.Conditions, "Staged")
		if c == nil {
			return false, machineState(m) + "; no Staged condition"
		}
		staged := c.Status == "True" && strings.HasPrefix(c.Message, fmt.Sprintf("revision %d ", rev))
		return staged, fmt.Sprintf("%s; Staged=%s %s", machineState(m), c.Status, c.Message)
	})
	return rev
}

// watchRollout follows the rollout every 2 s until both servers are Ready
// on their v2 Revisions. It fails when a server reboots while the other
// one rebooted and is not Ready on v2 yet; it returns the most Leases of
// the pool seen at once and the fencing tokens each server held.
func (j *job) watchRollout(nodes []*rolloutNode, offsets map[*rolloutNode]int64, timeout time.Duration) (int, map[string][]uint64) {
	j.t.Helper()
	deadline := time.Now().Add(timeout)
	maxLeases, tokens := 0, map[string][]uint64{}
	ready := func(n *rolloutNode) bool {
		m, err := j.getMachine(n.machine)
		return err == nil && readyOn(m, n.rev2)
	}
	phase := ""
	for {
		ls := j.leases("rollout")
		maxLeases = max(maxLeases, len(ls))
		for _, l := range ls {
			tok := uint64(l.Spec.FencingToken)
			if seen := tokens[l.Spec.Server]; len(seen) == 0 || seen[len(seen)-1] != tok {
				tokens[l.Spec.Server] = append(seen, tok)
				j.t.Logf("  lease: %s fencing token %d phase %q revision %d: %s", l.Spec.Server, tok, l.Spec.Phase, l.Spec.Revision, l.Spec.Reason)
			}
		}
		if r := j.getPool("rollout").Status.Rollout; r.Phase != phase {
			phase = r.Phase
			j.t.Logf("  pool rollout: phase=%s updated=%d/%d unavailable=%d %s", r.Phase, r.Updated, r.Total, r.Unavailable, r.Reason)
		}
		for _, n := range nodes {
			if n.readyAt.IsZero() && !n.rebootAt.IsZero() && ready(n) {
				n.readyAt = time.Now()
				j.t.Logf("  %s Ready on revision %d (v2)", n.hostname, n.rev2)
			}
		}
		for _, n := range nodes {
			if !n.rebootAt.IsZero() || n.vm.CountConsole(offsets[n], rebootLine) == 0 {
				continue
			}
			n.rebootAt = time.Now()
			j.t.Logf("  %s reboots", n.hostname)
			for _, o := range nodes {
				// the other server may have become Ready since this
				// round's check: ask again before calling it an overlap
				if o != n && !o.rebootAt.IsZero() && o.readyAt.IsZero() && !ready(o) {
					j.fatalf("%s reboots while %s is down (rebooted, not Ready on v2): two reboots at once in a pool with maxUnavailable 1", n.hostname, o.hostname)
				}
			}
		}
		if !nodes[0].readyAt.IsZero() && !nodes[1].readyAt.IsZero() {
			return maxLeases, tokens
		}
		for _, n := range nodes {
			if n.vm.Died() {
				j.fatalf("%s: QEMU exited\nqemu log:\n%s", n.hostname, tailFile(n.vm.QEMULog, 2000))
			}
		}
		if time.Now().After(deadline) || j.ctx.Err() != nil {
			j.fatalf("timed out after %s waiting for both servers Ready on v2", timeout)
		}
		time.Sleep(2 * time.Second)
	}
}

// Pool is the part of a Pool the rollout test reads.
type Pool struct {
	Metadata Meta `json:"metadata"`
	Status   struct {
		Rollout struct {
			Phase           string `json:"phase"`
			TargetVersion   string `json:"targetVersion"`
			Updated         int    `json:"updated"`
			Total           int    `json:"total"`
			Unavailable     int    `json:"unavailable"`
			Reason          string `json:"reason"`
			NextWindowStart string `json:"nextWindowStart"`
		} `json:"rollout"`
	} `json:"status"`
}

func (j *job) getPool(name string) *Pool {
	j.t.Helper()
	var p Pool
	if err := j.hub.GetJSON(j.ctx, &p, "pool", name); err != nil {
		j.fatalf("%v", err)
	}
	return &p
}

// Lease is the part of a Lease the rollout test reads.
type Lease struct {
	Metadata Meta `json:"metadata"`
	Spec     struct {
		Server       string `json:"server"`
		FencingToken Int64  `json:"fencingToken"`
		Revision     Int64  `json:"revision"`
		Pool         string `json:"pool"`
		Phase        string `json:"phase"`
		Reason       string `json:"reason"`
	} `json:"spec"`
}

// leases lists the Leases held for pool.
func (j *job) leases(pool string) []Lease {
	j.t.Helper()
	var l struct {
		Items []Lease `json:"items"`
	}
	if err := j.hub.GetJSON(j.ctx, &l, "leases"); err != nil {
		j.fatalf("%v", err)
	}
	var out []Lease
	for _, x := range l.Items {
		if x.Spec.Pool == pool {
			out = append(out, x)
		}
	}
	return out
}
