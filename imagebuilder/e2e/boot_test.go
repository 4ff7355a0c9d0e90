// Package e2e boots enrollment images in QEMU (software emulation): the
// testbed release bundle (make testbed) baked by roost-image, under SeaBIOS
// and OVMF, as a CD and as a USB stick (a hard disk), with a real hub on the host's loopback (the guest reaches it as
// 10.0.2.2 through QEMU user networking). It asserts on the hub side that
// the Server enrolled, and on the console that Ignition and the agent ran.
//
// Run: make build testbed && ROOST_E2E=1 go test -v -timeout 30m ./imagebuilder/e2e/
// (images/deps.sh --e2e installs QEMU and OVMF; make testbed does too).
package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func repoPath(p ...string) string {
	return filepath.Join(append([]string{"..", ".."}, p...)...)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type firmware struct {
	name string
	args func(t *testing.T) []string
}

var firmwares = []firmware{
	{"seabios", func(t *testing.T) []string { return nil }},
	{"ovmf", func(t *testing.T) []string {
		code := "/usr/share/OVMF/OVMF_CODE_4M.fd"
		vars := "/usr/share/OVMF/OVMF_VARS_4M.fd"
		if _, err := os.Stat(code); err != nil {
			t.Skipf("OVMF not installed (images/deps.sh --e2e): %v", err)
		}
		v := filepath.Join(t.TempDir(), "vars.fd")
		data, err := os.ReadFile(vars)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(v, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return []string{"-drive", "if=pflash,format=raw,readonly=on,file=" + code, "-drive", "if=pflash,format=raw,file=" + v}
	}},
}

// medium is how the enrollment ISO is attached: as a CD, or as a hard disk
// the way a USB stick written with dd is (the isohybrid MBR and GPT).
type medium string

const (
	cdrom medium = "cdrom"
	disk  medium = "disk"
)

func (m medium) args(img string) []string {
	if m == disk {
		return []string{"-drive", "file=" + img + ",format=raw,if=ide,media=disk"}
	}
	return []string{"-cdrom", img}
}

// bootCase is one boot of TestEnrollmentImageBoots.
type bootCase struct {
	firmware firmware
	medium   medium
}

func (c bootCase) name() string { return c.firmware.name + "/" + string(c.medium) }

// bootCases: a CD under SeaBIOS, and the same ISO as a USB stick under
// SeaBIOS (isolinux through the isohybrid MBR) and OVMF (GRUB from the GPT's
// EFI System Partition). A CD under OVMF is how test/e2e boots every server.
var bootCases = []bootCase{
	{firmwares[0], cdrom},
	{firmwares[0], disk},
	{firmwares[1], disk},
}

// TestEnrollmentImageBoots boots each of bootCases to enrollment on one hub.
func TestEnrollmentImageBoots(t *testing.T) {
	if os.Getenv("ROOST_E2E") == "" {
		t.Skip("set ROOST_E2E=1 (QEMU boots take minutes)")
	}
	bin, _ := filepath.Abs(os.Getenv("ROOST_BIN"))
	if os.Getenv("ROOST_BIN") == "" {
		bin, _ = filepath.Abs(repoPath("bin"))
	}
	bundle := os.Getenv("ROOST_TESTBED_BUNDLE")
	if bundle == "" {
		bundle = repoPath("_output", "testbed", "bundle")
	}
	if _, err := os.Stat(filepath.Join(bundle, "release.json")); err != nil {
		t.Fatalf("no testbed bundle (make testbed): %v", err)
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatal("qemu-system-x86_64 missing (images/deps.sh --e2e)")
	}

	// a one-member hub on loopback
	dir := t.TempDir()
	api := freePort(t)
	hub := exec.Command(filepath.Join(bin, "roost-hub"), "--data-dir", filepath.Join(dir, "hub"),
		"--api-addr", fmt.Sprintf("127.0.0.1:%d", api), "--raft-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	hubLog, _ := os.Create(filepath.Join(dir, "hub.log"))
	hub.Stdout, hub.Stderr = hubLog, hubLog
	if err := hub.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Process.Kill(); _, _ = hub.Process.Wait() })
	admin := filepath.Join(dir, "hub", "admin.conf")
	waitFor(t, 60*time.Second, "admin.conf", func() bool { _, err := os.Stat(admin); return err == nil })

	for i, c := range bootCases {
		fw := c.firmware
		// a distinct machine per boot (SMBIOS UUID, MAC): the hub would
		// otherwise see the same Server enroll again
		uuid := fmt.Sprintf("6f0e3c2a-52d1-4b7e-9a51-%012d", i+1)
		mac := fmt.Sprintf("52:54:00:ee:00:%02x", i+1)
		t.Run(c.name(), func(t *testing.T) {
			fwArgs := fw.args(t)
			before := servers(t, bin, admin)
			img := filepath.Join(t.TempDir(), "enroll.iso")
			out, err := exec.Command(filepath.Join(bin, "roost-image"), "enroll", "--release", bundle,
				"--config", admin, "--hub", fmt.Sprintf("10.0.2.2:%d", api),
				"--extension", filepath.Join(filepath.Dir(bundle), "roost-agent.raw"),
				"--create-token", "--expires", "1h", "-o", img).CombinedOutput()
			if err != nil {
				t.Fatalf("roost-image enroll: %v\n%s", err, out)
			}
			console := filepath.Join(t.TempDir(), "console.log")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			args := append([]string{"-m", "1536", "-smp", "1", "-nographic", "-no-reboot",
				"-monitor", "none", "-serial", "file:" + console,
				"-uuid", uuid, "-nic", "user,model=virtio-net-pci,mac=" + mac}, append(c.medium.args(img), fwArgs...)...)
			vm := exec.CommandContext(ctx, qemu, args...)
			vm.Stdout, vm.Stderr = os.Stderr, os.Stderr
			start := time.Now()
			if err := vm.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cancel(); _ = vm.Wait() }()
			defer func() {
				if t.Failed() {
					data, _ := os.ReadFile(console)
					t.Logf("console:\n%s", tail(string(data), 6000))
					hl, _ := os.ReadFile(filepath.Join(dir, "hub.log"))
					t.Logf("hub log:\n%s", tail(string(hl), 3000))
				}
			}()
			con := func() string { d, _ := os.ReadFile(console); return string(d) }
			waitFor(t, 10*time.Minute, "systemd in the guest", func() bool {
				return strings.Contains(con(), "systemd") && strings.Contains(con(), "running in system mode")
			})
			t.Logf("%s: systemd after %s", c.name(), time.Since(start).Round(time.Second))
			waitFor(t, 5*time.Minute, "Ignition applied", func() bool { return strings.Contains(con(), "roost-ignition: done") })
			t.Logf("%s: ignition done after %s", c.name(), time.Since(start).Round(time.Second))
			waitFor(t, 5*time.Minute, "a new Server on the hub", func() bool { return servers(t, bin, admin) > before })
			t.Logf("%s: enrolled after %s", c.name(), time.Since(start).Round(time.Second))
			if fw.name == "seabios" && c.medium == cdrom {
				checkBIOSRefused(t, bin, admin, uuid)
			}
		})
	}
}

