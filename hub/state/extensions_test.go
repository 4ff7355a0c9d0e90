package state

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
	"github.com/roostfleet/roost/resource"
)

// The release keys of the extension tests.
var (
	extKey   = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	otherKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))
)

// extManifest is the manifest of extension name version as roost-image
// sysext writes it: for x86-64, shipping /usr/bin/NAME and its
// extension-release file, with an image digest of its own.
func extManifest(name, version string) *releasesig.ExtensionManifest {
	m := &releasesig.ExtensionManifest{APIVersion: "roost.io/v1", Kind: "ExtensionManifest", Name: name, Version: version, Architecture: "x86-64",
		Paths: []string{"/usr/bin/" + name, "/usr/lib/extension-release.d/extension-release." + name}, KeyID: releasesig.KeyID(extKey.Public().(ed25519.PublicKey))[:16]}
	sum := sha256.Sum256([]byte(name + "=" + version))
	m.Image.File, m.Image.Size, m.Image.SHA256 = name+"-"+version+".raw", 4096, hex.EncodeToString(sum[:])
	return m
}

// extensionObj is the Extension of extension name version signed by
// extKey; edits change its manifest first.
func extensionObj(name, version string, edits ...func(*releasesig.ExtensionManifest)) *roostv1.Object {
	m := extManifest(name, version)
	for _, e := range edits {
		e(m)
	}
	return signedExtensionObj(m, extKey)
}

// signedExtensionObj is the Extension m describes, signed by key.
func signedExtensionObj(m *releasesig.ExtensionManifest, key ed25519.PrivateKey) *roostv1.Object {
	data, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return resource.Wrap(&roostv1.Extension{Metadata: &roostv1.ObjectMeta{Name: resource.ExtensionObjectName(m.Name, m.Version)},
		Spec: &roostv1.ExtensionSpec{Name: m.Name, Version: m.Version, Architecture: m.Architecture,
			Image: &roostv1.Artifact{Sha256: m.Image.SHA256, Size: m.Image.Size}, Paths: m.Paths,
			Manifest: data, Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, data))}})
}

// classWith is MachineClass name naming refs.
func classWith(name string, refs ...string) *roostv1.Object {
	return resource.Wrap(&roostv1.MachineClass{Metadata: meta(name, nil), Spec: &roostv1.MachineClassSpec{Extensions: refs}})
}

// ext applies cmd under RulesExtensions.
func ext(cmd *roostv1.Command) *roostv1.Command { return withRules(RulesExtensions, cmd) }

func trustCmd(key ed25519.PrivateKey) *roostv1.Command {
	pub := key.Public().(ed25519.PublicKey)
	return &roostv1.Command{Command: &roostv1.Command_PutTrustedKey{PutTrustedKey: &roostv1.PutTrustedKey{Key: &roostv1.TrustedKey{
		Id: releasesig.KeyID(pub), PublicKeyPem: string(releasesig.MarshalPublicKeyPEM(pub))}}}}
}

func getExtension(t *testing.T, f *FSM, name string) *roostv1.Extension {
	t.Helper()
	o, err := f.Get("Extension", name)
	if err != nil {
		t.Fatal(err)
	}
	return o.GetExtension()
}

// wantMessage fails unless err's message holds every part.
func wantMessage(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("error %v\ndoes not say %q", err, p)
		}
	}
}

