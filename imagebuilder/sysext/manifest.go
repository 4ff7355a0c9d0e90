package sysext

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/roostfleet/roost/imagebuilder/release"
	"github.com/roostfleet/roost/internal/atomicfile"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
)

// What a manifest says it is, and where it sits beside its image: the
// manifest of kubelet-v1.34.4.raw is kubelet-v1.34.4.raw.manifest.json,
// its signature kubelet-v1.34.4.raw.manifest.json.sig.
const (
	ManifestAPIVersion = "roost.io/v1"
	ManifestKind       = "ExtensionManifest"
	ManifestSuffix     = ".manifest.json"
	SignatureSuffix    = ManifestSuffix + ".sig"
)

// Manifest is the signed description of an extension image that the hub
// checks when it is pushed and the agent before it stages it, as
// release.json is for a release. Sign writes it as indented JSON; the
// signature covers those bytes verbatim.
type Manifest struct {
	APIVersion   string   `json:"apiVersion"` // "roost.io/v1"
	Kind         string   `json:"kind"`       // "ExtensionManifest"
	Name         string   `json:"name"`
	Version      string   `json:"version"`
	Architecture string   `json:"architecture,omitempty"` // systemd name, "x86-64"
	Image        Artifact `json:"image"`
	Paths        []string `json:"paths"` // sorted absolute paths of files and symlinks
	KeyID        string   `json:"keyID,omitempty"`
}

