package ignition

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// debianIgnition is where Debian's ignition package (2.14, what the
// testbed OS runs) puts the binary.
const debianIgnition = "/usr/lib/dracut/modules.d/30ignition/ignition"

// TestDebianIgnitionApplies runs Debian's Ignition 2.14 as the testbed's
// roost-ignition.service does (--platform=file, stages fetch and files)
// against a Revision-like config with a MachineClass snippet, into a
// scratch root, and checks that it applies every kind of entry a snippet
// may hold: files and directories with their modes, links, units with
// contents (enabled through the preset file the testbed enables from),
// drop-ins, masks, users with groups and SSH keys, sysctl files and
// SettingsUnit. It needs root (useradd --root, a private mount namespace
// for /run) and the ignition package; it is skipped with -short.
func TestDebianIgnitionApplies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Debian's ignition (-short)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := os.Stat(debianIgnition); err != nil {
		t.Skipf("no Debian ignition (apt-get install ignition): %v", err)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare")
	}
	snippet := strings.Replace(customYAML, "passwd:", "    - name: rescue.service\n      mask: true\npasswd:", 1)
	cfg, err := RenderJSON(Params{AgentConfig: []byte(agentYAML), SSHKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICore core@example"},
		Snippets: []Snippet{{Name: "spec.ignition", Format: FormatIgnition, Data: []byte(snippet)}}, Reserved: RevisionReserved()})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// Ignition writes a user's SSH keys as the user: the scratch root
	// must be reachable.
	for d := dir; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(dir, "root")
	for _, f := range []string{"passwd", "group", "shadow", "gshadow"} {
		b, err := os.ReadFile(filepath.Join("/etc", f))
		if err != nil {
			t.Skipf("host %s: %v", f, err)
		}
		if f == "group" && !strings.Contains(string(b), "\nsudo:") {
			b = append(b, "sudo:x:27:\n"...)
		}
		write(t, filepath.Join(root, "etc", f), string(b), 0o600)
	}
	// As the testbed: SELinux off, and a setfiles that does nothing.
	write(t, filepath.Join(root, "etc/selinux/config"), "SELINUX=disabled\nSELINUXTYPE=default\n", 0o644)
	write(t, filepath.Join(dir, "bin/setfiles"), "#!/bin/sh\ncat >/dev/null\n", 0o755)
	write(t, filepath.Join(dir, "config.ign"), string(cfg), 0o600)
	// In a mount namespace of its own, with a /run of its own: the fetch
	// stage leaves the config there for the files stage.
	script := `set -e; mount --make-rprivate /; mount -t tmpfs tmpfs /run
for stage in fetch files; do "$IGN" --platform=file --stage=$stage --log-to-stdout --root="$ROOT"; done`
	cmd := exec.Command(unshare, "-m", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "IGN="+debianIgnition, "ROOT="+root, "IGNITION_CONFIG_FILE="+filepath.Join(dir, "config.ign"),
		"PATH="+filepath.Join(dir, "bin")+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ignition: %v\n%s", err, out)
	}

	for path, want := range map[string]os.FileMode{
		"/etc/sysctl.d/90-tuning.conf": 0o644, "/opt/bin/hello": 0o755, "/opt/bin": 0o755 | os.ModeDir,
		AgentConfigPath: 0o600, "/etc/roost": 0o700 | os.ModeDir,
	} {
		fi, err := os.Stat(filepath.Join(root, path))
		if err != nil {
			t.Error(err)
			continue
		}
		if got := fi.Mode() & (os.ModePerm | os.ModeDir); got != want {
			t.Errorf("%s: mode %v, want %v", path, got, want)
		}
	}
	checks := map[string]string{
		"/etc/sysctl.d/90-tuning.conf":                        "vm.swappiness = 10\n",
		"/opt/bin/hello":                                      "#!/bin/sh\necho hello\n",
		"/etc/systemd/system/hello.service":                   "ExecStart=/opt/bin/hello\n",
		"/etc/systemd/system/kubelet.service.d/50-proxy.conf": "Environment=HTTPS_PROXY=http://proxy:3128\n",
		"/etc/systemd/system/" + SettingsUnit:                 "ExecStart=" + sysctlBinary + "\n",
		"/etc/systemd/system/" + AgentUnitName:                "ExecStart=" + AgentBinary,
		"/etc/systemd/system-preset/20-ignition.preset":       "enable hello.service\n",
		"/etc/passwd": "\nops:x:",
		"/home/ops/.ssh/authorized_keys.d/ignition":  "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOps ops@example",
		"/home/core/.ssh/authorized_keys.d/ignition": "core@example",
	}
	for path, want := range checks {
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Error(err)
			continue
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q:\n%s", path, want, b)
		}
	}
	preset, _ := os.ReadFile(filepath.Join(root, "/etc/systemd/system-preset/20-ignition.preset"))
	for _, u := range []string{SettingsUnit, AgentUnitName} {
		if !strings.Contains(string(preset), "enable "+u+"\n") {
			t.Errorf("preset does not enable %s:\n%s", u, preset)
		}
	}
	if target, err := os.Readlink(filepath.Join(root, "/etc/localtime")); err != nil || target != "/usr/share/zoneinfo/UTC" {
		t.Errorf("link /etc/localtime: %q %v", target, err)
	}
	if target, err := os.Readlink(filepath.Join(root, "/etc/systemd/system/rescue.service")); err != nil || target != "/dev/null" {
		t.Errorf("masked rescue.service: %q %v", target, err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "/etc/group")); !strings.Contains(string(b), "ops") {
		t.Errorf("ops is in no group:\n%s", b)
	}
}

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}