// An Extension is immutable: the same one again changes nothing,
// another under the same name and version is refused.
func TestExtensionImmutable(t *testing.T) {
	h := newHarness(t, Options{})
	res := h.mustApply(ext(h.objects(extensionObj("kubelet", "v1.34.4"))))
	if got := actions(res); !slices.Equal(got, []string{"Extension/kubelet-v1-34-4=created"}) {
		t.Fatalf("push: %v", got)
	}
	stored := getExtension(t, h.f, "kubelet-v1-34-4")
	if stored.GetMetadata().GetUid() == "" || stored.GetSpec().GetImage().GetSize() != 4096 || stored.GetKind() != "Extension" {
		t.Fatalf("stored %v", stored)
	}

	res = h.mustApply(ext(h.objects(extensionObj("kubelet", "v1.34.4"))))
	if got := actions(res); !slices.Equal(got, []string{"Extension/kubelet-v1-34-4=unchanged"}) {
		t.Errorf("push again: %v", got)
	}
	if again := getExtension(t, h.f, "kubelet-v1-34-4"); again.GetMetadata().GetModifyIndex() != stored.GetMetadata().GetModifyIndex() {
		t.Errorf("an identical push moved modifyIndex %d → %d", stored.GetMetadata().GetModifyIndex(), again.GetMetadata().GetModifyIndex())
	}

	other := extensionObj("kubelet", "v1.34.4", func(m *releasesig.ExtensionManifest) { m.Image.SHA256 = strings.Repeat("e", 64) })
	e := wantCode(t, h.apply(ext(h.objects(other))).Err, codes.FailedPrecondition)
	wantMessage(t, e, "Extension kubelet-v1-34-4 (extension kubelet v1.34.4) is recorded with another image (sha256 ", "extensions are immutable")
	// Only the signature differs (another key signed the same manifest).
	resigned := signedExtensionObj(extManifest("kubelet", "v1.34.4"), otherKey)
	wantCode(t, h.apply(ext(h.objects(resigned))).Err, codes.FailedPrecondition)

	clash := extensionObj("kubelet", "v1-34-4")
	e = wantCode(t, h.apply(ext(h.objects(clash))).Err, codes.FailedPrecondition)
	wantMessage(t, e, "extension kubelet v1-34-4 and the recorded extension kubelet v1.34.4 share the Extension name kubelet-v1-34-4")
	if got := getExtension(t, h.f, "kubelet-v1-34-4"); got.GetSpec().GetVersion() != "v1.34.4" || got.GetMetadata().GetModifyIndex() != stored.GetMetadata().GetModifyIndex() {
		t.Errorf("a refused push changed the Extension: %v", got)
	}
}

// The FSM checks what validation checks, with the object's field paths.
func TestExtensionInvalid(t *testing.T) {
	h := newHarness(t, Options{})
	bad := extensionObj("kubelet", "v1.34.4")
	bad.GetExtension().Spec.Paths = []string{"/usr/bin/kubelet"} // not the signed manifest's
	e := wantCode(t, h.apply(ext(h.objects(clusterObj("prod", nil), bad))).Err, codes.InvalidArgument)
	if len(e.Violations) != 1 || e.Violations[0].Field != "objects[1].spec.manifest" {
		t.Fatalf("violations %v", e.Violations)
	}
	wantMessage(t, e, "it has 1 paths, the manifest 2")
	wrongName := extensionObj("kubelet", "v1.34.4")
	wrongName.GetExtension().Metadata.Name = "kubelet"
	e = wantCode(t, h.apply(ext(h.objects(wrongName))).Err, codes.InvalidArgument)
	if len(e.Violations) != 1 || e.Violations[0].Field != "objects[0].metadata.name" {
		t.Fatalf("violations %v", e.Violations)
	}
	if _, err := h.f.Get("Cluster", "prod"); err == nil {
		t.Error("the Cluster of a refused command was stored")
	}
}

// Under older rules the kind is unknown, as on the members implementing
// them.
func TestExtensionOlderRules(t *testing.T) {
	h := newHarness(t, Options{})
	e := wantCode(t, h.apply(withRules(RulesExtensions-1, h.objects(extensionObj("kubelet", "v1.34.4")))).Err, codes.InvalidArgument)
	wantMessage(t, e, "Extensions need version 4")
	h.mustApply(ext(h.objects(extensionObj("kubelet", "v1.34.4"))))
	wantCode(t, h.apply(withRules(RulesExtensions-1, deleteCmd("Extension", "kubelet-v1-34-4"))).Err, codes.InvalidArgument)
	// A class naming an unknown extension is not checked under older
	// rules: those members do not know the field.
	h.mustApply(withRules(RulesExtensions-1, h.objects(classWith("c", "nope"))))
}

