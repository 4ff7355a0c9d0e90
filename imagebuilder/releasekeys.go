package imagebuilder

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	agentconfig "github.com/roostfleet/roost/agent/config"
	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
)

// ErrReleaseKeys is wrapped by the errors of an image whose release keys
// would make its agent refuse the image's own release: none of them
// verifies the bundle's signature, or the bundle is not signed.
var ErrReleaseKeys = errors.New("release keys")

// checkReleaseKeys checks that one of keys (PEM ed25519 public keys, as
// agent config releaseKeys holds them) verifies the signature of bundle
// rel's release.json the way the agent does before it installs a release
// (releasesig.Verify). Errors: a key that does not parse ("release key N:
// …"), an unreadable bundle, and errors wrapping ErrReleaseKeys when the
// bundle is not signed or no key verifies it; the latter names the keys'
// IDs and the keyID release.json records (the short IDs roost-image keygen
// prints).
func checkReleaseKeys(rel *release.Bundle, keys []string) error {
	var pubs []ed25519.PublicKey
	var ids []string
	for i, k := range keys {
		pub, err := agentconfig.ParseReleaseKey(k)
		if err != nil {
			return fmt.Errorf("release key %d: %w", i+1, err)
		}
		pubs = append(pubs, pub)
		ids = append(ids, release.KeyID(pub))
	}
	m := rel.Manifest
	if !rel.Signed {
		return fmt.Errorf("%w: release bundle %s (version %s) is not signed (no %s), so the agent would install nothing from it; sign it with roost-image release --key KEY",
			ErrReleaseKeys, rel.Dir, m.Version, release.SignatureFile)
	}
	manifest, err := os.ReadFile(filepath.Join(rel.Dir, release.ManifestFile))
	if err != nil {
		return fmt.Errorf("release bundle: %w", err)
	}
	sig, err := os.ReadFile(filepath.Join(rel.Dir, release.SignatureFile))
	if err != nil {
		return fmt.Errorf("release bundle: %w", err)
	}
	r := releasesig.Release{Version: m.Version, Manifest: manifest, Signature: string(sig)}
	for name, dst := range map[string]**roostv1.Artifact{"kernel": &r.Kernel, "initrd": &r.Initrd, "bootloader": &r.BootLoader} {
		if a, ok := m.Artifact(name); ok {
			*dst = &roostv1.Artifact{Sha256: a.SHA256, Size: a.Size}
		}
	}
	if _, err := releasesig.Verify(r, pubs); err != nil {
		signer := "its release.json records no keyID"
		if m.KeyID != "" {
			signer = "its release.json says key " + m.KeyID + " signed it"
		}
		if !errors.Is(err, releasesig.ErrUntrusted) {
			signer += "; " + err.Error()
		}
		return fmt.Errorf("%w: none of the given keys (%s) verifies release bundle %s (version %s): %s; "+
			"the agent would refuse to install this release: give the .pub of the key that signed it",
			ErrReleaseKeys, strings.Join(ids, ", "), rel.Dir, m.Version, signer)
	}
	return nil
}
