package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type env struct {
	dir  string
	args []string // common enroll flags
}

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func caPEM(t *testing.T) string {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "roost-ca"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func newEnv(t *testing.T) *env {
	d := t.TempDir()
	e := &env{dir: d}
	e.args = []string{
		"enroll", "-q",
		"--kernel", write(t, d, "vmlinuz", strings.Repeat("k", 5000)),
		"--initrd", write(t, d, "initrd", strings.Repeat("i", 9000)),
		"--isolinux", write(t, d, "isolinux.bin", strings.Repeat("b", 4096)),
		"--ldlinux", write(t, d, "ldlinux.c32", strings.Repeat("l", 4096)),
		"--grub-efi", write(t, d, "grub.efi", strings.Repeat("g", 100000)),
		"--hub", "10.0.2.2:7443",
		"--ca", write(t, d, "ca.pem", caPEM(t)),
		"--token", "abcdef.0123456789abcdef",
	}
	return e
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := newRootCmd(&out, &errb)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String() + errb.String(), err
}

func TestEnrollAndInspect(t *testing.T) {
	now = func() time.Time { return time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC) }
	defer func() { now = time.Now }()
	e := newEnv(t)
	out := filepath.Join(e.dir, "enroll.iso")
	key := write(t, e.dir, "id.pub", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIsecretkeymaterial admin@example\n")
	args := append(e.args, "-o", out, "--expires", "48h", "--ssh-key", key,
		"--network-profile", write(t, e.dir, "bond.yaml", "apiVersion: roost.io/v1\nkind: NetworkProfile\nmetadata: {name: bond}\n"),
		"--user-config", write(t, e.dir, "u.yaml", "systemd:\n  units:\n    - name: hello.service\n      enabled: true\n      contents: \"[Service]\\nExecStart=/bin/true\\n[Install]\\nWantedBy=multi-user.target\\n\"\n"))
	if msg, err := run(t, args...); err != nil {
		t.Fatalf("%v: %s", err, msg)
	}
	msg, err := run(t, "inspect", out)
	if err != nil {
		t.Fatalf("%v: %s", err, msg)
	}
	for _, want := range []string{"BIOS", "UEFI", "/isolinux/isolinux.bin", "/boot/efi.img", "abcdef.****************", "expires 2026-12-02T00:00:00Z", "hello.service", "10.0.2.2:7443", "admin@example", "/boot/vmlinuz"} {
		if !strings.Contains(msg, want) {
			t.Errorf("inspect output lacks %q", want)
		}
	}
	for _, secret := range []string{"0123456789abcdef", "secretkeymaterial"} {
		if strings.Contains(msg, secret) {
			t.Errorf("inspect shows a secret %q:\n%s", secret, msg)
		}
	}
	// token expiry passed: inspect says so
	now = func() time.Time { return time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC) }
	msg, _ = run(t, "inspect", out)
	if !strings.Contains(msg, "EXPIRED") {
		t.Errorf("inspect does not flag the expired token:\n%s", msg)
	}
}

func TestEnrollBadInputs(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(e *env) []string
		wants []string
	}{
		{"missing kernel", func(e *env) []string { return set(e.args, "--kernel", filepath.Join(e.dir, "nope")) }, []string{"kernel", "no such file"}},
		{"unreadable CA", func(e *env) []string { return set(e.args, "--ca", filepath.Join(e.dir, "missing-ca.pem")) }, []string{"hub CA"}},
		{"CA not PEM", func(e *env) []string { return set(e.args, "--ca", write(t, e.dir, "bad.pem", "hello")) }, []string{"hub CA"}},
		{"expired token", func(e *env) []string { return append(e.args, "--expires", "-1h") }, []string{"in the past"}},
		{"expired token date", func(e *env) []string { return append(e.args, "--expires", "2020-01-01T00:00:00Z") }, []string{"in the past"}},
		{"bad token", func(e *env) []string { return set(e.args, "--token", "nope") }, []string{"token"}},
		{"invalid user config", func(e *env) []string {
			return append(e.args, "--user-config", write(t, e.dir, "bad.ign", `{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"etc/x"}]}}`))
		}, []string{"bad.ign", "line 1: storage.files[0].path: path not absolute"}},
		{"untranslatable CLC", func(e *env) []string {
			return append(e.args, "--user-config", write(t, e.dir, "disk.yaml", "storage:\n  disks:\n    - device: /dev/sda\n"))
		}, []string{"disk.yaml", "line 3: storage.disks[0]: is not allowed in a snippet"}},
		{"missing ssh key", func(e *env) []string { return append(e.args, "--ssh-key", filepath.Join(e.dir, "nokey.pub")) }, []string{"SSH key"}},
		{"bad format", func(e *env) []string { return append(e.args, "--format", "vhd") }, []string{"--format"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			out := filepath.Join(t.TempDir(), "x.iso")
			msg, err := run(t, append(c.edit(e), "-o", out)...)
			if err == nil {
				t.Fatalf("no error: %s", msg)
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			ents, _ := os.ReadDir(filepath.Dir(out))
			if len(ents) != 0 {
				t.Errorf("left %d files behind", len(ents))
			}
		})
	}
}