// Once a release key is trusted, only Extensions a trusted key signed are
// recorded; before, the hub records them with a warning.
func TestExtensionSignature(t *testing.T) {
	h := newHarness(t, Options{})
	res := h.mustApply(ext(h.objects(extensionObj("tools", "1.0"))))
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "no release key is trusted, so the hub recorded extension tools 1.0 without checking its signature") {
		t.Errorf("warnings %q", res.Warnings)
	}
	h.mustApply(trustCmd(otherKey))
	e := wantCode(t, h.apply(ext(h.objects(extensionObj("kubelet", "v1.34.4")))).Err, codes.FailedPrecondition)
	keyID := releasesig.KeyID(extKey.Public().(ed25519.PublicKey))[:16]
	wantMessage(t, e, "extension kubelet v1.34.4 is not signed by a trusted release key: it names key "+keyID, "roostctl image trust add KEY.pub")
	if _, err := h.f.Get("Extension", "kubelet-v1-34-4"); err == nil {
		t.Error("an untrusted Extension was stored")
	}
	// Re-pushing one recorded before is checked too.
	wantCode(t, h.apply(ext(h.objects(extensionObj("tools", "1.0")))).Err, codes.FailedPrecondition)

	h.mustApply(trustCmd(extKey))
	res = h.mustApply(ext(h.objects(extensionObj("kubelet", "v1.34.4"))))
	if len(res.Warnings) != 0 {
		t.Errorf("warnings with a trusted signer: %q", res.Warnings)
	}
	resigned := signedExtensionObj(extManifest("kubelet", "v1.35.0"), otherKey)
	h.mustApply(ext(h.objects(resigned))) // both keys are trusted
	bad := extensionObj("kubelet", "v1.36.0")
	bad.GetExtension().Spec.Signature = base64.StdEncoding.EncodeToString(make([]byte, ed25519.SignatureSize))
	wantCode(t, h.apply(ext(h.objects(bad))).Err, codes.FailedPrecondition)
}

// classFixture has Extensions kubelet v1.34.4 and v1.35.0 and tools 1.0,
// and Server uuidA (amd64) claimed by Machine workers-a of Pool workers
// (MachineClass standard).
func classFixture(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, Options{})
	explicitPool(h)
	availableServer(h, uuidA, "52:54:00:00:00:01")
	h.mustApply(createMachinesCmd(false, newMachine("workers-a", uuidA, "workers")))
	h.mustApply(ext(h.objects(extensionObj("kubelet", "v1.34.4"), extensionObj("kubelet", "v1.35.0"), extensionObj("tools", "1.0"))))
	return h
}

func TestClassExtensionsChecked(t *testing.T) {
	h := classFixture(t)
	h.mustApply(ext(h.objects(classWith("standard", "kubelet", "tools=1.0"))))

	for name, tc := range map[string]struct {
		class      *roostv1.Object
		field, msg string
		extra      []*roostv1.Object
	}{
		"unknown": {class: classWith("standard", "kubelet", "nope"), field: "objects[0].spec.extensions[1]", msg: "no Extension nope is pushed"},
		"unknown version": {class: classWith("standard", "kubelet=v1.33.0"), field: "objects[0].spec.extensions[0]",
			msg: "no Extension kubelet has version v1.33.0 (pushed: v1.34.4, v1.35.0)"},
		"same path": {class: classWith("standard", "tools", "dup"), field: "objects[0].spec.extensions[0]",
			extra: []*roostv1.Object{extensionObj("dup", "1", func(m *releasesig.ExtensionManifest) { m.Paths = []string{"/usr/bin/tools"} })},
			msg:   "extensions dup 1 and tools 1.0 both ship /usr/bin/tools"},
		"architecture": {class: classWith("standard", "arm"), field: "objects[0].spec.extensions[0]",
			extra: []*roostv1.Object{extensionObj("arm", "1", func(m *releasesig.ExtensionManifest) { m.Architecture = "arm64" })},
			msg:   "Extension arm-1 (arm 1) is built for arm64, not x86-64, the architecture of Server " + uuidA + " (roost.io/arch=amd64), which Machine workers-a runs on"},
	} {
		if len(tc.extra) > 0 {
			h.mustApply(ext(h.objects(tc.extra...)))
		}
		e := wantCode(t, h.apply(ext(h.objects(tc.class))).Err, codes.FailedPrecondition)
		if len(e.Violations) != 1 || e.Violations[0].Field != tc.field || !strings.Contains(e.Violations[0].Message, tc.msg) {
			t.Errorf("%s: violations %v, want %s: %q", name, e.Violations, tc.field, tc.msg)
		}
		if got := getMachineClass(t, h.f, "standard").GetSpec().GetExtensions(); !slices.Equal(got, []string{"kubelet", "tools=1.0"}) {
			t.Errorf("%s: a refused apply changed the class: %v", name, got)
		}
	}
	// A class no Machine uses may name an extension for another
	// architecture; a Pool moving its Machines to it is refused.
	h.mustApply(ext(h.objects(classWith("arm-class", "arm"))))
	e := wantCode(t, h.apply(ext(h.objects(poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.Replicas, s.MachineClass = nil, "arm-class" })))).Err,
		codes.FailedPrecondition)
	if len(e.Violations) != 1 || e.Violations[0].Field != "objects[0].spec.machineClass" ||
		!strings.Contains(e.Violations[0].Message, `MachineClass arm-class's spec.extensions[0] "arm": Extension arm-1 (arm 1) is built for arm64`) {
		t.Errorf("pool: %v", e.Violations)
	}
	// Unchanged objects are not checked again.
	h.mustApply(ext(h.objects(classWith("arm-class", "arm"))))

	// A Machine claimed later, on a Server the class does not fit: changes
	// that do not change what its extensions resolve to are not refused
	// (the revision controller says why it renders nothing), changes that
	// do are.
	h.mustApply(ext(h.objects(poolObj("later", "prod", func(s *roostv1.PoolSpec) { s.Replicas, s.MachineClass = nil, "arm-class" }))))
	availableServer(h, uuidB, "52:54:00:00:00:02")
	h.mustApply(createMachinesCmd(false, newMachine("later-b", uuidB, "later")))
	h.mustApply(ext(h.objects(poolObj("later", "prod", func(s *roostv1.PoolSpec) {
		s.Replicas, s.MachineClass, s.NodeLabels = nil, "arm-class", map[string]string{"a": "b"}
	}))))
	armClass := classWith("arm-class", "arm")
	armClass.GetMachineClass().Spec.KernelArgs = []string{"quiet"}
	h.mustApply(ext(h.objects(armClass)))
	e = wantCode(t, h.apply(ext(h.objects(classWith("arm-class", "arm", "tools")))).Err, codes.FailedPrecondition)
	if len(e.Violations) != 1 || !strings.Contains(e.Violations[0].Message, "Machine later-b runs on") {
		t.Errorf("class change with a Machine it does not fit: %v", e.Violations)
	}
}

