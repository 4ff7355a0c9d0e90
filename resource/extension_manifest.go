package resource

import (
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
)

// ExtensionFromManifest returns the Extension object a signed extension
// manifest describes (manifest: NAME-VERSION.raw.manifest.json verbatim;
// signature: its base64 ed25519 signature), named ExtensionObjectName:
// name, version, architecture, image (sha256, size in bytes) and paths
// from the manifest, the manifest and signature kept verbatim. It checks
// nothing but that manifest is an extension manifest (errors wrap
// releasesig.ErrExtensionMismatch or are JSON errors); Validate and
// releasesig.VerifyExtension check the rest. roostctl extension push and
// the hub's release-feed import build the object the same way.
func ExtensionFromManifest(manifest []byte, signature string) (*roostv1.Extension, error) {
	m, err := releasesig.ParseExtensionManifest(manifest)
	if err != nil {
		return nil, err
	}
	return &roostv1.Extension{ApiVersion: APIVersion, Kind: "Extension", Metadata: &roostv1.ObjectMeta{Name: ExtensionObjectName(m.Name, m.Version)},
		Spec: &roostv1.ExtensionSpec{Name: m.Name, Version: m.Version, Architecture: m.Architecture,
			Image: &roostv1.Artifact{Sha256: m.Image.SHA256, Size: m.Image.Size}, Paths: m.Paths,
			Manifest: manifest, Signature: signature}}, nil
}
