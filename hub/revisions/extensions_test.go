package revisions

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
	"github.com/roostfleet/roost/resource"
)

var extSigner = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, ed25519.SeedSize))

// testExtension is the signed Extension of name version for arch ("" for
// any), shipping /usr/bin/NAME.
func testExtension(name, version, arch string) *roostv1.Extension {
	m := releasesig.ExtensionManifest{APIVersion: "roost.io/v1", Kind: "ExtensionManifest", Name: name, Version: version, Architecture: arch,
		Paths: []string{"/usr/bin/" + name}}
	sum := sha256.Sum256([]byte(name + version))
	m.Image.File, m.Image.Size, m.Image.SHA256 = name+"-"+version+".raw", 1<<20, hex.EncodeToString(sum[:])
	data, _ := json.Marshal(m)
	return &roostv1.Extension{ApiVersion: resource.APIVersion, Kind: "Extension",
		Metadata: &roostv1.ObjectMeta{Name: resource.ExtensionObjectName(name, version)},
		Spec: &roostv1.ExtensionSpec{Name: name, Version: version, Architecture: arch, Image: &roostv1.Artifact{Sha256: m.Image.SHA256, Size: m.Image.Size},
			Paths: m.Paths, Manifest: data, Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(extSigner, data))}}
}

// withExtensions is fullInputs whose class names refs, resolved to exts.
func withExtensions(refs []string, exts ...*roostv1.Extension) Inputs {
	in := fullInputs()
	in.MachineClass.Spec.Extensions = refs
	in.Extensions = exts
	return in
}

func TestRenderExtensions(t *testing.T) {
	kubelet, agent := testExtension("kubelet", "v1.34.4", "x86-64"), testExtension("roost-agent", "0.4.0", "")
	in := withExtensions([]string{"roost-agent", "kubelet=v1.34.4"}, agent, kubelet)
	spec := mustRender(t, in, 3)
	want := []*roostv1.RevisionExtension{
		{Name: "roost-agent", Version: "0.4.0", Image: agent.Spec.Image, Manifest: agent.Spec.Manifest, Signature: agent.Spec.Signature},
		{Name: "kubelet", Version: "v1.34.4", Image: kubelet.Spec.Image, Manifest: kubelet.Spec.Manifest, Signature: kubelet.Spec.Signature},
	}
	if got := spec.GetExtensions(); len(got) != 2 || !proto.Equal(got[0], want[0]) || !proto.Equal(got[1], want[1]) {
		t.Fatalf("extensions %v", got)
	}
	// What the Revision pins verifies as the agent checks it.
	for _, x := range spec.GetExtensions() {
		if err := releasesig.VerifyExtension(releasesig.FromRevisionExtension(x), []ed25519.PublicKey{extSigner.Public().(ed25519.PublicKey)}); err != nil {
			t.Errorf("the agent's check: %v", err)
		}
	}
	// A class whose extensions were not resolved renders nothing.
	in.Extensions = in.Extensions[:1]
	if _, err := Render(in, 3); err == nil || !strings.Contains(err.Error(), "MachineClass standard names 2 extensions, 1 were resolved") {
		t.Errorf("Render with unresolved extensions: %v", err)
	}
}

// The hash covers the resolved extensions; without extensions it is the
// one roost-hub computed before extensions existed (TestHashStable pins
// those values).
func TestHashExtensions(t *testing.T) {
	base := fullInputs().Hash()
	v1 := withExtensions([]string{"kubelet"}, testExtension("kubelet", "v1.34.4", "x86-64"))
	if v1.Hash() == base {
		t.Fatal("naming an extension does not change the hash")
	}
	if empty := withExtensions(nil); empty.Hash() != base {
		t.Error("no extensions changed the hash")
	}
	v2 := withExtensions([]string{"kubelet"}, testExtension("kubelet", "v1.35.0", "x86-64"))
	if v2.Hash() == v1.Hash() {
		t.Error("a newer version of the extension the class follows renders nothing new")
	}
	resigned := withExtensions([]string{"kubelet"}, testExtension("kubelet", "v1.34.4", "x86-64"))
	resigned.Extensions[0].Spec.Signature = base64.StdEncoding.EncodeToString(make([]byte, ed25519.SignatureSize))
	if resigned.Hash() == v1.Hash() {
		t.Error("another signature renders nothing new")
	}
	again := withExtensions([]string{"kubelet"}, testExtension("kubelet", "v1.34.4", "x86-64"))
	if again.Hash() != v1.Hash() {
		t.Error("the hash is not a function of the inputs")
	}
	if pinned := withExtensions([]string{"kubelet=v1.34.4"}, testExtension("kubelet", "v1.34.4", "x86-64")); pinned.Hash() == v1.Hash() {
		t.Error("changing the class's list renders nothing new")
	}
}

