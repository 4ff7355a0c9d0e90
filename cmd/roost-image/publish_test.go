package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roostfleet/roost/imagebuilder/feed"
)

// releaseBundle builds a bundle of version with roost-image release,
// signed with key ("" for unsigned).
func releaseBundle(t *testing.T, d, version, key string) string {
	t.Helper()
	src := filepath.Join(d, "src-"+version)
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, src, "vmlinuz", "kernel "+version)
	write(t, src, "initrd", "initrd "+version)
	write(t, src, "boot.efi", "boot")
	def := write(t, src, "img.yaml", "apiVersion: roost.io/v1\nkind: ImageDefinition\nname: t\nversion: "+version+
		"\nchannel: beta\nupgradesFrom: [2026.10.0]\ndate: 2026-11-01T00:00:00Z\nkernel: {path: vmlinuz}\ninitrd: {path: initrd}\nbootloader: {path: boot.efi}\n")
	args := []string{"release", "--manifest", def, "-o", filepath.Join(d, "bundle-"+version)}
	if key != "" {
		args = append(args, "--key", key)
	}
	if msg, err := run(t, args...); err != nil {
		t.Fatal(err, msg)
	}
	return filepath.Join(d, "bundle-"+version)
}

func TestPublish(t *testing.T) {
	d := t.TempDir()
	if msg, err := run(t, "keygen", "-o", filepath.Join(d, "k")); err != nil {
		t.Fatal(err, msg)
	}
	a := releaseBundle(t, d, "2026.11.0", filepath.Join(d, "k.key"))
	b := releaseBundle(t, d, "2026.12.0", filepath.Join(d, "k.key"))
	out := filepath.Join(d, "feed")
	msg, err := run(t, "publish", out, a)
	if err != nil || !strings.Contains(msg, "release 2026.11.0 published on channel beta (3 new artifacts)") {
		t.Fatal(err, msg)
	}
	msg, err = run(t, "publish", out, a, b, "--channel", "stable")
	if err != nil || !strings.Contains(msg, "release 2026.11.0 published on channel stable (0 new artifacts)") ||
		!strings.Contains(msg, "release 2026.12.0 published on channel stable (2 new artifacts)") {
		t.Fatal(err, msg)
	}
	if msg, err = run(t, "publish", out, a); err != nil || !strings.Contains(msg, "release 2026.11.0 already published on channel beta") {
		t.Fatal(err, msg)
	}
	data, err := os.ReadFile(filepath.Join(out, feed.IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := feed.ParseIndex(data)
	if err != nil || strings.Join(ix.Channels, ",") != "beta,stable" {
		t.Fatalf("index %v %v", ix, err)
	}
	data, err = os.ReadFile(filepath.Join(out, filepath.FromSlash(feed.ChannelPath("stable"))))
	if err != nil {
		t.Fatal(err)
	}
	ci, err := feed.ParseChannel("stable", data)
	if err != nil || len(ci.Releases) != 2 || ci.Releases[0].Version != "2026.11.0" || ci.Releases[1].Version != "2026.12.0" {
		t.Fatalf("stable %+v %v", ci, err)
	}
	for _, e := range ci.Releases {
		m, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(e.Manifest)))
		if err != nil || !strings.Contains(string(m), `"upgradesFrom"`) {
			t.Errorf("%s: %v %s", e.Manifest, err, m)
		}
		if _, err := os.Stat(filepath.Join(out, filepath.FromSlash(e.Signature))); err != nil {
			t.Error(err)
		}
	}
	blobs, _ := os.ReadDir(filepath.Join(out, "blobs", "sha256"))
	if len(blobs) != 5 { // two kernels, two initrds, one boot loader
		t.Errorf("%d blobs, want 5", len(blobs))
	}

	// Refused before anything is written: an unsigned bundle, and another
	// manifest under a published version.
	u := releaseBundle(t, filepath.Join(d, "u"), "2027.01.0", "")
	if msg, err := run(t, "publish", out, u); err == nil || !strings.Contains(err.Error(), "is not signed") {
		t.Errorf("unsigned: %v %s", err, msg)
	}
	other := releaseBundle(t, filepath.Join(d, "o"), "2026.12.0", filepath.Join(d, "k.key"))
	write(t, other, "release.json", strings.Replace(string(must(os.ReadFile(filepath.Join(other, "release.json")))), `"name": "t"`, `"name": "u"`, 1))
	if msg, err := run(t, "publish", out, other); err == nil || !strings.Contains(err.Error(), "holds release 2026.12.0 with another manifest") {
		t.Errorf("another manifest: %v %s", err, msg)
	}
	if _, err := os.Stat(filepath.Join(out, "releases", "2027.01.0")); err == nil {
		t.Error("a refused bundle was written")
	}
	if msg, err := run(t, "publish", out); err == nil || !strings.Contains(err.Error(), "nothing to publish") {
		t.Errorf("no bundle: %v %s", err, msg)
	}
}

