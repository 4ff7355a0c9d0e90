package releasesig

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// signedExtension is a signed kubelet extension as an Extension object
// stores it, and the key that signed it.
func signedExtension(t *testing.T) (*roostv1.ExtensionSpec, ed25519.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	d := strings.Repeat("a", 64)
	manifest := []byte(`{"apiVersion":"roost.io/v1","kind":"ExtensionManifest","name":"kubelet","version":"v1.34.4","architecture":"x86-64",` +
		`"image":{"file":"kubelet-v1.34.4.raw","size":4096,"sha256":"` + d + `"},"paths":["/usr/bin/kubelet","/usr/lib/extension-release.d/extension-release.kubelet"]}`)
	return &roostv1.ExtensionSpec{Name: "kubelet", Version: "v1.34.4", Architecture: "x86-64",
		Image: &roostv1.Artifact{Sha256: d, Size: 4096}, Paths: []string{"/usr/bin/kubelet", "/usr/lib/extension-release.d/extension-release.kubelet"},
		Manifest: manifest, Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, manifest)) + "\n"}, pub
}

func TestVerifyExtension(t *testing.T) {
	spec, pub := signedExtension(t)
	other, _, _ := ed25519.GenerateKey(nil)
	if err := VerifyExtension(FromExtension(spec), []ed25519.PublicKey{other, pub}); err != nil {
		t.Fatalf("VerifyExtension: %v", err)
	}
	rev := &roostv1.RevisionExtension{Name: spec.Name, Version: spec.Version, Image: spec.Image, Manifest: spec.Manifest, Signature: spec.Signature}
	if err := VerifyExtension(FromRevisionExtension(rev), []ed25519.PublicKey{pub}); err != nil {
		t.Fatalf("VerifyExtension(revision): %v", err)
	}
	for name, tc := range map[string]struct {
		edit    func(*roostv1.ExtensionSpec)
		keys    []ed25519.PublicKey
		want    error
		message string
	}{
		"no keys":    {keys: []ed25519.PublicKey{}, want: ErrNoKeys},
		"other key":  {keys: []ed25519.PublicKey{other}, want: ErrUntrusted},
		"tampered":   {edit: func(s *roostv1.ExtensionSpec) { s.Manifest = append(s.Manifest, ' ') }, want: ErrUntrusted},
		"bad base64": {edit: func(s *roostv1.ExtensionSpec) { s.Signature = "%%%" }, want: ErrMalformedSignature},
		"short sig":  {edit: func(s *roostv1.ExtensionSpec) { s.Signature = "AAAA" }, want: ErrMalformedSignature},
		"other name": {edit: func(s *roostv1.ExtensionSpec) { s.Name = "kubectl" }, want: ErrExtensionMismatch, message: `its name is "kubectl", the manifest says "kubelet"`},
		"other version": {edit: func(s *roostv1.ExtensionSpec) { s.Version = "v1.34.5" }, want: ErrExtensionMismatch,
			message: `its version is "v1.34.5", the manifest says "v1.34.4"`},
		"other digest": {edit: func(s *roostv1.ExtensionSpec) {
			s.Image = &roostv1.Artifact{Sha256: strings.Repeat("b", 64), Size: 4096}
		},
			want: ErrExtensionMismatch, message: "its image is sha256 bbbb"},
		"other size": {edit: func(s *roostv1.ExtensionSpec) { s.Image = &roostv1.Artifact{Sha256: s.Image.Sha256, Size: 1} }, want: ErrExtensionMismatch,
			message: "(1 bytes), the manifest says sha256 aaaa"},
		"any architecture": {edit: func(s *roostv1.ExtensionSpec) { s.Architecture = "" }, want: ErrExtensionMismatch,
			message: `its architecture is none, the manifest says "x86-64"`},
		"other path": {edit: func(s *roostv1.ExtensionSpec) { s.Paths = []string{"/usr/bin/kubelet", "/usr/bin/other"} }, want: ErrExtensionMismatch,
			message: `path 1 is "/usr/bin/other", the manifest says "/usr/lib/extension-release.d/extension-release.kubelet"`},
		"fewer paths": {edit: func(s *roostv1.ExtensionSpec) { s.Paths = s.Paths[:1] }, want: ErrExtensionMismatch, message: "it has 1 paths, the manifest 2"},
	} {
		spec, own := signedExtension(t)
		if tc.edit != nil {
			tc.edit(spec)
		}
		keys := []ed25519.PublicKey{own}
		if tc.keys != nil {
			keys = tc.keys
		}
		err := VerifyExtension(FromExtension(spec), keys)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: VerifyExtension = %v, want %v", name, err, tc.want)
			continue
		}
		if prefix := "extension " + spec.Name + " " + spec.Version + ": "; !strings.HasPrefix(err.Error(), prefix) {
			t.Errorf("%s: error %q does not start with %q", name, err, prefix)
		}
		if !strings.Contains(err.Error(), tc.message) {
			t.Errorf("%s: error %q does not say %q", name, err, tc.message)
		}
	}
}

// A Revision carries no architecture and no paths: those are not
// compared, the rest is.
func TestVerifyRevisionExtension(t *testing.T) {
	spec, pub := signedExtension(t)
	rev := &roostv1.RevisionExtension{Name: spec.Name, Version: spec.Version, Image: spec.Image, Manifest: spec.Manifest, Signature: spec.Signature}
	if err := VerifyExtension(FromRevisionExtension(rev), []ed25519.PublicKey{pub}); err != nil {
		t.Fatalf("VerifyExtension: %v", err)
	}
	rev.Image = &roostv1.Artifact{Sha256: strings.Repeat("c", 64), Size: 4096}
	if err := VerifyExtension(FromRevisionExtension(rev), []ed25519.PublicKey{pub}); !errors.Is(err, ErrExtensionMismatch) {
		t.Fatalf("another image: %v, want ErrExtensionMismatch", err)
	}
}

func TestParseExtensionManifest(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want error
	}{
		"release manifest": {in: `{"kind":"ImageRelease","version":"2026.11.0"}`, want: ErrExtensionMismatch},
		"other apiVersion": {in: `{"apiVersion":"roost.io/v2","kind":"ExtensionManifest"}`, want: ErrExtensionMismatch},
	} {
		if _, err := ParseExtensionManifest([]byte(tc.in)); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if _, err := ParseExtensionManifest([]byte("{")); err == nil || !strings.Contains(err.Error(), "not an extension manifest") {
		t.Errorf("bad JSON: %v", err)
	}
	m, err := ParseExtensionManifest([]byte(`{"apiVersion":"roost.io/v1","kind":"ExtensionManifest","name":"a","version":"1","image":{"file":"a-1.raw","size":3,"sha256":"x"},"paths":["/usr/bin/a"],"keyID":"0123"}`))
	if err != nil || m.Name != "a" || m.Image.Size != 3 || m.Image.File != "a-1.raw" || len(m.Paths) != 1 || m.KeyID != "0123" {
		t.Fatalf("ParseExtensionManifest = %+v, %v", m, err)
	}
}
