package main

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/roostfleet/roost/imagebuilder/release"
)

// signedBundle makes a key pair (prefix k) and a release bundle signed
// with it in dir; it returns the bundle and the public key file.
func signedBundle(t *testing.T, dir, prefix string) (bundle, pub string) {
	t.Helper()
	if msg, err := run(t, "keygen", "-o", filepath.Join(dir, prefix)); err != nil {
		t.Fatal(err, msg)
	}
	write(t, dir, "vmlinuz", "k")
	write(t, dir, "initrd", "i")
	write(t, dir, "boot.efi", "b")
	def := write(t, dir, "img.yaml", "apiVersion: roost.io/v1\nkind: ImageDefinition\nname: t\nversion: 2026.11.0\ndate: 2026-11-01T00:00:00Z\n"+
		"kernel: {path: vmlinuz}\ninitrd: {path: initrd}\nbootloader: {path: boot.efi}\n")
	bundle = filepath.Join(dir, "bundle")
	if msg, err := run(t, "release", "--manifest", def, "--key", filepath.Join(dir, prefix+".key"), "-o", bundle); err != nil {
		t.Fatal(err, msg)
	}
	return bundle, filepath.Join(dir, prefix+".pub")
}

func keyIDOf(t *testing.T, pubFile string) string {
	t.Helper()
	pub, err := release.LoadPublicKey(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	return release.KeyID(pub)
}

// TestExitCodes: bad usage exits 2 (as roostctl), other failures 1.
func TestExitCodes(t *testing.T) {
	e := newEnv(t)
	out := func() string { return filepath.Join(t.TempDir(), "x.iso") }
	bundle, signer := signedBundle(t, t.TempDir(), "signer")
	if msg, err := run(t, "keygen", "-o", filepath.Join(e.dir, "other")); err != nil {
		t.Fatal(err, msg)
	}
	other := filepath.Join(e.dir, "other.pub")
	withRelease := func(more ...string) []string { return slices.Concat(e.args, []string{"--release", bundle}, more) }
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"unknown command", []string{"enrol"}, exitUsage, []string{`unknown command "enrol" for "roost-image" (did you mean "enroll"?)`, "See 'roost-image --help'"}},
		{"unknown flag", append(e.args, "--nope", "-o", out()), exitUsage, []string{"unknown flag: --nope", "See 'roost-image enroll --help'"}},
		{"bad flag value", append(e.args, "--max-uses", "many", "-o", out()), exitUsage, []string{"--max-uses"}},
		{"missing -o", e.args, exitUsage, []string{`required flag(s) "output" not set`}},
		{"no argument", []string{"inspect"}, exitUsage, []string{"accepts 1 arg(s), received 0", "See 'roost-image inspect --help'"}},
		{"extra argument", []string{"keygen", "-o", filepath.Join(e.dir, "k"), "extra"}, exitUsage, []string{"unknown command"}},
		{"bad format", append(e.args, "--format", "vhd", "-o", out()), exitUsage, []string{`--format "vhd"`}},
		{"bad expires", append(e.args, "--expires", "soon", "-o", out()), exitUsage, []string{`--expires "soon"`}},
		{"two tokens", append(e.args, "--create-token", "-o", out()), exitUsage, []string{"not both"}},
		{"bad token", append(set(e.args, "--token", "nope"), "-o", out()), exitUsage, []string{"--token: not an enrollment token"}},
		{"pool without create-token", append(e.args, "--pool", "workers", "-o", out()), exitUsage, []string{"go with --create-token"}},
		{"bad hub", append(set(e.args, "--hub", "nohost"), "-o", out()), exitUsage, []string{"--hub"}},
		{"private key as release key", withRelease("--release-key", strings.TrimSuffix(signer, ".pub")+".key", "-o", out()), exitUsage,
			[]string{"--release-key " + strings.TrimSuffix(signer, ".pub") + ".key", "use the .pub file"}},
		{"release key that did not sign the release", withRelease("--release-key", other, "-o", out()), exitUsage,
			[]string{"release keys: none of the given keys (" + keyIDOf(t, other) + ") verifies release bundle " + bundle + " (version 2026.11.0)",
				"its release.json says key " + keyIDOf(t, signer) + " signed it", "the agent would refuse to install this release"}},
		{"missing kernel", append(set(e.args, "--kernel", filepath.Join(e.dir, "nope")), "-o", out()), exitFailed, []string{"kernel"}},
		{"ok", append(e.args, "-o", out()), exitOK, nil},
		{"ok with the release's key", withRelease("--release-key", other, "--release-key", signer, "-o", out()), exitOK, nil},
		{"version", []string{"--version"}, exitOK, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := execute(tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			if tc.code == exitFailed && strings.Contains(stderr.String(), "--help") {
				t.Errorf("a failure points at --help:\n%s", stderr.String())
			}
		})
	}
}
