// Package releasesig checks the ed25519 signature of an ImageRelease's
// manifest (release.json, signed by roost-image release) and names
// release keys. It is the one verification both the agent (before it
// stages a Revision) and the hub (before it records a release, once
// release keys are trusted) run; it depends only on the API types, so the
// agent can use it without importing the hub.
package releasesig

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Errors of Verify; test with errors.Is.
var (
	// ErrNoKeys: Verify was given no key.
	ErrNoKeys = errors.New("no trusted release keys")
	// ErrMalformedSignature: the signature is not base64 of 64 bytes.
	ErrMalformedSignature = errors.New("malformed signature")
	// ErrUntrusted: no given key verifies the signature.
	ErrUntrusted = errors.New("the manifest is not signed by a trusted key")
	// ErrNotListed: the signed manifest does not list an artifact the
	// release names.
	ErrNotListed = errors.New("the signed manifest does not list an artifact")
)

// Release is what a release signature covers: the manifest bytes,
// verbatim, and the artifacts that must be listed in it.
type Release struct {
	// Version names the release in errors.
	Version string
	// Manifest is release.json, verbatim; Signature its base64 ed25519
	// signature (surrounding white space is ignored).
	Manifest  []byte
	Signature string
	// Kernel and Initrd must be listed in the manifest (digest and size);
	// BootLoader too when it has a digest.
	Kernel, Initrd, BootLoader *roostv1.Artifact
}

// FromRevision is the release a Revision boots.
func FromRevision(spec *roostv1.RevisionSpec) Release {
	return Release{Version: spec.GetImageVersion(), Manifest: spec.GetReleaseManifest(), Signature: spec.GetReleaseSignature(),
		Kernel: spec.GetKernel(), Initrd: spec.GetInitrd(), BootLoader: spec.GetBootLoader()}
}

// FromImageRelease is the release an ImageRelease describes.
func FromImageRelease(spec *roostv1.ImageReleaseSpec) Release {
	return Release{Version: spec.GetVersion(), Manifest: spec.GetManifest(), Signature: spec.GetSignature(),
		Kernel: spec.GetKernel(), Initrd: spec.GetInitrd(), BootLoader: spec.GetBootLoader()}
}

// Verify checks that r's manifest is signed by one of keys (ed25519 over
// the manifest bytes) and lists r's kernel, initrd and boot loader with
// their sizes. It returns the key that verified. Errors wrap ErrNoKeys,
// ErrMalformedSignature, ErrUntrusted or ErrNotListed (or a JSON error),
// prefixed with "release VERSION: ".
func Verify(r Release, keys []ed25519.PublicKey) (ed25519.PublicKey, error) {
	if len(keys) == 0 {
		return nil, ErrNoKeys
	}
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(r.Signature))
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("release %s: %w", r.Version, ErrMalformedSignature)
	}
	var signer ed25519.PublicKey
	for _, k := range keys {
		if len(k) == ed25519.PublicKeySize && ed25519.Verify(k, r.Manifest, sig) {
			signer = k
			break
		}
	}
	if signer == nil {
		return nil, fmt.Errorf("release %s: %w", r.Version, ErrUntrusted)
	}
	var m struct {
		Artifacts []struct {
			SHA256 string `json:"sha256"`
			Size   int64  `json:"size"`
		} `json:"artifacts"`
	}
	if err := json.Unmarshal(r.Manifest, &m); err != nil {
		return nil, fmt.Errorf("release %s: manifest: %w", r.Version, err)
	}
	listed := map[string]int64{}
	for _, a := range m.Artifacts {
		listed[strings.ToLower(a.SHA256)] = a.Size
	}
	for _, a := range []struct {
		name string
		art  *roostv1.Artifact
	}{{"kernel", r.Kernel}, {"initrd", r.Initrd}, {"boot loader", r.BootLoader}} {
		if a.art.GetSha256() == "" && a.name == "boot loader" {
			continue
		}
		if size, ok := listed[strings.ToLower(a.art.GetSha256())]; !ok || size != a.art.GetSize() {
			return nil, fmt.Errorf("release %s: %w: the signed manifest does not list the %s %s (%d bytes)",
				r.Version, ErrNotListed, a.name, a.art.GetSha256(), a.art.GetSize())
		}
	}
	return signer, nil
}

// KeyID is the id of a release key: the lower-case hex sha256 of the raw
// 32-byte public key (64 characters). The keyID roost-image writes into
// release.json is its first 16 characters.
func KeyID(pub ed25519.PublicKey) string {
	h := sha256.Sum256(pub)
	return hex.EncodeToString(h[:])
}

// ParsePublicKeyPEM parses a PKIX PEM ("PUBLIC KEY") ed25519 public key,
// as roost-image keygen writes it (KEY.pub).
func ParsePublicKeyPEM(data []byte) (ed25519.PublicKey, error) {
	blk, _ := pem.Decode(data)
	if blk == nil {
		return nil, errors.New("no PEM block (want a PUBLIC KEY, as roost-image keygen writes to KEY.pub)")
	}
	if blk.Type != "PUBLIC KEY" {
		hint := ""
		if strings.Contains(blk.Type, "PRIVATE") {
			hint = " (this is a private key: give the .pub file, never the signing key)"
		}
		return nil, fmt.Errorf("PEM block %q, want PUBLIC KEY%s", blk.Type, hint)
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse public key: %w", err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("a %T public key, want ed25519", k)
	}
	return pub, nil
}

// MarshalPublicKeyPEM encodes pub as PKIX PEM.
func MarshalPublicKeyPEM(pub ed25519.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		panic(err) // ed25519 keys always marshal
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// ErrNotSigned: a field of an ImageRelease the hub acts on differs from
// what the signed manifest says.
var ErrNotSigned = errors.New("the release differs from its signed manifest")

// CheckSignedFields checks that the fields of spec the hub acts on besides
// the artifacts — version and upgradesFrom — are the signed manifest's
// (Verify checks the signature and the artifacts). Errors wrap
// ErrNotSigned (or are a JSON error), prefixed with "release VERSION: ".
func CheckSignedFields(spec *roostv1.ImageReleaseSpec) error {
	var m struct {
		Version      string   `json:"version"`
		UpgradesFrom []string `json:"upgradesFrom"`
	}
	if err := json.Unmarshal(spec.GetManifest(), &m); err != nil {
		return fmt.Errorf("release %s: manifest: %w", spec.GetVersion(), err)
	}
	if m.Version != spec.GetVersion() {
		return fmt.Errorf("release %s: %w: the manifest's version is %q", spec.GetVersion(), ErrNotSigned, m.Version)
	}
	if !slices.Equal(m.UpgradesFrom, spec.GetUpgradesFrom()) {
		return fmt.Errorf("release %s: %w: upgradesFrom %q, the manifest says %q", spec.GetVersion(), ErrNotSigned, spec.GetUpgradesFrom(), m.UpgradesFrom)
	}
	return nil
}
