package hub_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func hexSum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

// pushBlob uploads data to the member c reaches, or only its first bytes
// (of a declared size of len(data)) when partial.
func pushBlob(t *testing.T, c roostv1.HubServiceClient, data []byte, partial bool) {
	t.Helper()
	stream, err := c.PushArtifact(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	send := data
	if partial {
		send = data[:len(data)/2]
	}
	if err := stream.Send(&roostv1.PushArtifactRequest{Sha256: hexSum(data), Size: int64(len(data)), Data: send}); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.CloseAndRecv(); err != nil || resp.GetSize() != int64(len(send)) {
		t.Fatalf("push: %v %v", resp, err)
	}
}

// signedRelease is an ImageRelease of version with the given kernel and
// initrd, signed by priv (no key is trusted, so the hub records it).
func signedRelease(t *testing.T, version string, kernel, initrd []byte, priv ed25519.PrivateKey) *roostv1.ImageRelease {
	t.Helper()
	pub := priv.Public().(ed25519.PublicKey)
	m := release.Manifest{APIVersion: release.APIVersion, Kind: release.ReleaseKind, Name: "test", Version: version, KeyID: release.KeyID(pub),
		Artifacts: []release.Artifact{{Name: "initrd", File: release.InitrdFile, Size: int64(len(initrd)), SHA256: hexSum(initrd)},
			{Name: "kernel", File: release.KernelFile, Size: int64(len(kernel)), SHA256: hexSum(kernel)}}}
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return &roostv1.ImageRelease{Spec: &roostv1.ImageReleaseSpec{Version: version, Manifest: manifest,
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, manifest)),
		Kernel:    &roostv1.Artifact{Sha256: hexSum(kernel), Size: int64(len(kernel))},
		Initrd:    &roostv1.Artifact{Sha256: hexSum(initrd), Size: int64(len(initrd))}}}
}

// TestBlobGCAfterImageReleaseDelete deletes one of two releases that share
// a kernel: the member's blob garbage collection removes the deleted
// release's own artifact and a stale partial upload, and keeps the shared
// kernel, the other release's artifact and a fresh unreferenced upload
// (within its grace); once the second release goes, so does the kernel.
func TestBlobGCAfterImageReleaseDelete(t *testing.T) {
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	h := startHub(t, dir, hub.Options{BlobGCInterval: 20 * time.Millisecond, Registry: reg})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(h.AdminConfigPath()); return err == nil })
	c := dial(t, filepath.Join(dir, "admin.conf"))
	ctx := context.Background()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}

	kernel := []byte("kernel shared by both releases")
	initrdA, initrdB := []byte("initrd of 2026.1.0"), []byte("initrd of 2026.2.0")
	orphan := []byte("pushed, but its release is not recorded yet")
	abandoned := []byte("an upload nobody finished")
	for _, b := range [][]byte{kernel, initrdA, initrdB, orphan} {
		pushBlob(t, c, b, false)
	}
	pushBlob(t, c, abandoned, true)
	for _, ir := range []*roostv1.ImageRelease{signedRelease(t, "2026.1.0", kernel, initrdA, priv), signedRelease(t, "2026.2.0", kernel, initrdB, priv)} {
		if _, err := c.PutImageRelease(ctx, &roostv1.PutImageReleaseRequest{Release: ir}); err != nil {
			t.Fatal(err)
		}
	}

	blob := func(b []byte) string { return filepath.Join(dir, "blobs", "sha256", hexSum(b)) }
	partial := filepath.Join(dir, "blobs", "uploads", hexSum(abandoned)+".partial")
	backdate := func(path string, by time.Duration) {
		t.Helper()
		old := time.Now().Add(-by)
		if err := os.Chtimes(path, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// The releases' artifacts were stored long ago (past the 1 h grace);
	// the orphan is fresh.
	for _, b := range [][]byte{kernel, initrdA, initrdB} {
		backdate(blob(b), 2*time.Hour)
	}
	backdate(partial, 25*time.Hour)
	gone := func(path string) bool { _, err := os.Stat(path); return os.IsNotExist(err) }
	mustExist := func(what string, b []byte) {
		t.Helper()
		if gone(blob(b)) {
			t.Fatalf("%s was removed", what)
		}
	}
	waitFor(t, "the stale partial upload to go", func() bool { return gone(partial) })
	mustExist("a release's initrd", initrdA)

	if _, err := c.Delete(ctx, &roostv1.DeleteRequest{Kind: "ImageRelease", Name: "v2026-1-0"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted release's initrd to go", func() bool { return gone(blob(initrdA)) })
	mustExist("the kernel the remaining release shares", kernel)
	mustExist("the remaining release's initrd", initrdB)
	mustExist("the fresh unreferenced blob", orphan)
	// The counters are added once the pass that removed the files ends.
	waitFor(t, "a blob and a partial upload counted as removed", func() bool { return gather(t, reg)["roost_blobs_gc_removed_total"] >= 2 })
	m := gather(t, reg)
	if got, want := m["roost_blobs_gc_removed_total"], 2.0; got != want {
		t.Errorf("roost_blobs_gc_removed_total = %v, want %v (a blob and a partial upload)", got, want)
	}
	if got, want := m["roost_blobs_gc_removed_bytes_total"], float64(len(initrdA)+len(abandoned)/2); got != want {
		t.Errorf("roost_blobs_gc_removed_bytes_total = %v, want %v", got, want)
	}

	if _, err := c.Delete(ctx, &roostv1.DeleteRequest{Kind: "ImageRelease", Name: "v2026-2-0"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the kernel once no release names it", func() bool { return gone(blob(kernel)) && gone(blob(initrdB)) })
	mustExist("the fresh unreferenced blob", orphan)
}
