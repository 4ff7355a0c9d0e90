package resource

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func TestExtensionObjectName(t *testing.T) {
	for _, tc := range []struct{ name, version, want string }{
		{"kubelet", "v1.34.4", "kubelet-v1-34-4"},
		{"roost-agent", "0.4.0+site1", "roost-agent-0-4-0-site1"},
		{"Site_Tools", "1.0~rc1", "site-tools-1-0-rc1"},
	} {
		if got := ExtensionObjectName(tc.name, tc.version); got != tc.want {
			t.Errorf("ExtensionObjectName(%q, %q) = %q, want %q", tc.name, tc.version, got, tc.want)
		}
	}
}

func TestExtensionArchitecture(t *testing.T) {
	for in, want := range map[string]string{"": "x86-64", "amd64": "x86-64", "arm64": "arm64", "ppc64le": "ppc64-le", "x86-64": "x86-64"} {
		if got := ExtensionArchitecture(in); got != want {
			t.Errorf("ExtensionArchitecture(%q) = %q, want %q", in, got, want)
		}
	}
	if err := ValidateExtensionArchitecture("amd64"); err == nil || !strings.Contains(err.Error(), "systemd calls amd64 x86-64") {
		t.Errorf("ValidateExtensionArchitecture(amd64) = %v", err)
	}
	for _, ok := range []string{"", "x86-64", "arm64"} {
		if err := ValidateExtensionArchitecture(ok); err != nil {
			t.Errorf("ValidateExtensionArchitecture(%q) = %v", ok, err)
		}
	}
}

func TestParseExtensionRef(t *testing.T) {
	for ref, want := range map[string][2]string{"kubelet": {"kubelet", ""}, "kubelet=v1.34.4": {"kubelet", "v1.34.4"}, "a.b_c=1+x~y": {"a.b_c", "1+x~y"}} {
		n, v, err := ParseExtensionRef(ref)
		if err != nil || n != want[0] || v != want[1] {
			t.Errorf("ParseExtensionRef(%q) = %q, %q, %v; want %q, %q", ref, n, v, err, want[0], want[1])
		}
	}
	for ref, msg := range map[string]string{
		"":                      "extension name is empty",
		"=v1":                   `"=v1" has no name before "="`,
		"kubelet=":              `"kubelet=" has no version after "=": write kubelet for the newest version`,
		"-kubelet":              `"-kubelet": use letters, digits`,
		"kubelet=v1 2":          `extension version "v1 2"`,
		"kube/let":              `"kube/let"`,
		"kubelet=a=b":           `extension version "a=b"`,
		strings.Repeat("k", 65): "is 65 characters long, at most 64",
	} {
		if _, _, err := ParseExtensionRef(ref); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseExtensionRef(%q) = %v, want an error saying %q", ref, err, msg)
		}
	}
}

// The violations of a MachineClass's spec.extensions name the item.
func TestValidateClassExtensions(t *testing.T) {
	class := func(refs ...string) *roostv1.Object {
		return Wrap(&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "workers"}, Spec: &roostv1.MachineClassSpec{Extensions: refs}})
	}
	if vs := Validate(class("kubelet", "roost-agent=v0.4.0")); len(vs) != 0 {
		t.Fatalf("valid extensions: %v", vs)
	}
	vs := Validate(class("kubelet", "kubelet=v1.34.4", "bad name", "tools="))
	got := map[string]string{}
	for _, v := range vs {
		got[v.Field] = v.Message
	}
	for field, msg := range map[string]string{
		"spec.extensions[1]": "extension kubelet is named twice (also spec.extensions[0])",
		"spec.extensions[2]": `extension name "bad name"`,
		"spec.extensions[3]": `"tools=" has no version after "="`,
	} {
		if !strings.Contains(got[field], msg) {
			t.Errorf("%s: %q, want %q (all: %v)", field, got[field], msg, vs)
		}
	}
	if len(vs) != 3 {
		t.Errorf("%d violations, want 3: %v", len(vs), vs)
	}
	many := make([]string, MaxClassExtensions+1)
	for i := range many {
		many[i] = fmt.Sprintf("ext%d", i)
	}
	vs = Validate(class(many...))
	if len(vs) != 1 || vs[0].Field != "spec.extensions" || !strings.Contains(vs[0].Message, "33 extensions; at most 32") {
		t.Errorf("too many: %v", vs)
	}
}

// signedExtensionObject is a valid Extension as the hub stores it.
func signedExtensionObject(t *testing.T, edit func(*roostv1.ExtensionSpec)) *roostv1.Object {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	d := strings.Repeat("ab", 32)
	manifest := []byte(`{"apiVersion":"roost.io/v1","kind":"ExtensionManifest","name":"kubelet","version":"v1.34.4","architecture":"x86-64",` +
		`"image":{"file":"kubelet-v1.34.4.raw","size":4096,"sha256":"` + d + `"},"paths":["/usr/bin/kubelet","/usr/lib/extension-release.d/extension-release.kubelet"]}`)
	spec := &roostv1.ExtensionSpec{Name: "kubelet", Version: "v1.34.4", Architecture: "x86-64",
		Image: &roostv1.Artifact{Sha256: d, Size: 4096}, Paths: []string{"/usr/bin/kubelet", "/usr/lib/extension-release.d/extension-release.kubelet"},
		Manifest: manifest, Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, manifest))}
	if edit != nil {
		edit(spec)
	}
	return Wrap(&roostv1.Extension{Metadata: &roostv1.ObjectMeta{Name: "kubelet-v1-34-4"}, Spec: spec})
}