func getMachineClass(t *testing.T, f *FSM, name string) *roostv1.MachineClass {
	t.Helper()
	o, err := f.Get("MachineClass", name)
	if err != nil {
		t.Fatal(err)
	}
	return o.GetMachineClass()
}

// A new version of an extension a class follows must fit the class, else
// the push is refused naming the class; classes that pin are not
// affected.
func TestExtensionPushChecksFollowers(t *testing.T) {
	h := classFixture(t)
	h.mustApply(ext(h.objects(classWith("standard", "kubelet", "tools"), classWith("pinned", "kubelet=v1.35.0", "tools"))))
	arm := extensionObj("kubelet", "v1.36.0", func(m *releasesig.ExtensionManifest) { m.Architecture = "arm64" })
	e := wantCode(t, h.apply(ext(h.objects(arm))).Err, codes.FailedPrecondition)
	wantMessage(t, e, "extension kubelet v1.36.0 would be the newest kubelet, which MachineClass standard follows (spec.extensions[0] \"kubelet\")",
		"is built for arm64, not x86-64", "pin the class to the version it runs (kubelet=v1.35.0) first")
	clash := extensionObj("kubelet", "v1.36.0", func(m *releasesig.ExtensionManifest) {
		m.Paths = append(m.Paths, "/usr/bin/tools")
		slices.Sort(m.Paths)
	})
	e = wantCode(t, h.apply(ext(h.objects(clash))).Err, codes.FailedPrecondition)
	wantMessage(t, e, "both ship /usr/bin/tools")
	// An older version than the newest changes no class.
	h.mustApply(ext(h.objects(extensionObj("kubelet", "v1.30.0", func(m *releasesig.ExtensionManifest) { m.Architecture = "arm64" }))))
	// Once the class pins, the push goes through.
	h.mustApply(ext(h.objects(classWith("standard", "kubelet=v1.35.0", "tools"))))
	h.mustApply(ext(h.objects(clash)))
}

