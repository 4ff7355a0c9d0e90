package imagebuilder

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roostfleet/roost/imagebuilder/release"
	"github.com/roostfleet/roost/releasesig"
)

// testBundle builds a release bundle in a temporary directory, signed with
// key (unsigned when nil).
func testBundle(t *testing.T, key ed25519.PrivateKey) *release.Bundle {
	t.Helper()
	src, dir := t.TempDir(), filepath.Join(t.TempDir(), "bundle")
	for name, content := range map[string]string{"vmlinuz": "kernel", "initrd": "initrd", "boot.efi": "boot"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := &release.Definition{APIVersion: release.APIVersion, Kind: release.DefinitionKind, Name: "t", Version: "2026.11.0",
		Date:   time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		Kernel: release.Source{Path: filepath.Join(src, "vmlinuz")}, Initrd: release.Source{Path: filepath.Join(src, "initrd")},
		Bootloader: release.Source{Path: filepath.Join(src, "boot.efi")}}
	if _, err := release.Build(d, dir, release.Options{Key: key}); err != nil {
		t.Fatal(err)
	}
	b, err := release.Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newReleaseKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey, string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv, string(releasesig.MarshalPublicKeyPEM(pub))
}

func TestCheckReleaseKeys(t *testing.T) {
	signerPub, signer, signerPEM := newReleaseKey(t)
	otherPub, _, otherPEM := newReleaseKey(t)
	b := testBundle(t, signer)

	if err := checkReleaseKeys(b, []string{signerPEM}); err != nil {
		t.Errorf("the signing key: %v", err)
	}
	if err := checkReleaseKeys(b, []string{otherPEM, signerPEM}); err != nil {
		t.Errorf("a foreign key and the signing key: %v", err)
	}

	err := checkReleaseKeys(b, []string{otherPEM})
	if !errors.Is(err, ErrReleaseKeys) {
		t.Fatalf("a foreign key: %v, want ErrReleaseKeys", err)
	}
	for _, want := range []string{"release keys: none of the given keys (" + release.KeyID(otherPub) + ")", "version 2026.11.0",
		"its release.json says key " + release.KeyID(signerPub) + " signed it", "the agent would refuse to install this release"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}

	err = checkReleaseKeys(testBundle(t, nil), []string{signerPEM})
	if !errors.Is(err, ErrReleaseKeys) || !strings.Contains(err.Error(), "is not signed") {
		t.Errorf("an unsigned bundle: %v", err)
	}
	err = checkReleaseKeys(b, []string{"not a key"})
	if err == nil || errors.Is(err, ErrReleaseKeys) || !strings.Contains(err.Error(), "release key 1:") {
		t.Errorf("a malformed key: %v", err)
	}
}

// TestEnrollChecksReleaseKeys: Check (and so Enroll) refuses a release its
// agent would refuse.
func TestEnrollChecksReleaseKeys(t *testing.T) {
	_, signer, _ := newReleaseKey(t)
	_, _, otherPEM := newReleaseKey(t)
	b := testBundle(t, signer)
	o := EnrollOptions{Release: b.Dir, Hubs: []string{"10.0.0.1:7443"}, CA: []byte(testCA(t)), Token: "abcdef.0123456789abcdef",
		ReleaseKeys: []string{otherPEM}}
	if _, err := prepare(o); !errors.Is(err, ErrReleaseKeys) {
		t.Errorf("prepare: %v, want ErrReleaseKeys", err)
	}
	if err := Enroll(o, filepath.Join(t.TempDir(), "x.iso")); !errors.Is(err, ErrReleaseKeys) {
		t.Errorf("Enroll: %v, want ErrReleaseKeys", err)
	}
}

// testCA is a self-signed CA certificate, PEM.
func testCA(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "roost-ca"}, NotBefore: time.Now(),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