// Artifact is the image file: its base name, size in bytes and lower-case
// hex sha256.
type Artifact struct {
	File   string `json:"file"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// ManifestFor describes the inspected image info, stored as file (the
// image's base name is kept: "kubelet-v1.34.4.raw"). KeyID is left for
// Sign.
func ManifestFor(info *Info, file string) *Manifest {
	return &Manifest{
		APIVersion: ManifestAPIVersion, Kind: ManifestKind,
		Name: info.Name, Version: info.Version, Architecture: info.Architecture,
		Image: Artifact{File: filepath.Base(file), Size: info.Size, SHA256: info.SHA256},
		Paths: slices.Clone(info.Paths),
	}
}

var hexSHA256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Check checks m's shape: apiVersion and kind, a valid name and version,
// the image's base name, a non-negative size, a lower-case hex sha256,
// and sorted, unique absolute paths.
func (m *Manifest) Check() error {
	switch {
	case m.APIVersion != ManifestAPIVersion || m.Kind != ManifestKind:
		return fmt.Errorf("apiVersion %q, kind %q: want %s, %s", m.APIVersion, m.Kind, ManifestAPIVersion, ManifestKind)
	case ValidateName(m.Name) != nil:
		return ValidateName(m.Name)
	case ValidateVersion(m.Version) != nil:
		return ValidateVersion(m.Version)
	case m.Architecture != "" && ValidateArch(m.Architecture) != nil:
		return fmt.Errorf("architecture: %w", ValidateArch(m.Architecture))
	case m.Image.File == "" || m.Image.File != filepath.Base(m.Image.File) || m.Image.File == "." || m.Image.File == "..":
		return fmt.Errorf("image.file %q: want the image's file name without a directory", m.Image.File)
	case m.Image.Size < 0:
		return fmt.Errorf("image.size %d is negative", m.Image.Size)
	case !hexSHA256RE.MatchString(m.Image.SHA256):
		return fmt.Errorf("image.sha256 %q: want 64 lower-case hex digits", m.Image.SHA256)
	}
	for i, p := range m.Paths {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("paths: %q is not absolute", p)
		}
		if i > 0 && m.Paths[i-1] >= p {
			return fmt.Errorf("paths: not sorted and unique at %q", p)
		}
	}
	return nil
}

// Describes checks that m describes the inspected image info: the same
// name, version, architecture, size, sha256 and paths. The error wraps
// releasesig.ErrExtensionMismatch and names the first field that differs.
func (m *Manifest) Describes(info *Info) error {
	for _, f := range [][3]string{
		{"name", m.Name, info.Name}, {"version", m.Version, info.Version}, {"architecture", m.Architecture, info.Architecture},
		{"sha256", m.Image.SHA256, info.SHA256},
	} {
		if f[1] != f[2] {
			return fmt.Errorf("%w: the manifest says %s %q, the image has %q", releasesig.ErrExtensionMismatch, f[0], f[1], f[2])
		}
	}
	if m.Image.Size != info.Size {
		return fmt.Errorf("%w: the manifest says %d bytes, the image has %d", releasesig.ErrExtensionMismatch, m.Image.Size, info.Size)
	}
	if !slices.Equal(m.Paths, info.Paths) {
		return fmt.Errorf("%w: the manifest lists other paths than the image holds", releasesig.ErrExtensionMismatch)
	}
	return nil
}

// Marshal is the manifest's JSON as Sign signs it: indented by two
// spaces, with a final newline.
func (m *Manifest) Marshal() ([]byte, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// Sign sets m.KeyID to key's ID (release.KeyID: the one release.json
// carries and roost-image keygen prints), checks m and returns its JSON
// (Marshal) and the base64 ed25519 signature of those bytes. The same m
// and key give the same bytes. Errors: a key that is not an ed25519
// private key, or m.Check's.
func Sign(m *Manifest, key ed25519.PrivateKey) (manifestJSON []byte, sigBase64 string, err error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, "", fmt.Errorf("signing key: %d bytes, want an ed25519 private key of %d (from roost-image keygen)", len(key), ed25519.PrivateKeySize)
	}
	m.KeyID = release.KeyID(key.Public().(ed25519.PublicKey))
	if err := m.Check(); err != nil {
		return nil, "", fmt.Errorf("extension manifest: %w", err)
	}
	data, err := m.Marshal()
	if err != nil {
		return nil, "", err
	}
	return data, base64.StdEncoding.EncodeToString(ed25519.Sign(key, data)), nil
}

// parseManifest reads and checks manifest JSON (unknown fields are
// ignored, as releasesig.ParseExtensionManifest does).
func parseManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("not an extension manifest: %w", err)
	}
	if err := m.Check(); err != nil {
		return nil, err
	}
	return &m, nil
}

// WriteManifest writes the manifest of the image at rawPath beside it
// (rawPath+ManifestSuffix) and, with a key, signs it
// (rawPath+SignatureSuffix, base64 and a newline); without a key a stale
// signature is removed. m.Image.File should be rawPath's base name. Files
// are written through temporary names. It returns the manifest's JSON.
func WriteManifest(rawPath string, m *Manifest, key ed25519.PrivateKey) ([]byte, error) {
	var data []byte
	var sig string
	var err error
	if key != nil {
		data, sig, err = Sign(m, key)
	} else {
		m.KeyID = ""
		if err = m.Check(); err == nil {
			data, err = m.Marshal()
		}
	}
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(rawPath+ManifestSuffix, data, 0o644); err != nil {
		return nil, err
	}
	if key == nil {
		if err := os.Remove(rawPath + SignatureSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		return data, nil
	}
	return data, atomicfile.WriteFile(rawPath+SignatureSuffix, []byte(sig+"\n"), 0o644)
}

// RemoveManifest removes the manifest and signature beside rawPath, if
// any (after an unsigned rebuild, so a stale pair does not stay).
func RemoveManifest(rawPath string) error {
	for _, p := range []string{rawPath + ManifestSuffix, rawPath + SignatureSuffix} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Bundle is an extension image with its manifest, as LoadBundle reads it.
type Bundle struct {
	// Raw is the image's path.
	Raw string
	// Manifest is the parsed manifest; ManifestJSON its bytes verbatim
	// (what the signature covers).
	Manifest     Manifest
	ManifestJSON []byte
	// Signature is the base64 signature ("" when unsigned); Signed says
	// whether the .sig file exists.
	Signature string
	Signed    bool
}

// LoadBundle reads the manifest (rawPath+ManifestSuffix) and signature
// (rawPath+SignatureSuffix) of the image at rawPath. With pub, the
// signature must exist and verify with it; with a nil pub a signature is
// not checked and need not exist. In both cases the image's size and
// sha256 must be the manifest's. The signature is checked by
// releasesig.VerifyExtension, as the hub and the agent check it. Errors
// name the file and wrap releasesig.ErrUntrusted or ErrMalformedSignature
// (signature) or releasesig.ErrExtensionMismatch (the image is not the
// one described), or say what is wrong with the manifest.
func LoadBundle(rawPath string, pub ed25519.PublicKey) (*Bundle, error) {
	mp := rawPath + ManifestSuffix
	data, err := os.ReadFile(mp)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("extension %s has no manifest: %w (roost-image sysext --key KEY writes it)", rawPath, err)
		}
		return nil, fmt.Errorf("extension manifest: %w", err)
	}
	b := &Bundle{Raw: rawPath, ManifestJSON: data}
	sig, err := os.ReadFile(rawPath + SignatureSuffix)
	switch {
	case err == nil:
		b.Signed, b.Signature = true, strings.TrimSpace(string(sig))
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("extension manifest signature: %w", err)
	}
	size, sum, err := fileDigest(rawPath)
	if err != nil {
		return nil, fmt.Errorf("extension image: %w", err)
	}
	if pub != nil {
		if !b.Signed {
			return nil, fmt.Errorf("extension manifest %s is not signed (no %s): sign it with roost-image sysext --key KEY", mp, filepath.Base(rawPath+SignatureSuffix))
		}
		// The signature first, as the agent and the hub check it, on the
		// image as it is: its name and version are what the manifest
		// says.
		var claimed Manifest
		_ = json.Unmarshal(data, &claimed)
		x := releasesig.Extension{Name: claimed.Name, Version: claimed.Version, Image: &roostv1.Artifact{Sha256: sum, Size: size},
			Manifest: data, Signature: b.Signature}
		if err := releasesig.VerifyExtension(x, []ed25519.PublicKey{pub}); err != nil {
			if errors.Is(err, releasesig.ErrUntrusted) {
				return nil, fmt.Errorf("%s: %w: the signature does not verify with key %s (the manifest says key %s signed it)",
					mp, err, release.KeyID(pub), or(claimed.KeyID, "none"))
			}
			return nil, fmt.Errorf("%s: %w", rawPath, err)
		}
	}
	m, err := parseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", mp, err)
	}
	b.Manifest = *m
	if size != m.Image.Size || sum != m.Image.SHA256 {
		return nil, fmt.Errorf("extension image %s: %w: it has %d bytes, sha256 %s; the manifest says %d bytes, sha256 %s",
			rawPath, releasesig.ErrExtensionMismatch, size, sum, m.Image.Size, m.Image.SHA256)
	}
	return b, nil
}

// fileDigest returns the size and lower-case hex sha256 of file p.
func fileDigest(p string) (int64, string, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}
