package release

import (
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Spec is the ImageRelease spec of a release whose manifest is m, read
// from the bytes manifest (release.json, verbatim) and signed by sig (the
// content of release.json.sig): version, components, upgradesFrom, the
// artifacts' digests and sizes. It carries no channels.
func Spec(m *Manifest, manifest []byte, sig string) *roostv1.ImageReleaseSpec {
	spec := &roostv1.ImageReleaseSpec{Version: m.Version, Components: m.Components, Signature: sig, Manifest: manifest, UpgradesFrom: m.UpgradesFrom}
	for name, dst := range map[string]**roostv1.Artifact{"kernel": &spec.Kernel, "initrd": &spec.Initrd, "bootloader": &spec.BootLoader} {
		if a, ok := m.Artifact(name); ok {
			*dst = &roostv1.Artifact{Sha256: a.SHA256, Size: a.Size}
		}
	}
	return spec
}
