package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func definition(t *testing.T) (string, string) {
	t.Helper()
	d := t.TempDir()
	for name, content := range map[string]string{"k": "kernel", "i": "initrd", "b": "boot"} {
		if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	def := `apiVersion: roost.io/v1
kind: ImageDefinition
name: test
version: 2026.11.0
date: 2026-11-01T00:00:00Z
components:
  kernel: 6.1.0
kernel: {path: k}
initrd: {path: i}
bootloader: {path: b}
`
	p := filepath.Join(d, "test.yaml")
	if err := os.WriteFile(p, []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	return d, p
}

func TestBuildSignVerify(t *testing.T) {
	d, p := definition(t)
	def, err := LoadDefinition(p)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := GenerateKey(filepath.Join(d, "key"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := GenerateKey(filepath.Join(d, "key")); err == nil {
		t.Fatal("keygen overwrote a key")
	}
	priv, err := LoadPrivateKey(filepath.Join(d, "key.key"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(d, "out")
	m, err := Build(def, out, Options{Key: priv})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Artifacts) != 3 || m.KeyID != KeyID(pub) {
		t.Fatalf("manifest %+v", m)
	}
	pub2, err := LoadPublicKey(filepath.Join(d, "key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(out, pub2)
	if err != nil {
		t.Fatal(err)
	}
	if b.Manifest.Version != "2026.11.0" || b.Manifest.Components["kernel"] != "6.1.0" || !b.Signed {
		t.Fatalf("bundle %+v", b)
	}
	// another key does not verify
	other, _ := GenerateKey(filepath.Join(d, "other"))
	if _, err := Load(out, other); err == nil || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("err = %v", err)
	}
	// tampered artifact
	if err := os.WriteFile(filepath.Join(out, InitrdFile), []byte("evil"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(out, nil); err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("err = %v", err)
	}
}

func TestURLNotFetched(t *testing.T) {
	d, _ := definition(t)
	p := filepath.Join(d, "url.yaml")
	os.WriteFile(p, []byte(`apiVersion: roost.io/v1
kind: ImageDefinition
name: x
version: "1"
date: 2026-11-01T00:00:00Z
kernel: {url: "https://example.invalid/vmlinuz", sha256: "0000000000000000000000000000000000000000000000000000000000000000"}
initrd: {path: i}
bootloader: {path: b}
`), 0o644)
	def, err := LoadDefinition(p)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(d, "out")
	if _, err := Build(def, out, Options{}); err == nil || !strings.Contains(err.Error(), "--fetch") {
		t.Fatalf("err = %v", err)
	}
	ents, _ := os.ReadDir(out)
	if len(ents) != 0 {
		t.Fatalf("left %d files", len(ents))
	}
}

func TestDefinitionErrors(t *testing.T) {
	d := t.TempDir()
	p := filepath.Join(d, "bad.yaml")
	os.WriteFile(p, []byte("apiVersion: roost.io/v1\nkind: ImageDefinition\nname: x\nversion: '1'\ndate: 2026-11-01T00:00:00Z\nkernel: {}\ninitrd: {path: i}\n"), 0o644)
	if _, err := LoadDefinition(p); err == nil || !strings.Contains(err.Error(), "kernel") {
		t.Fatalf("err = %v", err)
	}
	os.WriteFile(p, []byte("apiVersion: roost.io/v1\nkind: ImageDefinition\nname: x\nversion: '1'\ndate: 2026-11-01T00:00:00Z\nkernal: {}\n"), 0o644)
	if _, err := LoadDefinition(p); err == nil || !strings.Contains(err.Error(), "kernal") {
		t.Fatalf("err = %v", err)
	}
}

func TestFlatcarTemplateRefused(t *testing.T) {
	_, err := LoadDefinition("../../images/flatcar-stable.yaml")
	if err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("err = %v", err)
	}
}