func set(args []string, flag, value string) []string {
	out := append([]string{}, args...)
	for i := range out {
		if out[i] == flag {
			out[i+1] = value
		}
	}
	return out
}

func TestReproducibleCLI(t *testing.T) {
	e := newEnv(t)
	a, b := filepath.Join(e.dir, "a.iso"), filepath.Join(e.dir, "b.iso")
	if msg, err := run(t, append(e.args, "-o", a)...); err != nil {
		t.Fatal(err, msg)
	}
	time.Sleep(1100 * time.Millisecond)
	if msg, err := run(t, append(e.args, "-o", b)...); err != nil {
		t.Fatal(err, msg)
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if !bytes.Equal(da, db) {
		t.Fatal("same inputs, different images")
	}
}

func TestKeygenAndRelease(t *testing.T) {
	d := t.TempDir()
	if msg, err := run(t, "keygen", "-o", filepath.Join(d, "k")); err != nil {
		t.Fatal(err, msg)
	}
	write(t, d, "vmlinuz", "k")
	write(t, d, "initrd", "i")
	write(t, d, "boot.efi", "b")
	def := write(t, d, "img.yaml", "apiVersion: roost.io/v1\nkind: ImageDefinition\nname: t\nversion: 2026.11.0\ndate: 2026-11-01T00:00:00Z\nkernel: {path: vmlinuz}\ninitrd: {path: initrd}\nbootloader: {path: boot.efi}\n")
	msg, err := run(t, "release", "--manifest", def, "--key", filepath.Join(d, "k.key"), "-o", filepath.Join(d, "bundle"))
	if err != nil || !strings.Contains(msg, "signed with key") {
		t.Fatal(err, msg)
	}
}

func TestHelpHasExamples(t *testing.T) {
	msg, err := run(t, "enroll", "--help")
	if err != nil || !strings.Contains(msg, "Examples:") {
		t.Fatal(err, msg)
	}
}

// TestReleaseHelpExamplesExist: every images/… path the release help
// names exists in the repository.
func TestReleaseHelpExamplesExist(t *testing.T) {
	msg, err := run(t, "release", "--help")
	if err != nil {
		t.Fatal(err, msg)
	}
	n := 0
	for _, f := range strings.Fields(msg) {
		f = strings.TrimRight(f, ".,;:)'")
		if !strings.HasPrefix(f, "images/") || strings.Contains(f, "NAME") {
			continue
		}
		n++
		if _, err := os.Stat(filepath.Join("..", "..", f)); err != nil {
			t.Errorf("release --help names %s: %v", f, err)
		}
	}
	if n == 0 {
		t.Fatalf("release --help names no example definition:\n%s", msg)
	}
}

func TestReleaseBadVersionAndDate(t *testing.T) {
	d := t.TempDir()
	write(t, d, "vmlinuz", "k")
	write(t, d, "initrd", "i")
	write(t, d, "boot.efi", "b")
	for _, tc := range []struct{ version, date, want string }{
		{"bad version", "2026-11-01T00:00:00Z", `version "bad version" holds " "`},
		{"V2026.11.0", "2026-11-01T00:00:00Z", `version "V2026.11.0" starts with "V"`},
		{"2026.11.0", "2026-11-01", `date: "2026-11-01" is not a valid time: want an RFC 3339 date and time such as 2026-11-01T00:00:00Z`},
	} {
		def := write(t, d, "img.yaml", "apiVersion: roost.io/v1\nkind: ImageDefinition\nname: t\nversion: "+tc.version+"\ndate: "+tc.date+
			"\nkernel: {path: vmlinuz}\ninitrd: {path: initrd}\nbootloader: {path: boot.efi}\n")
		msg, err := run(t, "release", "--manifest", def, "-o", filepath.Join(d, "bundle"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("version %q date %q: err = %v, want %q\n%s", tc.version, tc.date, err, tc.want, msg)
		}
		if _, serr := os.Stat(filepath.Join(d, "bundle")); serr == nil {
			t.Errorf("version %q date %q: a bundle was written", tc.version, tc.date)
		}
	}
}
