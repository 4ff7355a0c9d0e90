package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roostfleet/roost/imagebuilder/release"
	"github.com/roostfleet/roost/imagebuilder/sysext"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// newReleaseKey writes a release key pair and returns the private key and
// the public key file.
func newReleaseKey(t *testing.T) (ed25519.PrivateKey, string) {
	t.Helper()
	prefix := filepath.Join(t.TempDir(), "release")
	if _, err := release.GenerateKey(prefix); err != nil {
		t.Fatal(err)
	}
	priv, err := release.LoadPrivateKey(prefix + ".key")
	if err != nil {
		t.Fatal(err)
	}
	return priv, prefix + ".pub"
}

// writeExtension writes NAME-VERSION.raw (some bytes; the hub does not
// look inside) and its manifest, signed by key unless it is nil, shipping
// paths; it returns the .raw's path.
func writeExtension(t *testing.T, dir, name, version string, key ed25519.PrivateKey, paths ...string) string {
	t.Helper()
	raw := filepath.Join(dir, name+"-"+version+".raw")
	data := bytes.Repeat([]byte(name+version), 20000)
	if err := os.WriteFile(raw, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	m := &sysext.Manifest{APIVersion: sysext.ManifestAPIVersion, Kind: sysext.ManifestKind, Name: name, Version: version, Architecture: "x86-64",
		Image: sysext.Artifact{File: filepath.Base(raw), Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}, Paths: paths}
	if _, err := sysext.WriteManifest(raw, m, key); err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestExtensionPush pushes extensions to a real hub and reads them back
// with the generic verbs; bad, unsigned and untrusted ones are refused
// before anything is uploaded; a class follows one and deleting it is
// refused while it does.
func TestExtensionPush(t *testing.T) {
	_, config, run := realHubCLI(t)
	dir := t.TempDir()
	key, pub := newReleaseKey(t)
	raw := writeExtension(t, dir, "kubelet", "v1.34.4", key, "/usr/bin/kubelet", "/usr/lib/extension-release.d/extension-release.kubelet")

	r := run("extension", "push", raw)
	if r.code != 0 {
		t.Fatalf("push: %d\n%s%s", r.code, r.out, r.err)
	}
	for _, want := range []string{"kubelet-v1.34.4.raw  sha256:", "273.4 KiB  uploaded 273.4 KiB", "extension/kubelet-v1-34-4 created (kubelet v1.34.4, x86-64, 2 paths)"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("push output lacks %q:\n%s", want, r.out)
		}
	}
	if !strings.Contains(r.err, "was not checked locally") || !strings.Contains(r.err, "Warning from hub: no release key is trusted, so the hub recorded extension kubelet v1.34.4") {
		t.Errorf("push without trusted keys should warn twice:\n%s", r.err)
	}
	if r = run("extension", "push", raw, "--key", pub); r.code != 0 || !strings.Contains(r.out, "already stored") ||
		!strings.Contains(r.out, "extension/kubelet-v1-34-4 unchanged") || strings.Contains(r.err, "not checked locally") {
		t.Fatalf("push again: %d\n%s%s", r.code, r.out, r.err)
	}

	// The generic verbs.
	r = run("get", "extensions")
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if r.code != 0 || len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME VERSION ARCH SIZE SHA256 AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "kubelet-v1-34-4 v1.34.4 x86-64 273Ki ") {
		t.Fatalf("get extensions: %d\n%s%s", r.code, r.out, r.err)
	}
	if r = run("get", "extension", "kubelet-v1-34-4", "-o", "yaml"); r.code != 0 || !strings.Contains(r.out, "kind: Extension\n") ||
		!strings.Contains(r.out, "  version: v1.34.4\n") || !strings.Contains(r.out, "    - /usr/bin/kubelet\n") {
		t.Fatalf("get -o yaml: %d\n%s%s", r.code, r.out, r.err)
	}
	// What get prints cannot be applied: Extensions are pushed.
	if a := run("apply", "-f", writeFile(t, dir, "ext.yaml", r.out)); a.code != ExitUsage || !strings.Contains(a.err, "Extensions are pushed with their signed image, not applied") ||
		!strings.Contains(a.err, "roostctl extension push NAME-VERSION.raw") {
		t.Fatalf("apply an Extension: %d\n%s", a.code, a.err)
	}
	if r = run("get", "ext", "kubelet-v1-34-4", "-o", "json"); r.code != 0 || !strings.Contains(r.out, `"architecture": "x86-64"`) {
		t.Fatalf("get -o json: %d\n%s%s", r.code, r.out, r.err)
	}
	if r = run("describe", "extension", "kubelet-v1-34-4"); r.code != 0 || !strings.Contains(r.out, "Kind:            Extension") {
		t.Fatalf("describe: %d\n%s%s", r.code, r.out, r.err)
	}

	// Refused locally, nothing uploaded: unsigned, tampered, another key.
	unsigned := writeExtension(t, dir, "tools", "1.0", nil, "/usr/bin/tools")
	if r = run("extension", "push", unsigned); r.code != ExitUsage || !strings.Contains(r.err, "extension "+unsigned+" is not signed: tools-1.0.raw.manifest.json.sig is missing") {
		t.Fatalf("unsigned: %d\n%s%s", r.code, r.out, r.err)
	}
	tampered := writeExtension(t, dir, "tools", "1.1", key, "/usr/bin/tools")
	if err := os.WriteFile(tampered, []byte("something else"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r = run("extension", "push", tampered); r.code != ExitUsage || !strings.Contains(r.err, "the signed manifest does not match the extension") ||
		!strings.Contains(r.err, "nothing was uploaded") {
		t.Fatalf("tampered: %d\n%s%s", r.code, r.out, r.err)
	}
	_, otherPub := newReleaseKey(t)
	if r = run("extension", "push", raw, "--key", otherPub); r.code != ExitUsage || !strings.Contains(r.err, "the signature does not verify with key") {
		t.Fatalf("--key of another key: %d\n%s%s", r.code, r.out, r.err)
	}
	etc := writeExtension(t, dir, "etc", "1", key, "/etc/motd")
	if r = run("extension", "push", etc); r.code != ExitUsage || !strings.Contains(r.err, "spec.paths[0]: \"/etc/motd\" is outside /usr and /opt") {
		t.Fatalf("a path outside /usr: %d\n%s%s", r.code, r.out, r.err)
	}
	if r = run("image", "trust", "add", otherPub); r.code != 0 {
		t.Fatalf("trust: %d %s", r.code, r.err)
	}
	next := writeExtension(t, dir, "kubelet", "v1.35.0", key, "/usr/bin/kubelet")
	if r = run("extension", "push", next); r.code != ExitFailed || !strings.Contains(r.err, "which the hub does not trust") {
		t.Fatalf("signed by an untrusted key: %d\n%s%s", r.code, r.out, r.err)
	}
	conn := adminConn(t, config)
	for _, p := range []string{unsigned, tampered, next} {
		b, _ := os.ReadFile(p)
		sum := sha256.Sum256(b)
		st, err := roostv1.NewHubServiceClient(conn).StatArtifact(context.Background(), &roostv1.StatArtifactRequest{Sha256: hex.EncodeToString(sum[:])})
		if err != nil || st.GetComplete() || st.GetSize() != 0 {
			t.Errorf("%s was uploaded: %v %v", p, st, err)
		}
	}

	// A class follows kubelet; a newer version moves it; the one it runs
	// cannot be deleted.
	if r = run("image", "trust", "add", pub); r.code != 0 {
		t.Fatalf("trust: %d %s", r.code, r.err)
	}
	class := writeFile(t, dir, "class.yaml", "apiVersion: roost.io/v1\nkind: MachineClass\nmetadata:\n  name: workers\nspec:\n  extensions: [kubelet]\n")
	if r = run("apply", "-f", class); r.code != 0 {
		t.Fatalf("apply class: %d\n%s%s", r.code, r.out, r.err)
	}
	if r = run("extension", "push", next); r.code != 0 || !strings.Contains(r.out, "MachineClass workers follows kubelet: its Machines move to kubelet v1.35.0 by reboot") {
		t.Fatalf("push a newer version: %d\n%s%s", r.code, r.out, r.err)
	}
	if r = run("delete", "extension", "kubelet-v1-35-0"); r.code != ExitFailed || !strings.Contains(r.err, `is used by MachineClass "workers" (spec.extensions[0] "kubelet": the newest kubelet)`) {
		t.Fatalf("delete while used: %d\n%s%s", r.code, r.out, r.err)
	}
	if r = run("delete", "extension", "kubelet-v1-34-4"); r.code != 0 {
		t.Fatalf("delete an older version: %d\n%s%s", r.code, r.out, r.err)
	}
	bad := writeFile(t, dir, "bad.yaml", "apiVersion: roost.io/v1\nkind: MachineClass\nmetadata:\n  name: workers\nspec:\n  extensions: [kubelet, kubelet=v1.35.0, nope]\n")
	if r = run("apply", "-f", bad); r.code != ExitUsage || !strings.Contains(r.err, "spec.extensions[1]") || !strings.Contains(r.err, "extension kubelet is named twice") {
		t.Fatalf("apply a bad class: %d\n%s%s", r.code, r.out, r.err)
	}
	// Completion: Extension names for the generic verbs, .raw files for push.
	if r = run("__complete", "delete", "extension", ""); r.code != 0 || !strings.Contains(r.out, "kubelet-v1-35-0\n") {
		t.Errorf("complete extension names: %d\n%s%s", r.code, r.out, r.err)
	}
	if r = run("__complete", "extension", "push", ""); r.code != 0 || !strings.HasSuffix(r.out, "raw\n:8\n") {
		t.Errorf("complete push: %d %q %s", r.code, r.out, r.err)
	}
}
