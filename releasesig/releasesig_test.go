package releasesig

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func signed(t *testing.T) (Release, ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	k, i := strings.Repeat("a", 64), strings.Repeat("b", 64)
	manifest := []byte(`{"kind":"ImageRelease","version":"2026.11.0","artifacts":[{"name":"kernel","sha256":"` + k + `","size":10},{"name":"initrd","sha256":"` + i + `","size":20}]}`)
	return Release{Version: "2026.11.0", Manifest: manifest, Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, manifest)) + "\n",
		Kernel: &roostv1.Artifact{Sha256: k, Size: 10}, Initrd: &roostv1.Artifact{Sha256: i, Size: 20}}, pub, priv
}

func TestVerify(t *testing.T) {
	r, pub, _ := signed(t)
	other, _, _ := ed25519.GenerateKey(nil)
	got, err := Verify(r, []ed25519.PublicKey{other, pub})
	if err != nil || !got.Equal(pub) {
		t.Fatalf("Verify = %x, %v; want the signing key", got, err)
	}
	for name, tc := range map[string]struct {
		edit  func(*Release)
		other bool // verify with another key (or none when noKeys)
		none  bool
		want  error
	}{
		"no keys":      {edit: func(*Release) {}, none: true, want: ErrNoKeys},
		"other key":    {edit: func(*Release) {}, other: true, want: ErrUntrusted},
		"tampered":     {edit: func(r *Release) { r.Manifest = append([]byte(" "), r.Manifest...) }, want: ErrUntrusted},
		"bad base64":   {edit: func(r *Release) { r.Signature = "%%%" }, want: ErrMalformedSignature},
		"short sig":    {edit: func(r *Release) { r.Signature = "AAAA" }, want: ErrMalformedSignature},
		"other kernel": {edit: func(r *Release) { r.Kernel = &roostv1.Artifact{Sha256: strings.Repeat("c", 64), Size: 10} }, want: ErrNotListed},
		"other size":   {edit: func(r *Release) { r.Initrd = &roostv1.Artifact{Sha256: r.Initrd.Sha256, Size: 21} }, want: ErrNotListed},
		"unlisted boot loader": {edit: func(r *Release) { r.BootLoader = &roostv1.Artifact{Sha256: strings.Repeat("d", 64), Size: 1} },
			want: ErrNotListed},
	} {
		r, own, _ := signed(t)
		tc.edit(&r)
		keys := []ed25519.PublicKey{own}
		switch {
		case tc.none:
			keys = nil
		case tc.other:
			keys = []ed25519.PublicKey{other}
		}
		_, err := Verify(r, keys)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Verify = %v, want %v", name, err, tc.want)
		}
		if tc.want != ErrNoKeys && (err == nil || !strings.HasPrefix(err.Error(), "release 2026.11.0: ")) {
			t.Errorf("%s: error %q does not name the release", name, err)
		}
	}
}

func TestKeyIDAndPEM(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	data := MarshalPublicKeyPEM(pub)
	got, err := ParsePublicKeyPEM(data)
	if err != nil || !got.Equal(pub) {
		t.Fatalf("round trip: %v", err)
	}
	if id := KeyID(pub); len(id) != 64 || strings.ToLower(id) != id {
		t.Fatalf("KeyID = %q", id)
	}
	for name, in := range map[string]string{
		"empty":   "",
		"private": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
		"garbage": "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
	} {
		if _, err := ParsePublicKeyPEM([]byte(in)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
