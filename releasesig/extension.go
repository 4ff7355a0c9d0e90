package releasesig

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// The extension manifest (NAME-VERSION.raw.manifest.json, written and
// signed by roost-image sysext) as VerifyExtension reads it: the same JSON
// as imagebuilder/sysext.Manifest, decoded here so that the agent and the
// hub need nothing but the API types.
const (
	// ExtensionManifestAPIVersion and ExtensionManifestKind are the
	// apiVersion and kind every extension manifest carries.
	ExtensionManifestAPIVersion = "roost.io/v1"
	ExtensionManifestKind       = "ExtensionManifest"
)

// ErrExtensionMismatch: the signed extension manifest does not describe
// the extension it came with (another name, version, architecture, image
// digest or size, or other paths), or is not an extension manifest.
var ErrExtensionMismatch = errors.New("the signed manifest does not match the extension")

// ExtensionManifest is the content of a signed extension manifest.
type ExtensionManifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Version    string `json:"version"`
	// Architecture is systemd's name ("x86-64", "arm64"); "" for any.
	Architecture string `json:"architecture,omitempty"`
	// Image is the .raw file: its base name, size in bytes and lower-case
	// hex sha256.
	Image struct {
		File   string `json:"file"`
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	} `json:"image"`
	// Paths are the absolute paths of the files and symlinks the image
	// ships, sorted.
	Paths []string `json:"paths"`
	// KeyID is the first 16 hex digits of the signing key's KeyID, when
	// the signer wrote it.
	KeyID string `json:"keyID,omitempty"`
}

// ParseExtensionManifest decodes an extension manifest and checks its
// apiVersion and kind. Errors wrap ErrExtensionMismatch for another kind,
// or are JSON errors.
func ParseExtensionManifest(data []byte) (*ExtensionManifest, error) {
	var m ExtensionManifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("not an extension manifest: %w", err)
	}
	if m.APIVersion != ExtensionManifestAPIVersion || m.Kind != ExtensionManifestKind {
		return nil, fmt.Errorf("%w: apiVersion %q and kind %q, want %q and %q", ErrExtensionMismatch,
			m.APIVersion, m.Kind, ExtensionManifestAPIVersion, ExtensionManifestKind)
	}
	return &m, nil
}

// Extension is what an extension signature covers: the manifest bytes,
// verbatim, and what the manifest must say about the extension.
type Extension struct {
	// Name and Version must be the manifest's; they also name the
	// extension in errors.
	Name, Version string
	// Image must be the manifest's image (sha256 and size).
	Image *roostv1.Artifact
	// Architecture must be the manifest's when CheckArchitecture is set
	// ("" for any). A Revision does not carry it: the agent reads it from
	// the manifest.
	Architecture      string
	CheckArchitecture bool
	// Paths must be the manifest's, in order, when CheckPaths is set (an
	// Extension object stores them for the hub's checks; a Revision does
	// not).
	Paths      []string
	CheckPaths bool
	// Manifest is the manifest, verbatim; Signature its base64 ed25519
	// signature (surrounding white space is ignored).
	Manifest  []byte
	Signature string
}

// FromExtension is the extension an Extension object describes: every
// field of the manifest is checked against its spec.
func FromExtension(spec *roostv1.ExtensionSpec) Extension {
	return Extension{Name: spec.GetName(), Version: spec.GetVersion(), Image: spec.GetImage(),
		Architecture: spec.GetArchitecture(), CheckArchitecture: true, Paths: spec.GetPaths(), CheckPaths: true,
		Manifest: spec.GetManifest(), Signature: spec.GetSignature()}
}

// FromRevisionExtension is the extension a Revision pins: its name,
// version and image are checked against the manifest.
func FromRevisionExtension(x *roostv1.RevisionExtension) Extension {
	return Extension{Name: x.GetName(), Version: x.GetVersion(), Image: x.GetImage(),
		Manifest: x.GetManifest(), Signature: x.GetSignature()}
}

// String names the extension in errors: "extension kubelet v1.34.4".
func (e Extension) String() string { return "extension " + e.Name + " " + e.Version }

// VerifyExtension checks that e's manifest is signed by one of keys
// (ed25519 over the manifest bytes, as Verify does for releases) and
// describes e: an extension manifest (apiVersion roost.io/v1, kind
// ExtensionManifest) with e's name, version and image sha256 and size
// (bytes), and, when e asks for it, its architecture and paths. Errors
// wrap ErrNoKeys, ErrMalformedSignature, ErrUntrusted or
// ErrExtensionMismatch (or a JSON error), prefixed with "extension NAME
// VERSION: ".
func VerifyExtension(e Extension, keys []ed25519.PublicKey) error {
	if len(keys) == 0 {
		return fmt.Errorf("%s: %w", e, ErrNoKeys)
	}
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(e.Signature))
	if err != nil || len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("%s: %w", e, ErrMalformedSignature)
	}
	signed := false
	for _, k := range keys {
		if len(k) == ed25519.PublicKeySize && ed25519.Verify(k, e.Manifest, sig) {
			signed = true
			break
		}
	}
	if !signed {
		return fmt.Errorf("%s: %w", e, ErrUntrusted)
	}
	return e.CheckManifest()
}

// CheckManifest is VerifyExtension without the signature: it checks only
// that e's manifest describes e. The hub runs it on every Extension, also
// while it trusts no release key. Errors wrap ErrExtensionMismatch (or
// are JSON errors), prefixed with "extension NAME VERSION: ".
func (e Extension) CheckManifest() error {
	m, err := ParseExtensionManifest(e.Manifest)
	if err != nil {
		return fmt.Errorf("%s: %w", e, err)
	}
	return e.matches(m)
}

// matches checks that m describes e (see VerifyExtension).
func (e Extension) matches(m *ExtensionManifest) error {
	mismatch := func(what, got, want string) error {
		return fmt.Errorf("%s: %w: its %s is %s, the manifest says %s", e, ErrExtensionMismatch, what, got, want)
	}
	switch {
	case m.Name != e.Name:
		return mismatch("name", quoted(e.Name), quoted(m.Name))
	case m.Version != e.Version:
		return mismatch("version", quoted(e.Version), quoted(m.Version))
	case !strings.EqualFold(m.Image.SHA256, e.Image.GetSha256()) || m.Image.Size != e.Image.GetSize():
		return mismatch("image", fmt.Sprintf("sha256 %s (%d bytes)", e.Image.GetSha256(), e.Image.GetSize()),
			fmt.Sprintf("sha256 %s (%d bytes)", m.Image.SHA256, m.Image.Size))
	case e.CheckArchitecture && m.Architecture != e.Architecture:
		return mismatch("architecture", quoted(e.Architecture), quoted(m.Architecture))
	case e.CheckPaths && !slices.Equal(m.Paths, e.Paths):
		return fmt.Errorf("%s: %w: %s", e, ErrExtensionMismatch, pathsDiff(e.Paths, m.Paths))
	}
	return nil
}

// pathsDiff says where the paths got differ from the manifest's, want.
func pathsDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("path %d is %q, the manifest says %q", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("it has %d paths, the manifest %d", len(got), len(want))
}

// quoted quotes s, and says "none" for "".
func quoted(s string) string {
	if s == "" {
		return "none"
	}
	return fmt.Sprintf("%q", s)
}
