package api

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

func TestImageReleaseName(t *testing.T) {
	for version, want := range map[string]string{
		"2026.11.0":                  "v2026-11-0",
		"2026.12.0-RC.1":             "v2026-12-0-rc-1",
		"1.0+build_7":                "v1-0-build-7",
		"2026.11.0-5a8f63bdbbc582cd": "v2026-11-0-5a8f63bdbbc582cd",
	} {
		if got := ImageReleaseName(version); got != want {
			t.Errorf("ImageReleaseName(%q) = %q, want %q", version, got, want)
		}
	}
}

func TestValidateImageRelease(t *testing.T) {
	k := strings.Repeat("a", 64)
	i := strings.Repeat("b", 64)
	m := release.Manifest{Kind: release.ReleaseKind, Version: "2026.11.0", Artifacts: []release.Artifact{
		{Name: "kernel", SHA256: k, Size: 10}, {Name: "initrd", SHA256: i, Size: 20}}}
	manifest, _ := json.Marshal(m)
	sig := base64.StdEncoding.EncodeToString(make([]byte, ed25519.SignatureSize))
	valid := func() *roostv1.ImageRelease {
		return &roostv1.ImageRelease{Metadata: &roostv1.ObjectMeta{Name: "v2026-11-0"}, Spec: &roostv1.ImageReleaseSpec{
			Version: "2026.11.0", Kernel: &roostv1.Artifact{Sha256: k, Size: 10}, Initrd: &roostv1.Artifact{Sha256: i, Size: 20},
			Signature: sig, Manifest: manifest}}
	}
	if vs := validateImageRelease(valid()); len(vs) != 0 {
		t.Fatalf("valid release: %v", vs)
	}
	fits := valid()
	m.Cmdline = []string{"console=ttyS0", strings.Repeat("x", resource.ReleaseCmdlineBudget-len("console=ttyS0")-1)}
	fits.Spec.Manifest, _ = json.Marshal(m)
	m.Cmdline = nil
	if vs := validateImageRelease(fits); len(vs) != 0 {
		t.Fatalf("release with a cmdline of %d bytes: %v", resource.ReleaseCmdlineBudget, vs)
	}
	for name, tc := range map[string]struct {
		edit  func(*roostv1.ImageRelease)
		field string
	}{
		"no version":     {func(r *roostv1.ImageRelease) { r.Spec.Version = "" }, "release.spec.version"},
		"bad version":    {func(r *roostv1.ImageRelease) { r.Spec.Version, r.Metadata.Name = "a/b", "va-b" }, "release.spec.version"},
		"double dots":    {func(r *roostv1.ImageRelease) { r.Spec.Version, r.Metadata.Name = "2026..1", "v2026--1" }, "release.spec.version"},
		"wrong name":     {func(r *roostv1.ImageRelease) { r.Metadata.Name = "latest" }, "release.metadata.name"},
		"bad digest":     {func(r *roostv1.ImageRelease) { r.Spec.Kernel.Sha256 = "AA" }, "release.spec.kernel.sha256"},
		"no initrd":      {func(r *roostv1.ImageRelease) { r.Spec.Initrd = nil }, "release.spec.initrd"},
		"no signature":   {func(r *roostv1.ImageRelease) { r.Spec.Signature = "" }, "release.spec.signature"},
		"bad signature":  {func(r *roostv1.ImageRelease) { r.Spec.Signature = "abc" }, "release.spec.signature"},
		"no manifest":    {func(r *roostv1.ImageRelease) { r.Spec.Manifest = nil }, "release.spec.manifest"},
		"not JSON":       {func(r *roostv1.ImageRelease) { r.Spec.Manifest = []byte("{") }, "release.spec.manifest"},
		"other digest":   {func(r *roostv1.ImageRelease) { r.Spec.Kernel.Sha256 = i }, "release.spec.kernel"},
		"other size":     {func(r *roostv1.ImageRelease) { r.Spec.Initrd.Size = 21 }, "release.spec.initrd"},
		"extra artifact": {func(r *roostv1.ImageRelease) { r.Spec.BootLoader = &roostv1.Artifact{Sha256: k, Size: 10} }, "release.spec.bootLoader"},
		"bad channel":    {func(r *roostv1.ImageRelease) { r.Spec.Channels = []string{"Stable!"} }, "release.spec.channels[0]"},
		"long cmdline": {func(r *roostv1.ImageRelease) {
			long := m
			long.Cmdline = []string{"console=ttyS0", strings.Repeat("x", resource.ReleaseCmdlineBudget-len("console=ttyS0"))} // one byte over
			r.Spec.Manifest, _ = json.Marshal(long)
		}, "release.spec.manifest"},
	} {
		r := valid()
		tc.edit(r)
		vs := validateImageRelease(r)
		found := false
		for _, v := range vs {
			found = found || v.Field == tc.field
		}
		if !found {
			t.Errorf("%s: violations %v, want one for %s", name, vs, tc.field)
		}
	}
}