func TestExtensionDeleteWhileUsed(t *testing.T) {
	h := classFixture(t)
	h.mustApply(ext(h.objects(classWith("standard", "kubelet", "tools=1.0"))))
	e := wantCode(t, h.apply(ext(deleteCmd("Extension", "kubelet-v1-35-0"))).Err, codes.FailedPrecondition)
	wantMessage(t, e, `Extension kubelet-v1-35-0 (extension kubelet v1.35.0) is used by MachineClass "standard" (spec.extensions[0] "kubelet": the newest kubelet)`,
		"name another version in those classes first (kubelet=VERSION)")
	e = wantCode(t, h.apply(ext(deleteCmd("Extension", "tools-1-0"))).Err, codes.FailedPrecondition)
	wantMessage(t, e, `MachineClass "standard" (spec.extensions[1] "tools=1.0": pinned)`)
	// An older version no class resolves to goes.
	h.mustApply(ext(deleteCmd("Extension", "kubelet-v1-34-4")))
	wantCode(t, h.apply(ext(deleteCmd("Extension", "kubelet-v1-34-4"))).Err, codes.NotFound)
	// Once the class no longer names it, it goes too.
	h.mustApply(ext(h.objects(classWith("standard", "kubelet"))))
	h.mustApply(ext(deleteCmd("Extension", "tools-1-0")))
}

// The last agent extension stays while a MachineClass exists: every
// Revision runs it (RulesAgentExtension); under older rules it goes.
func TestExtensionDeleteLastAgent(t *testing.T) {
	h := classFixture(t)
	h.mustApply(ext(h.objects(extensionObj(AgentExtension, "0.4.0"), extensionObj(AgentExtension, "0.5.0"))))
	agent := withRules(RulesAgentExtension, deleteCmd("Extension", "roost-agent-0-5-0"))
	h.mustApply(agent)
	last := withRules(RulesAgentExtension, deleteCmd("Extension", "roost-agent-0-4-0"))
	e := wantCode(t, h.apply(last).Err, codes.FailedPrecondition)
	wantMessage(t, e, "Extension roost-agent-0-4-0 (extension roost-agent 0.4.0) is the last roost-agent", "Push another version first")
	h.mustApply(ext(deleteCmd("Extension", "roost-agent-0-4-0")))
}

func TestExtensionSnapshotRoundTrip(t *testing.T) {
	h := classFixture(t)
	h.mustApply(ext(h.objects(classWith("standard", "kubelet", "tools=1.0"))))
	data := snapshotBytes(t, h.f)
	restored := restoreNew(t, data)
	for _, name := range []string{"kubelet-v1-34-4", "kubelet-v1-35-0", "tools-1-0"} {
		if got, want := getExtension(t, restored, name), getExtension(t, h.f, name); !proto.Equal(got, want) {
			t.Errorf("%s: restored %v, want %v", name, got, want)
		}
	}
	// The rules hold on the restored state.
	rh := &harness{tb: t, f: restored, idx: h.idx}
	wantCode(t, rh.apply(ext(deleteCmd("Extension", "tools-1-0"))).Err, codes.FailedPrecondition)
	wantCode(t, rh.apply(ext(rh.objects(extensionObj("tools", "1.0", func(m *releasesig.ExtensionManifest) { m.Image.Size = 1 })))).Err, codes.FailedPrecondition)
}

func TestResolveExtensions(t *testing.T) {
	var all []*roostv1.Extension
	for _, nv := range [][2]string{{"kubelet", "v1.34.10"}, {"kubelet", "v1.34.9"}, {"agent", "0.4.0"}, {"agent", "0.4.0-rc.1"}} {
		all = append(all, extensionObj(nv[0], nv[1]).GetExtension())
	}
	got, idx, err := ResolveExtensions(all, []string{"kubelet", "agent=0.4.0-rc.1"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range got {
		names = append(names, fmt.Sprintf("%s=%s", x.GetSpec().GetName(), x.GetSpec().GetVersion()))
	}
	if !slices.Equal(names, []string{"agent=0.4.0-rc.1", "kubelet=v1.34.10"}) || !slices.Equal(idx, []int{1, 0}) {
		t.Errorf("resolved %v %v", names, idx)
	}
	_, _, err = ResolveExtensions(all, []string{"agent", "kubelet=v2"})
	if re, ok := err.(*ExtensionRefError); !ok || re.Index != 1 || !strings.Contains(re.Message, "pushed: v1.34.9, v1.34.10") {
		t.Errorf("unknown version: %v", err)
	}
}
