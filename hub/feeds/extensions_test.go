package feeds

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/roostfleet/roost/hub/state"
	"github.com/roostfleet/roost/imagebuilder/feed"
	"github.com/roostfleet/roost/imagebuilder/sysext"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// extension writes an extension image of name and version (content is
// its bytes: the hub never opens it) with a manifest signed by priv, and
// returns it as roost-image publish hands it to feed.Publish.
func extension(t *testing.T, priv ed25519.PrivateKey, name, version, content string) feed.Extension {
	t.Helper()
	raw := filepath.Join(t.TempDir(), name+"-"+version+".raw")
	if err := os.WriteFile(raw, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	m := &sysext.Manifest{APIVersion: sysext.ManifestAPIVersion, Kind: sysext.ManifestKind, Name: name, Version: version, Architecture: "x86-64",
		Image: sysext.Artifact{File: filepath.Base(raw), Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}, Paths: []string{"/usr/bin/" + name}}
	data, sig, err := sysext.Sign(m, priv)
	if err != nil {
		t.Fatal(err)
	}
	return feed.Extension{Raw: raw, Name: name, Version: version, SHA256: m.Image.SHA256, Size: m.Image.Size, Manifest: data, Signature: sig}
}

// A feed's extension versions are imported as Extensions once their
// signature verifies and their image matches the signed manifest; a
// version signed by an untrusted key or with another image is an
// ImportFailed entry with the reason, and nothing of it is stored.
func TestControllerImportsExtensions(t *testing.T) {
	fl, c, dir, priv, store := directoryFeed(t)
	_, stranger, _ := ed25519.GenerateKey(nil)

	good := extension(t, priv, "kubelet", "v1.34.4", "kubelet v1.34.4 image")
	untrusted := extension(t, stranger, "kubelet", "v1.34.5", "kubelet v1.34.5 image")
	swapped := extension(t, priv, "kubelet", "v1.34.6", "kubelet v1.34.6 image")
	if _, err := feed.Publish(dir, "beta", nil, good, untrusted, swapped); err != nil {
		t.Fatal(err)
	}
	// The feed's image of v1.34.6 is not the one its manifest signs.
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(feed.BlobPath(swapped.SHA256))), []byte("something else entirely"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reconcile(context.Background(), "mirror"); err != nil {
		t.Fatal(err)
	}
	o, _ := fl.f.Get("ReleaseFeed", "mirror")
	got := map[string]*roostv1.FeedRelease{}
	for _, fr := range o.GetReleaseFeed().GetStatus().GetReleases() {
		got[fr.GetExtension()+" "+fr.GetVersion()] = fr
	}
	for _, want := range []struct{ version, state, reason string }{
		{"v1.34.4", state.FeedImported, ""},
		{"v1.34.5", state.FeedImportFailed, ReasonBadSignature},
		{"v1.34.6", state.FeedImportFailed, ReasonArtifactMismatch},
	} {
		fr := got["kubelet "+want.version]
		if fr.GetState() != want.state || fr.GetReason() != want.reason || fr.GetChannel() != "beta" {
			t.Errorf("kubelet %s: %v, want %s %s", want.version, fr, want.state, want.reason)
		}
		x, _ := fl.f.Get("Extension", resource.ExtensionObjectName("kubelet", want.version))
		if stored := x != nil; stored != (want.state == state.FeedImported) {
			t.Errorf("kubelet %s: Extension stored = %v", want.version, stored)
		}
	}
	x, err := fl.f.Get("Extension", resource.ExtensionObjectName("kubelet", "v1.34.4"))
	if err != nil {
		t.Fatal(err)
	}
	if s := x.GetExtension().GetSpec(); s.GetImage().GetSha256() != good.SHA256 || string(s.GetManifest()) != string(good.Manifest) || s.GetArchitecture() != "x86-64" {
		t.Errorf("Extension %v", s)
	}
	for _, e := range []feed.Extension{good, untrusted, swapped} {
		if complete, _, _ := store.Stat(e.SHA256); complete != (e.Version == good.Version) {
			t.Errorf("blob of kubelet %s stored = %v", e.Version, complete)
		}
	}
	// Polled again: the imported version is not fetched or written again.
	before := fl.f.Count("Extension")
	fl.now = fl.now.Add(2 * time.Hour)
	if _, err := c.Reconcile(context.Background(), "mirror"); err != nil {
		t.Fatal(err)
	}
	if n := fl.f.Count("Extension"); n != before {
		t.Errorf("%d Extensions after a second poll, want %d", n, before)
	}
}