// extFleet is edgeFleet whose class "standard" names refs, with exts
// pushed first; commands apply under the extension rules.
func extFleet(t *testing.T, refs []string, exts ...*roostv1.Extension) *fleet {
	fl := newFleet(t)
	objs := []resource.Resource{}
	for _, x := range exts {
		objs = append(objs, x)
	}
	objs = append(objs,
		&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "standard"}, Spec: &roostv1.MachineClassSpec{Extensions: refs}},
		&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "edge"}, Spec: &roostv1.PoolSpec{MachineClass: "standard", ImageChannel: "stable"}},
		testRelease("2026.11.0", nil, "stable"))
	fl.objectsWithRules(objs...)
	fl.claim(testServer, "52:54:00:00:00:01", "edge-1", "edge")
	return fl
}

// objectsWithRules is objects under state.RulesExtensions.
func (fl *fleet) objectsWithRules(objs ...resource.Resource) {
	fl.t.Helper()
	c := &roostv1.ApplyObjects{}
	for _, o := range objs {
		c.Objects = append(c.Objects, resource.Wrap(o))
		c.Uids = append(c.Uids, fl.newUID())
	}
	fl.apply(&roostv1.Command{RulesVersion: state.RulesExtensions, Command: &roostv1.Command_ApplyObjects{ApplyObjects: c}})
}

func pinnedVersions(r *roostv1.Revision) []string {
	var out []string
	for _, x := range r.GetSpec().GetExtensions() {
		out = append(out, x.GetName()+"="+x.GetVersion())
	}
	return out
}

// TestControllerExtensions: a class's extensions are pinned in each
// Revision; a newer version of one the class follows, and a change of the
// class's list, render a new Revision; an older version does not.
func TestControllerExtensions(t *testing.T) {
	fl := extFleet(t, []string{"kubelet", "tools"}, testExtension("kubelet", "v1.34.4", "x86-64"), testExtension("tools", "1.0", ""))
	fl.step()
	latest := fl.f.LatestRevision(testServer)
	if got := pinnedVersions(latest); !slices.Equal(got, []string{"kubelet=v1.34.4", "tools=1.0"}) || latest.GetSpec().GetNumber() != 1 {
		t.Fatalf("revision %d pins %v", latest.GetSpec().GetNumber(), got)
	}
	in, note := newView(fl.f.Reader()).inputs(fl.f.MachineOf(testServer), nil)
	if note != "" || !proto.Equal(latest.GetSpec(), mustRender(t, in, 1)) {
		t.Fatalf("Step rendered other than Render: %q", note)
	}

	// An older version changes nothing, not even a proposal.
	before := fl.proposed
	fl.objectsWithRules(testExtension("kubelet", "v1.34.3", "x86-64"))
	fl.step()
	if fl.proposed != before || fl.f.LatestRevision(testServer).GetSpec().GetNumber() != 1 {
		t.Fatalf("an older version rendered %v", fl.numbers(testServer))
	}
	// A newer one renders Revision 2.
	fl.objectsWithRules(testExtension("kubelet", "v1.34.10", "x86-64"))
	fl.step()
	if got := pinnedVersions(fl.f.LatestRevision(testServer)); !slices.Equal(got, []string{"kubelet=v1.34.10", "tools=1.0"}) {
		t.Fatalf("after a new version: %v %v", fl.numbers(testServer), got)
	}
	// Pinning the class back renders Revision 3; taking one out, 4.
	fl.objectsWithRules(&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "standard"}, Spec: &roostv1.MachineClassSpec{Extensions: []string{"kubelet=v1.34.4", "tools"}}})
	fl.step()
	fl.objectsWithRules(&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "standard"}, Spec: &roostv1.MachineClassSpec{Extensions: []string{"kubelet=v1.34.4"}}})
	fl.step()
	if got := fl.numbers(testServer); !slices.Equal(got, []int64{1, 2, 3, 4}) {
		t.Fatalf("revisions %v", got)
	}
	if got := pinnedVersions(fl.f.LatestRevision(testServer)); !slices.Equal(got, []string{"kubelet=v1.34.4"}) {
		t.Fatalf("revision 4 pins %v", got)
	}
	before = fl.proposed
	fl.step()
	if fl.proposed != before {
		t.Error("a step with nothing changed proposed")
	}
}

