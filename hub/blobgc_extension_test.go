package hub_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
	"github.com/roostfleet/roost/resource"
)

// signedExtension is the Extension of image, as roostctl extension push
// sends it.
func signedExtension(t *testing.T, name, version string, image []byte, priv ed25519.PrivateKey) *roostv1.Object {
	t.Helper()
	m := releasesig.ExtensionManifest{APIVersion: "roost.io/v1", Kind: "ExtensionManifest", Name: name, Version: version, Paths: []string{"/usr/bin/" + name}}
	m.Image.File, m.Image.Size, m.Image.SHA256 = name+"-"+version+".raw", int64(len(image)), hexSum(image)
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return resource.Wrap(&roostv1.Extension{Spec: &roostv1.ExtensionSpec{Name: name, Version: version,
		Image: &roostv1.Artifact{Sha256: m.Image.SHA256, Size: m.Image.Size}, Paths: m.Paths, Manifest: data,
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, data))}})
}

// TestBlobGCKeepsExtensionImages: the blob garbage collection keeps the
// image of every Extension and every image a Revision pins, and removes
// one once neither names it.
func TestBlobGCKeepsExtensionImages(t *testing.T) {
	dir := t.TempDir()
	h := startHub(t, dir, hub.Options{BlobGCInterval: 20 * time.Millisecond})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(h.AdminConfigPath()); return err == nil })
	c := dial(t, filepath.Join(dir, "admin.conf"))
	ctx := context.Background()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	catalog, pinned := []byte("an extension in the catalog"), []byte("an extension only a Revision pins")
	for _, b := range [][]byte{catalog, pinned} {
		pushBlob(t, c, b, false)
	}
	for _, x := range []*roostv1.Object{signedExtension(t, "tools", "1.0", catalog, priv), signedExtension(t, "agent", "0.4.0", pinned, priv)} {
		if _, err := c.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{x}}); err != nil {
			t.Fatal(err)
		}
	}
	// Revision srv-1-1 pins agent 0.4.0, which is then deleted.
	rev := &roostv1.Command{Time: timestamppb.Now(), RulesVersion: state.RulesVersion, Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{
		Objects: []*roostv1.Object{
			resource.Wrap(&roostv1.Server{Metadata: &roostv1.ObjectMeta{Name: "srv-1"}, Spec: &roostv1.ServerSpec{SystemUuid: "4c4c4544-0000-1000-8000-000000000001"}}),
			resource.Wrap(&roostv1.Revision{Metadata: &roostv1.ObjectMeta{Name: "srv-1-1"}, Spec: &roostv1.RevisionSpec{Server: "srv-1", Number: 1, Machine: "m",
				Extensions: []*roostv1.RevisionExtension{{Name: "agent", Version: "0.4.0", Image: &roostv1.Artifact{Sha256: hexSum(pinned), Size: int64(len(pinned))}}}}}),
		},
		Uids: []string{"00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"}}}}
	data, err := proto.Marshal(rev)
	if err != nil {
		t.Fatal(err)
	}
	if res, _, err := h.Node().Apply(ctx, data); err != nil || res.(*state.ApplyResult).Err != nil {
		t.Fatalf("put Revision: %v %v", res, err)
	}
	if _, err := c.Delete(ctx, &roostv1.DeleteRequest{Kind: "Extension", Name: "agent-0-4-0"}); err != nil {
		t.Fatal(err)
	}

	blob := func(b []byte) string { return filepath.Join(dir, "blobs", "sha256", hexSum(b)) }
	old := time.Now().Add(-2 * time.Hour) // past the 1 h grace
	for _, b := range [][]byte{catalog, pinned} {
		if err := os.Chtimes(blob(b), old, old); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(b []byte) bool { _, err := os.Stat(blob(b)); return os.IsNotExist(err) }
	// A marker past its grace shows that passes run meanwhile.
	marker := []byte("nothing names this")
	pushBlob(t, c, marker, false)
	if err := os.Chtimes(blob(marker), old, old); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an unreferenced blob to go", func() bool { return gone(marker) })
	if gone(catalog) || gone(pinned) {
		t.Fatalf("removed: the catalog's image %v, the Revision's %v", gone(catalog), gone(pinned))
	}

	if _, err := c.Delete(ctx, &roostv1.DeleteRequest{Kind: "Extension", Name: "tools-1-0"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted Extension's image to go", func() bool { return gone(catalog) })
	if gone(pinned) {
		t.Fatal("the image a Revision pins was removed")
	}
}
