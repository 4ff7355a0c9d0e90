package sysext

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
)

// fakeImage writes bytes standing for an image (LoadBundle checks only
// its digest) and returns its path and the Info describing it.
func fakeImage(t *testing.T, dir string) (string, *Info) {
	t.Helper()
	raw := filepath.Join(dir, "kubelet-v1.34.4.raw")
	data := []byte("hsqs and the rest of an image")
	if err := os.WriteFile(raw, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return raw, &Info{Name: "kubelet", Version: "v1.34.4", ID: AnyOS, Architecture: "x86-64", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]),
		Paths: []string{"/usr/bin/kubelet", "/usr/lib/extension-release.d/extension-release.kubelet"}}
}

// keyPair makes a key pair with roost-image keygen's code and loads the
// private key back as roost-image sysext --key does.
func keyPair(t *testing.T, name string) (ed25519.PrivateKey, ed25519.PublicKey) {
	t.Helper()
	prefix := filepath.Join(t.TempDir(), name)
	pub, err := release.GenerateKey(prefix)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := release.LoadPrivateKey(prefix + ".key")
	if err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

func TestSignDeterministic(t *testing.T) {
	_, info := fakeImage(t, t.TempDir())
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	m := ManifestFor(info, "/some/dir/kubelet-v1.34.4.raw")
	data, sig, err := Sign(m, key)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "apiVersion": "roost.io/v1",
  "kind": "ExtensionManifest",
  "name": "kubelet",
  "version": "v1.34.4",
  "architecture": "x86-64",
  "image": {
    "file": "kubelet-v1.34.4.raw",
    "size": 29,
    "sha256": "` + info.SHA256 + `"
  },
  "paths": [
    "/usr/bin/kubelet",
    "/usr/lib/extension-release.d/extension-release.kubelet"
  ],
  "keyID": "` + release.KeyID(key.Public().(ed25519.PublicKey)) + `"
}
`
	if string(data) != want {
		t.Errorf("manifest:\n%s\nwant:\n%s", data, want)
	}
	data2, sig2, err := Sign(ManifestFor(info, "kubelet-v1.34.4.raw"), key)
	if err != nil || !bytes.Equal(data, data2) || sig != sig2 {
		t.Errorf("a second Sign gave other bytes (%v)", err)
	}
	// The hub's and the agent's check accepts it.
	x := releasesig.Extension{Name: "kubelet", Version: "v1.34.4", Image: &roostv1.Artifact{Sha256: info.SHA256, Size: info.Size},
		Architecture: "x86-64", CheckArchitecture: true, Paths: info.Paths, CheckPaths: true, Manifest: data, Signature: sig}
	if err := releasesig.VerifyExtension(x, []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}); err != nil {
		t.Errorf("releasesig.VerifyExtension: %v", err)
	}
	if err := m.Describes(info); err != nil {
		t.Error(err)
	}

	if _, _, err := Sign(m, ed25519.PrivateKey("short")); err == nil || !strings.Contains(err.Error(), "want an ed25519 private key") {
		t.Errorf("short key: %v", err)
	}
	bad := ManifestFor(info, "x.raw")
	bad.Image.SHA256 = "ABC"
	if _, _, err := Sign(bad, key); err == nil || !strings.Contains(err.Error(), "image.sha256") {
		t.Errorf("bad sha256: %v", err)
	}
}

func TestDescribes(t *testing.T) {
	_, info := fakeImage(t, t.TempDir())
	for field, change := range map[string]func(*Manifest){
		`version "v1.35.0"`: func(m *Manifest) { m.Version = "v1.35.0" },
		"30 bytes":          func(m *Manifest) { m.Image.Size = 30 },
		"other paths":       func(m *Manifest) { m.Paths = m.Paths[:1] },
		`architecture ""`:   func(m *Manifest) { m.Architecture = "" },
	} {
		m := ManifestFor(info, "x.raw")
		change(m)
		if err := m.Describes(info); !errors.Is(err, releasesig.ErrExtensionMismatch) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
}

// TestLoadBundle: a signed bundle loads with its key and without one; a
// tampered manifest, a tampered image, another key, a missing or
// malformed signature and a missing manifest are refused, each with its
// own message.
func TestLoadBundle(t *testing.T) {
	priv, pub := keyPair(t, "signer")
	_, other := keyPair(t, "other")
	signed := func(t *testing.T) (string, *Info) {
		raw, info := fakeImage(t, t.TempDir())
		if _, err := WriteManifest(raw, ManifestFor(info, raw), priv); err != nil {
			t.Fatal(err)
		}
		return raw, info
	}
	raw, info := signed(t)
	for _, key := range []ed25519.PublicKey{pub, nil} {
		b, err := LoadBundle(raw, key)
		if err != nil {
			t.Fatal(err)
		}
		if !b.Signed || b.Manifest.Name != "kubelet" || b.Manifest.KeyID != release.KeyID(pub) || b.Manifest.Describes(info) != nil {
			t.Errorf("bundle %+v", b)
		}
	}

	for _, tc := range []struct {
		name   string
		change func(t *testing.T, raw string)
		key    ed25519.PublicKey
		kind   error
		msg    string
	}{
		{"tampered manifest", func(t *testing.T, raw string) { replaceIn(t, raw+ManifestSuffix, "v1.34.4", "v1.34.5") }, pub,
			releasesig.ErrUntrusted, "the signature does not verify with key " + release.KeyID(pub)},
		{"tampered image", func(t *testing.T, raw string) { replaceIn(t, raw, "rest", "REST") }, pub,
			releasesig.ErrExtensionMismatch, "its image is sha256"},
		{"tampered image, no key", func(t *testing.T, raw string) { replaceIn(t, raw, "rest", "REST") }, nil,
			releasesig.ErrExtensionMismatch, "the manifest says 29 bytes"},
		{"other key", func(*testing.T, string) {}, other,
			releasesig.ErrUntrusted, "does not verify with key " + release.KeyID(other) + " (the manifest says key " + release.KeyID(pub) + " signed it)"},
		{"malformed signature", func(t *testing.T, raw string) { writeString(t, raw+SignatureSuffix, "not base64!\n") }, pub,
			releasesig.ErrMalformedSignature, "malformed signature"},
		{"unsigned", func(t *testing.T, raw string) { os.Remove(raw + SignatureSuffix) }, pub,
			nil, "is not signed (no kubelet-v1.34.4.raw.manifest.json.sig): sign it with roost-image sysext --key KEY"},
		{"no manifest", func(t *testing.T, raw string) { os.Remove(raw + ManifestSuffix) }, nil,
			os.ErrNotExist, "has no manifest"},
		{"another kind", func(t *testing.T, raw string) { replaceIn(t, raw+ManifestSuffix, "ExtensionManifest", "ImageRelease") }, nil,
			nil, `kind "ImageRelease": want roost.io/v1, ExtensionManifest`},
		{"not JSON", func(t *testing.T, raw string) { writeString(t, raw+ManifestSuffix, "{") }, nil,
			nil, "not an extension manifest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, _ := signed(t)
			tc.change(t, raw)
			_, err := LoadBundle(raw, tc.key)
			if err == nil {
				t.Fatal("loaded")
			}
			if tc.kind != nil && !errors.Is(err, tc.kind) {
				t.Errorf("error %v, want %v", err, tc.kind)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error lacks %q:\n%v", tc.msg, err)
			}
		})
	}

	// An unsigned rewrite removes the stale signature.
	raw, info = signed(t)
	if _, err := WriteManifest(raw, ManifestFor(info, raw), nil); err != nil {
		t.Fatal(err)
	}
	if b, err := LoadBundle(raw, nil); err != nil || b.Signed || b.Manifest.KeyID != "" {
		t.Errorf("unsigned bundle %+v, %v", b, err)
	}
	if err := RemoveManifest(raw); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(raw + ManifestSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("manifest left: %v", err)
	}
}

func replaceIn(t *testing.T, p, old, new string) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("%s lacks %q", p, old)
	}
	writeString(t, p, strings.Replace(string(data), old, new, 1))
}

func writeString(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