func TestValidateExtension(t *testing.T) {
	if vs := Validate(signedExtensionObject(t, nil)); len(vs) != 0 {
		t.Fatalf("valid Extension: %v", vs)
	}
	for name, tc := range map[string]struct {
		edit        func(*roostv1.ExtensionSpec)
		field, msg  string
		onlyThisOne bool
	}{
		"bad name":       {edit: func(s *roostv1.ExtensionSpec) { s.Name = "kube let" }, field: "spec.name", msg: `"kube let": use letters`},
		"no version":     {edit: func(s *roostv1.ExtensionSpec) { s.Version = "" }, field: "spec.version", msg: "is empty"},
		"other version":  {edit: func(s *roostv1.ExtensionSpec) { s.Version = "v1.34.5" }, field: "metadata.name", msg: `"kubelet-v1-34-4" does not match extension kubelet version v1.34.5`},
		"too long":       {edit: func(s *roostv1.ExtensionSpec) { s.Version = strings.Repeat("1", 60) }, field: "spec.version", msg: "which is not a DNS-1123 label"},
		"amd64":          {edit: func(s *roostv1.ExtensionSpec) { s.Architecture = "amd64" }, field: "spec.architecture", msg: "systemd calls amd64 x86-64"},
		"no image":       {edit: func(s *roostv1.ExtensionSpec) { s.Image = nil }, field: "spec.image", msg: "is required"},
		"upper digest":   {edit: func(s *roostv1.ExtensionSpec) { s.Image.Sha256 = strings.ToUpper(s.Image.Sha256) }, field: "spec.image.sha256", msg: "not a lower-case hex sha256"},
		"empty image":    {edit: func(s *roostv1.ExtensionSpec) { s.Image.Size = 0 }, field: "spec.image.size", msg: "must be > 0 bytes"},
		"no paths":       {edit: func(s *roostv1.ExtensionSpec) { s.Paths = nil }, field: "spec.paths", msg: "ships at least one file"},
		"etc path":       {edit: func(s *roostv1.ExtensionSpec) { s.Paths = []string{"/etc/kubelet"} }, field: "spec.paths[0]", msg: "outside /usr and /opt"},
		"relative path":  {edit: func(s *roostv1.ExtensionSpec) { s.Paths = []string{"/usr/bin/kubelet", "/usr/../etc/x"} }, field: "spec.paths[1]", msg: "not a clean absolute path"},
		"unsorted paths": {edit: func(s *roostv1.ExtensionSpec) { s.Paths = []string{"/usr/bin/z", "/usr/bin/a"} }, field: "spec.paths[1]", msg: `"/usr/bin/a" comes after "/usr/bin/z"`},
		"twice":          {edit: func(s *roostv1.ExtensionSpec) { s.Paths = []string{"/usr/bin/a", "/usr/bin/a"} }, field: "spec.paths[1]", msg: "must be sorted, each once"},
		"no signature":   {edit: func(s *roostv1.ExtensionSpec) { s.Signature = "" }, field: "spec.signature", msg: "is required"},
		"bad signature":  {edit: func(s *roostv1.ExtensionSpec) { s.Signature = "AAAA" }, field: "spec.signature", msg: "not a base64 ed25519 signature"},
		"no manifest":    {edit: func(s *roostv1.ExtensionSpec) { s.Manifest = nil }, field: "spec.manifest", msg: "is required"},
		"other paths": {edit: func(s *roostv1.ExtensionSpec) { s.Paths = []string{"/usr/bin/kubelet"} }, field: "spec.manifest",
			msg: "extension kubelet v1.34.4: the signed manifest does not match the extension: it has 1 paths, the manifest 2", onlyThisOne: true},
		"any architecture": {edit: func(s *roostv1.ExtensionSpec) { s.Architecture = "" }, field: "spec.manifest",
			msg: `its architecture is none, the manifest says "x86-64"`, onlyThisOne: true},
	} {
		vs := Validate(signedExtensionObject(t, tc.edit))
		found := false
		for _, v := range vs {
			if v.Field == tc.field && strings.Contains(v.Message, tc.msg) {
				found = true
			}
		}
		if !found || (tc.onlyThisOne && len(vs) != 1) {
			t.Errorf("%s: violations %v, want %s: %q", name, vs, tc.field, tc.msg)
		}
	}
}

func TestCompareExtensionVersions(t *testing.T) {
	ordered := []string{"0.9", "1", "1.0", "1.0.0-rc.1", "1.0.0-rc.2", "1.0.0-rc.10", "1.0.0", "v1.0.0", "1.0.0+build1", "1.0.1", "1.0.a",
		"1.2", "1.10", "v1.34.4", "v1.34.10", "2026.11.0"}
	for i := range ordered {
		for j := range ordered {
			got := CompareExtensionVersions(ordered[i], ordered[j])
			want := cmpInt(i, j)
			if got != want {
				t.Errorf("CompareExtensionVersions(%q, %q) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}
