package hub_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/feeds"
	"github.com/roostfleet/roost/hub/state"
	"github.com/roostfleet/roost/imagebuilder/feed"
	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// feedBundle makes a signed release bundle of version in a new directory:
// its kernel, initrd and boot loader hold content unique to the version.
func feedBundle(t *testing.T, key string, version string) string {
	t.Helper()
	src := t.TempDir()
	for _, f := range []string{"vmlinuz", "initrd.img", "boot.efi"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte(strings.Repeat(f+" of "+version+"\n", 100)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	def := filepath.Join(src, "def.yaml")
	if err := os.WriteFile(def, []byte(fmt.Sprintf(`apiVersion: roost.io/v1
kind: ImageDefinition
name: testbed
version: %s
channel: beta
date: 2027-01-01T00:00:00Z
kernel: {path: vmlinuz}
initrd: {path: initrd.img}
bootloader: {path: boot.efi}
`, version)), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := release.LoadDefinition(def)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := release.LoadPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), version)
	if _, err := release.Build(d, out, release.Options{Key: priv}); err != nil {
		t.Fatal(err)
	}
	return out
}

// feedExtension writes an extension image of name and version with a
// manifest signed by the key at key, as roost-image publish --extension
// hands it to feed.Publish (the hub never opens the image).
func feedExtension(t *testing.T, key, name, version string) feed.Extension {
	t.Helper()
	priv, err := release.LoadPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	image := []byte(strings.Repeat(name+" "+version+"\n", 50))
	raw := filepath.Join(t.TempDir(), name+"-"+version+".raw")
	if err := os.WriteFile(raw, image, 0o644); err != nil {
		t.Fatal(err)
	}
	o := signedExtension(t, name, version, image, priv)
	x := o.GetExtension().GetSpec()
	return feed.Extension{Raw: raw, Name: name, Version: version, SHA256: x.GetImage().GetSha256(), Size: x.GetImage().GetSize(),
		Manifest: x.GetManifest(), Signature: x.GetSignature()}
}

func artifactDigest(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, release.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var m release.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	a, ok := m.Artifact(name)
	if !ok {
		t.Fatalf("%s lists no %s", dir, name)
	}
	return a.SHA256
}

// A feed served by a static HTTP server over what roost-image publish
// wrote: the hub imports each release onto its channel, and the Pool
// following the channel moves to it with no command run; a tampered
// manifest or artifact is refused with the reason and nothing of it is
// stored; an unreachable feed is a condition, and the hub keeps serving.
func TestReleaseFeedImportsAndPoolsFollow(t *testing.T) {
	h := startHub(t, t.TempDir(), hub.Options{FeedPollInterval: 300 * time.Millisecond})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(h.AdminConfigPath()); return err == nil })
	cfg, err := client.LoadConfig(h.AdminConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	fx := &agentFixture{t: t, h: h, admin: dial(t, h.AdminConfigPath()), cfg: cfg}
	ctx := context.Background()

	keyPrefix := filepath.Join(t.TempDir(), "release")
	pub, err := release.GenerateKey(keyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(keyPrefix + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fx.admin.TrustReleaseKey(ctx, &roostv1.TrustReleaseKeyRequest{PublicKeyPem: string(pem), Comment: "feed"}); err != nil {
		t.Fatal(err)
	}

	// The feed: 2027.01.0 on beta, served over plain HTTP.
	dir := t.TempDir()
	if _, err := feed.Publish(dir, "", []string{feedBundle(t, keyPrefix+".key", "2027.01.0")}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()

	// One Server, claimed by a Pool following beta.
	fx.availableServer(fx.token(&roostv1.CreateEnrollmentTokenRequest{TtlSeconds: 3600}), testUUID, "52:54:00:00:00:01")
	if _, err := fx.admin.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{
		resource.Wrap(&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "std"}, Spec: &roostv1.MachineClassSpec{}}),
		resource.Wrap(&roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "edge"}, Spec: &roostv1.PoolSpec{MachineClass: "std", ImageChannel: "beta", Replicas: int32p(1)}}),
		resource.Wrap(&roostv1.ReleaseFeed{Metadata: &roostv1.ObjectMeta{Name: "upstream"}, Spec: &roostv1.ReleaseFeedSpec{
			Url: srv.URL, Insecure: true, TrustedKeys: []string{release.KeyID(pub)}, PollInterval: durationpb.New(time.Hour), Channels: []string{"beta"}}}),
	}}); err != nil {
		t.Fatal(err)
	}
	fsm := h.FSM()
	feedStatus := func() *roostv1.ReleaseFeedStatus {
		o, err := fsm.Get("ReleaseFeed", "upstream")
		if err != nil {
			t.Fatal(err)
		}
		return o.GetReleaseFeed().GetStatus()
	}
	entry := func(version string) *roostv1.FeedRelease {
		for _, r := range feedStatus().GetReleases() {
			if r.GetVersion() == version {
				return r
			}
		}
		return nil
	}
	target := func() string {
		o, err := fsm.Get("Pool", "edge")
		if err != nil {
			return ""
		}
		return o.GetPool().GetStatus().GetRollout().GetTargetVersion()
	}
	rendered := func(version string) bool {
		for _, r := range fsm.Revisions(testUUID) {
			if r.GetSpec().GetImageVersion() == version {
				return true
			}
		}
		return false
	}
	waitFor(t, "2027.01.0 imported", func() bool { return entry("2027.01.0").GetState() == state.FeedImported })
	waitFor(t, "the Pool on 2027.01.0", func() bool { return target() == "2027.01.0" && rendered("2027.01.0") })
	o, err := fsm.Get("ImageRelease", release.Name("2027.01.0"))
	if err != nil {
		t.Fatal(err)
	}
	if ir := o.GetImageRelease(); strings.Join(ir.GetSpec().GetChannels(), ",") != "beta" || ir.GetMetadata().GetAnnotations()["roost.io/feed"] != "upstream" {
		t.Errorf("imported release %v", ir)
	}
	for _, name := range []string{"kernel", "initrd", "bootloader"} {
		d := artifactDigest(t, filepath.Join(dir, "releases", "2027.01.0"), name)
		if ok, _, _ := h.Blobs().Stat(d); !ok {
			t.Errorf("the %s %s is not in the blob store", name, d)
		}
	}
	if c := state.FindCondition(feedStatus().GetConditions(), state.FeedReady); c.GetStatus() != "True" {
		t.Errorf("Ready %v", c)
	}

	// A new release is published: imported, and the Pool moves to it.
	if _, err := feed.Publish(dir, "beta", []string{feedBundle(t, keyPrefix+".key", "2027.02.0")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Pool on 2027.02.0", func() bool { return target() == "2027.02.0" && rendered("2027.02.0") })

	// Extensions: the feed publishes the kubelet; once imported, a class
	// follows it by name, and a newer kubelet on the feed reaches the
	// Machine with no command run.
	extEntry := func(name, version string) *roostv1.FeedRelease {
		for _, r := range feedStatus().GetReleases() {
			if r.GetExtension() == name && r.GetVersion() == version {
				return r
			}
		}
		return nil
	}
	pinned := func(name, version string) bool {
		for _, r := range fsm.Revisions(testUUID) {
			for _, x := range r.GetSpec().GetExtensions() {
				if x.GetName() == name && x.GetVersion() == version {
					return true
				}
			}
		}
		return false
	}
	if _, err := feed.Publish(dir, "beta", nil, feedExtension(t, keyPrefix+".key", "kubelet", "v1.34.4")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "kubelet v1.34.4 imported", func() bool { return extEntry("kubelet", "v1.34.4").GetState() == state.FeedImported })
	if _, err := fx.admin.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{
		resource.Wrap(&roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "std"}, Spec: &roostv1.MachineClassSpec{Extensions: []string{"kubelet"}}}),
	}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "kubelet v1.34.4 pinned", func() bool { return pinned("kubelet", "v1.34.4") })
	next := feedExtension(t, keyPrefix+".key", "kubelet", "v1.34.5")
	if _, err := feed.Publish(dir, "beta", nil, next); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "kubelet v1.34.5 pinned", func() bool { return pinned("kubelet", "v1.34.5") })
	if !blobExists(h, next.SHA256) {
		t.Error("the kubelet v1.34.5 image is not in the blob store")
	}

	// A tampered manifest: refused before anything is fetched.
	tm := feedBundle(t, keyPrefix+".key", "2027.03.0")
	if _, err := feed.Publish(dir, "beta", []string{tm}); err != nil {
		t.Fatal(err)
	}
	mpath := filepath.Join(dir, "releases", "2027.03.0", "release.json")
	data, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mpath, []byte(strings.Replace(string(data), `"name": "testbed"`, `"name": "evil"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// A tampered artifact: the initrd of 2027.04.0 replaced by other bytes
	// of the same size.
	ta := feedBundle(t, keyPrefix+".key", "2027.04.0")
	if _, err := feed.Publish(dir, "beta", []string{ta}); err != nil {
		t.Fatal(err)
	}
	bad := artifactDigest(t, ta, "initrd")
	bpath := filepath.Join(dir, "blobs", "sha256", bad)
	data, err = os.ReadFile(bpath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bpath, []byte(strings.ToUpper(string(data))), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both refused", func() bool {
		return entry("2027.03.0").GetState() == state.FeedImportFailed && entry("2027.04.0").GetState() == state.FeedImportFailed
	})
	if e := entry("2027.03.0"); e.GetReason() != feeds.ReasonBadSignature || !strings.Contains(e.GetMessage(), "not signed by a trusted key") {
		t.Errorf("tampered manifest: %v", e)
	}
	if e := entry("2027.04.0"); e.GetReason() != feeds.ReasonArtifactMismatch || !strings.Contains(e.GetMessage(), bad) {
		t.Errorf("tampered artifact: %v", e)
	}
	for _, v := range []string{"2027.03.0", "2027.04.0"} {
		if _, err := fsm.Get("ImageRelease", release.Name(v)); err == nil {
			t.Errorf("tampered release %s recorded", v)
		}
	}
	for _, name := range []string{"kernel", "initrd", "bootloader"} {
		if d := artifactDigest(t, tm, name); blobExists(h, d) {
			t.Errorf("the %s of the tampered manifest's release is stored", name)
		}
	}
	if blobExists(h, bad) {
		t.Errorf("the tampered initrd is stored")
	}
	sum := sha256.Sum256([]byte(strings.ToUpper(string(data))))
	if blobExists(h, hex.EncodeToString(sum[:])) {
		t.Errorf("the tampered bytes are stored under their own digest")
	}
	time.Sleep(time.Second) // more polls: still refused, the Pool stays
	if target() != "2027.02.0" {
		t.Errorf("the Pool moved to %s", target())
	}

	// An unreachable feed: a condition, the hub keeps serving.
	if _, err := fx.admin.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{
		resource.Wrap(&roostv1.ReleaseFeed{Metadata: &roostv1.ObjectMeta{Name: "gone"}, Spec: &roostv1.ReleaseFeedSpec{Url: "http://127.0.0.1:1/feed", Insecure: true}}),
	}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "FetchFailed", func() bool {
		o, err := fsm.Get("ReleaseFeed", "gone")
		c := state.FindCondition(o.GetReleaseFeed().GetStatus().GetConditions(), state.FeedFetchFailed)
		return err == nil && c.GetStatus() == "True" && c.GetReason() == feeds.ReasonUnreachable
	})
	if _, err := fx.admin.Get(ctx, &roostv1.GetRequest{Kind: "ReleaseFeed", Name: "upstream"}); err != nil {
		t.Fatalf("the hub stopped serving: %v", err)
	}
}

func int32p(n int32) *int32 { return &n }

func blobExists(h *hub.Hub, digest string) bool {
	ok, n, _ := h.Blobs().Stat(digest)
	return ok || n > 0
}