// biosPool is a Pool the legacy-BIOS server is assigned to.
const biosPool = `apiVersion: roost.io/v1
kind: MachineClass
metadata:
  name: bios
spec: {}
---
apiVersion: roost.io/v1
kind: Pool
metadata:
  name: bios
spec:
  machineClass: bios
`

// checkBIOSRefused assigns the Server uuid, enrolled under SeaBIOS, to a
// Pool: the claim is refused before any Machine is made, saying that the
// firmware is legacy BIOS and what to do (issue 21, acceptance 3: an
// installed Revision boots through systemd-boot, which needs UEFI).
func checkBIOSRefused(t *testing.T, bin, admin, uuid string) {
	t.Helper()
	ctl := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(bin, "roostctl"), args...)
		cmd.Env = append(os.Environ(), "ROOST_CONFIG="+admin)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := ctl(biosPool, "apply", "-f", "-"); err != nil {
		t.Fatalf("roostctl apply: %v\n%s", err, out)
	}
	var out string
	waitFor(t, 2*time.Minute, "the claim of the BIOS server refused for its firmware", func() bool {
		var err error
		out, err = ctl("", "pool", "assign", "bios", uuid)
		if err == nil {
			t.Fatalf("roostctl pool assign of a legacy-BIOS server succeeded:\n%s", out)
		}
		return strings.Contains(out, "legacy BIOS") // before: "Enrolling, not Available"
	})
	if !strings.Contains(out, "UEFI") {
		t.Errorf("the refusal does not say what to do: %s", out)
	}
	if m, _ := ctl("", "get", "machines", "-o", "json"); strings.Contains(m, `"kind": "Machine"`) || strings.Contains(m, `"kind":"Machine"`) {
		t.Errorf("a refused claim left Machines: %s", m)
	}
	t.Logf("claim refused: %s", strings.TrimSpace(out))
}

// servers counts the Servers the hub lists (roostctl get servers).
func servers(t *testing.T, bin, admin string) int {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "roostctl"), "get", "servers")
	cmd.Env = append(os.Environ(), "ROOST_CONFIG="+admin)
	out, err := cmd.Output()
	if err != nil {
		return 0
	}
	n := 0
	for i, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if i > 0 && strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(2 * time.Second)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