// A Machine whose class cannot run on its Server gets no Revision, and
// its Provisioned condition says why.
func TestControllerExtensionsForAnotherArchitecture(t *testing.T) {
	// The class is applied before any Machine uses it, so the hub cannot
	// refuse it then.
	fl := extFleet(t, []string{"kubelet"}, testExtension("kubelet", "v1.34.4", "arm64"))
	fl.step()
	if n := len(fl.revisions(testServer)); n != 0 {
		t.Fatalf("%d revisions for an amd64 Server of an arm64 class", n)
	}
	want := `MachineClass standard: spec.extensions[0] "kubelet": Extension kubelet-v1-34-4 (kubelet v1.34.4) is built for arm64, not x86-64`
	c := state.FindCondition(fl.f.MachineOf(testServer).GetStatus().GetConditions(), state.MachineProvisioned)
	if c.GetReason() != state.ReasonWaitingForRevision || !strings.HasPrefix(c.GetMessage(), want) {
		t.Fatalf("Provisioned %v, want a message starting %q", c, want)
	}
	// An x86-64 build of a newer version fixes it.
	fl.objectsWithRules(testExtension("kubelet", "v1.34.5", "x86-64"))
	fl.step()
	if got := pinnedVersions(fl.f.LatestRevision(testServer)); !slices.Equal(got, []string{"kubelet=v1.34.5"}) {
		t.Fatalf("after an x86-64 build: %v", got)
	}
}

// TestControllerAgentExtension: every Revision runs the newest pushed
// roost-agent, whether its class names extensions or not; a new agent
// renders a new Revision; a class may pin an agent version; a class
// without extensions while no agent is pushed renders as before.
func TestControllerAgentExtension(t *testing.T) {
	fl := extFleet(t, nil)
	fl.step()
	if got := pinnedVersions(fl.f.LatestRevision(testServer)); len(got) != 0 {
		t.Fatalf("no agent pushed: revision pins %v", got)
	}
	fl.objectsWithRules(testExtension(state.AgentExtension, "0.4.0", "x86-64"))
	fl.step()
	if got := pinnedVersions(fl.f.LatestRevision(testServer)); !slices.Equal(got, []string{"roost-agent=0.4.0"}) || fl.f.LatestRevision(testServer).GetSpec().GetNumber() != 2 {
		t.Fatalf("after the agent's push: revisions %v, latest pins %v", fl.numbers(testServer), got)
	}
	in, note := newView(fl.f.Reader()).inputs(fl.f.MachineOf(testServer), nil)
	if note != "" || !proto.Equal(fl.f.LatestRevision(testServer).GetSpec(), mustRender(t, in, 2)) {
		t.Fatalf("Step rendered other than Render: %q", note)
	}
	// A class with extensions of its own runs the agent too, sorted in.
	fl.objectsWithRules(testExtension("kubelet", "v1.34.4", "x86-64"),
		&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "standard"}, Spec: &roostv1.MachineClassSpec{Extensions: []string{"kubelet"}}})
	fl.step()
	if got := pinnedVersions(fl.f.LatestRevision(testServer)); !slices.Equal(got, []string{"kubelet=v1.34.4", "roost-agent=0.4.0"}) {
		t.Fatalf("class with kubelet: %v", got)
	}
	// A newer agent rolls out; a class pinning the older one keeps it.
	fl.objectsWithRules(testExtension(state.AgentExtension, "0.5.0", "x86-64"))
	fl.step()
	if got := pinnedVersions(fl.f.LatestRevision(testServer)); !slices.Equal(got, []string{"kubelet=v1.34.4", "roost-agent=0.5.0"}) {
		t.Fatalf("after agent 0.5.0: %v", got)
	}
	fl.objectsWithRules(&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "standard"}, Spec: &roostv1.MachineClassSpec{Extensions: []string{"kubelet", "roost-agent=0.4.0"}}})
	fl.step()
	if got := pinnedVersions(fl.f.LatestRevision(testServer)); !slices.Equal(got, []string{"kubelet=v1.34.4", "roost-agent=0.4.0"}) {
		t.Fatalf("class pinning agent 0.4.0: %v", got)
	}
	if got := fl.numbers(testServer); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
		t.Fatalf("revisions %v", got)
	}
}

// An agent extension built for another architecture is named as the
// implied agent extension, not as an item of spec.extensions.
func TestControllerAgentExtensionArchitecture(t *testing.T) {
	fl := extFleet(t, nil, testExtension(state.AgentExtension, "0.4.0", "arm64"))
	fl.step()
	want := `MachineClass standard: the agent extension roost-agent: Extension roost-agent-0-4-0 (roost-agent 0.4.0) is built for arm64, not x86-64`
	c := state.FindCondition(fl.f.MachineOf(testServer).GetStatus().GetConditions(), state.MachineProvisioned)
	if !strings.HasPrefix(c.GetMessage(), want) {
		t.Fatalf("Provisioned %v, want a message starting %q", c, want)
	}
}
