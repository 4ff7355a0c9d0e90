package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/roostfleet/roost/imagebuilder/release"
	"github.com/roostfleet/roost/imagebuilder/sysext"
)

// needMksquashfs skips a test that runs mksquashfs when it is missing,
// except under CI (CI set), where a missing squashfs-tools is a failure.
func needMksquashfs(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("mksquashfs"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("mksquashfs not found and CI is set: the CI machine must have squashfs-tools (images/deps.sh installs it)")
		}
		t.Skip("skipping: mksquashfs not found (install squashfs-tools to run this test)")
	}
}

// TestSysext: build a signed kubelet extension with the default output
// name, verify it with the public key, inspect it; rebuild it unsigned
// and the stale manifest goes.
func TestSysext(t *testing.T) {
	needMksquashfs(t)
	dir := t.TempDir()
	t.Chdir(dir)
	if msg, err := run(t, "keygen", "-o", "release"); err != nil {
		t.Fatal(err, msg)
	}
	write(t, dir, "kubelet", "#!/bin/sh\n")
	mkdir := filepath.Join(dir, "tree", "usr", "lib", "systemd", "system")
	if err := os.MkdirAll(mkdir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, mkdir, "kubelet.service", "[Service]\nExecStart=/usr/bin/kubelet\n")
	out, err := run(t, "sysext", "--name", "kubelet", "--version", "v1.34.4", "--from", "tree", "--file", "kubelet:/usr/bin/kubelet",
		"--arch", "x86-64", "--key", "release.key")
	if err != nil {
		t.Fatal(err, out)
	}
	raw := "kubelet-v1.34.4.raw"
	info, err := sysext.Inspect(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"wrote kubelet-v1.34.4.raw: extension kubelet v1.34.4 for x86-64, 3 files", "size    " + strconv.FormatInt(info.Size, 10) + " bytes",
		"sha256  " + info.SHA256, "wrote kubelet-v1.34.4.raw.manifest.json, signed with key " + keyIDOf(t, "release.pub")} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	pub, err := release.LoadPublicKey("release.pub")
	if err != nil {
		t.Fatal(err)
	}
	b, err := sysext.LoadBundle(raw, pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Manifest.Describes(info); err != nil {
		t.Error(err)
	}

	out, err = run(t, "inspect", raw)
	if err != nil {
		t.Fatal(err, out)
	}
	for _, w := range []string{"Name:         kubelet", "Version:      v1.34.4", "OS:           _any (any OS)", "Architecture: x86-64",
		"  /usr/bin/kubelet\n", "  /usr/lib/systemd/system/kubelet.service\n", "matches the image, signed by key " + keyIDOf(t, "release.pub")} {
		if !strings.Contains(out, w) {
			t.Errorf("inspect lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "Problems") {
		t.Errorf("inspect finds problems:\n%s", out)
	}

	// A rebuild without --key removes the manifest it would contradict.
	if out, err := run(t, "sysext", "--name", "kubelet", "--version", "v1.34.4", "--file", "kubelet:/usr/bin/kubelet"); err != nil || !strings.Contains(out, "not signed") {
		t.Fatal(err, out)
	}
	if _, err := os.Stat(raw + sysext.ManifestSuffix); !os.IsNotExist(err) {
		t.Errorf("stale manifest: %v", err)
	}
	if out, _ := run(t, "inspect", raw); !strings.Contains(out, "Manifest:     none") {
		t.Errorf("inspect without a manifest:\n%s", out)
	}
}

// TestSysextInspectProblems: inspect describes a bad extension and lists
// what the hub would refuse.
func TestSysextInspectProblems(t *testing.T) {
	needMksquashfs(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	for p, c := range map[string]string{"etc/x.conf": "x", "usr/lib/extension-release.d/extension-release.tools": "ID=flatcar\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, root, p, c)
	}
	img := filepath.Join(dir, "tools.raw")
	if out, err := exec.Command("mksquashfs", root, img, "-quiet", "-no-progress").CombinedOutput(); err != nil {
		t.Fatal(err, string(out))
	}
	out, err := run(t, "inspect", img)
	if err != nil {
		t.Fatal(err, out)
	}
	for _, w := range []string{"Name:         tools", "Problems (the hub would refuse this extension):", "has no SYSEXT_VERSION_ID",
		"ID=flatcar but neither SYSEXT_LEVEL nor VERSION_ID", "1 file (/etc/x.conf) outside /usr and /opt"} {
		if !strings.Contains(out, w) {
			t.Errorf("inspect lacks %q:\n%s", w, out)
		}
	}
}

// TestSysextExitCodes: bad flags exit 2 with the flag named, failures 1.
func TestSysextExitCodes(t *testing.T) {
	needMksquashfs(t)
	dir := t.TempDir()
	bin := write(t, dir, "kubelet", "ELF")
	out := filepath.Join(dir, "out.raw")
	base := []string{"sysext", "--name", "kubelet", "--version", "v1.34.4", "-o", out}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"ok", append(base, "--file", bin+":/usr/bin/kubelet"), exitOK, nil},
		{"no version", []string{"sysext", "--name", "k", "--file", bin + ":/usr/bin/k"}, exitUsage, []string{`required flag(s) "version" not set`, "See 'roost-image sysext --help'"}},
		{"bad name", []string{"sysext", "--name", "../k", "--version", "1", "--file", bin + ":/usr/bin/k"}, exitUsage, []string{`--name: name "../k"`}},
		{"nothing", base, exitUsage, []string{"nothing to put into the extension"}},
		{"file without dest", append(base, "--file", bin), exitUsage, []string{"want SRC:DEST"}},
		{"dest in etc", append(base, "--file", bin+":/etc/kubelet"), exitUsage, []string{"/etc/kubelet is not below /usr or /opt"}},
		{"go arch", append(base, "--file", bin+":/usr/bin/kubelet", "--arch", "amd64"), exitUsage, []string{"systemd calls amd64 x86-64"}},
		{"os id alone", append(base, "--file", bin+":/usr/bin/kubelet", "--os-id", "flatcar"), exitUsage, []string{"needs --sysext-level or --version-id"}},
		{"missing source", append(base, "--file", filepath.Join(dir, "nope")+":/usr/bin/kubelet"), exitFailed, []string{"no such file"}},
		{"missing key", append(base, "--file", bin+":/usr/bin/kubelet", "--key", filepath.Join(dir, "nope.key")), exitFailed, []string{"--key: signing key"}},
		{"etc in tree", append(base, "--from", mkTreeDir(t, "etc/x")), exitFailed, []string{"etc is outside usr/ and opt/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := execute(tc.args, &stdout, &stderr); code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
	t.Run("no mksquashfs", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		var stdout, stderr bytes.Buffer
		if code := execute(append(base, "--file", bin+":/usr/bin/kubelet"), &stdout, &stderr); code != exitFailed ||
			!strings.Contains(stderr.String(), "install the Debian package squashfs-tools") {
			t.Errorf("exit %d:\n%s", code, stderr.String())
		}
	})
}

// mkTreeDir makes a directory holding the file rel and returns it.
func mkTreeDir(t *testing.T, rel string) string {
	t.Helper()
	d := t.TempDir()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(d, rel)), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, d, rel, "x")
	return d
}