// An extension is published on --channel, or on the channels of the
// bundles published with it; an unsigned one is refused.
func TestPublishExtension(t *testing.T) {
	needMksquashfs(t)
	d := t.TempDir()
	t.Chdir(d)
	if msg, err := run(t, "keygen", "-o", "k"); err != nil {
		t.Fatal(err, msg)
	}
	write(t, d, "kubelet", "#!/bin/sh\n")
	if msg, err := run(t, "sysext", "--name", "kubelet", "--version", "v1.34.4", "--file", "kubelet:/usr/bin/kubelet", "--key", "k.key"); err != nil {
		t.Fatal(err, msg)
	}
	out := filepath.Join(d, "feed")
	if msg, err := run(t, "publish", out, "--extension", "kubelet-v1.34.4.raw"); err == nil || !strings.Contains(err.Error(), "pass --channel") {
		t.Errorf("no channel: %v %s", err, msg)
	}
	a := releaseBundle(t, d, "2026.11.0", filepath.Join(d, "k.key"))
	msg, err := run(t, "publish", out, a, "--extension", "kubelet-v1.34.4.raw")
	if err != nil || !strings.Contains(msg, "extension kubelet v1.34.4 published on channel beta (1 new artifacts)") {
		t.Fatal(err, msg)
	}
	if msg, err = run(t, "publish", out, "--extension", "kubelet-v1.34.4.raw", "--channel", "stable"); err != nil ||
		!strings.Contains(msg, "extension kubelet v1.34.4 published on channel stable (0 new artifacts)") {
		t.Fatal(err, msg)
	}
	data, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(feed.ChannelPath("stable"))))
	if err != nil {
		t.Fatal(err)
	}
	ci, err := feed.ParseChannel("stable", data)
	if err != nil || len(ci.Extensions) != 1 || ci.Extensions[0].Name != "kubelet" || ci.Extensions[0].Version != "v1.34.4" {
		t.Fatalf("stable %+v %v", ci, err)
	}
	m, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(ci.Extensions[0].Manifest)))
	if err != nil || !bytes.Equal(m, must(os.ReadFile("kubelet-v1.34.4.raw.manifest.json"))) {
		t.Errorf("manifest %v", err)
	}
	// --key: checked before anything is written.
	if msg, err := run(t, "keygen", "-o", "other"); err != nil {
		t.Fatal(err, msg)
	}
	if msg, err := run(t, "publish", out, a, "--extension", "kubelet-v1.34.4.raw", "--key", "other.pub"); err == nil || !strings.Contains(err.Error(), "nothing was published") {
		t.Errorf("wrong key: %v %s", err, msg)
	}
	if msg, err := run(t, "publish", out, a, "--extension", "kubelet-v1.34.4.raw", "--key", "k.pub"); err != nil || !strings.Contains(msg, "already published") {
		t.Errorf("right key: %v %s", err, msg)
	}
	if err := os.Remove("kubelet-v1.34.4.raw.manifest.json.sig"); err != nil {
		t.Fatal(err)
	}
	if msg, err := run(t, "publish", out, "--extension", "kubelet-v1.34.4.raw", "--channel", "beta"); err == nil || !strings.Contains(err.Error(), "is not signed") {
		t.Errorf("unsigned: %v %s", err, msg)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
