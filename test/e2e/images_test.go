package e2e

import (
	"archive/tar"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Images TestWorker imports into the worker's containerd: no registry is
// reachable, so both are built here from testdata/sleeper.
const (
	// pauseImage is the sandbox image the Revision's containerd config
	// names (hub/revisions.SandboxImage).
	pauseImage = "registry.k8s.io/pause:3.10"
	// appImage runs the test's workload pod.
	appImage = "roost.test/sleeper:1"
)

// imageArchive builds testdata/sleeper as a static linux/amd64 binary and
// writes a docker-archive tarball (the format `ctr images import` reads)
// holding one image under both tags, its entrypoint the binary.
func imageArchive(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "sleeper")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./testdata/sleeper")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the sleeper: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "sleeper", Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := tarball.LayerFromReader(bytes.NewReader(layer.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint = []string{"/sleeper"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	refs := map[name.Reference]v1.Image{}
	for _, s := range []string{pauseImage, appImage} {
		tag, err := name.NewTag(s)
		if err != nil {
			t.Fatal(err)
		}
		refs[tag] = img
	}
	out := filepath.Join(dir, "images.tar")
	if err := tarball.MultiRefWriteToFile(out, refs); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestImageArchive checks the archive holds both tags (no VM needed).
func TestImageArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go program")
	}
	p := imageArchive(t)
	for _, s := range []string{pauseImage, appImage} {
		tag, _ := name.NewTag(s)
		img, err := tarball.ImageFromPath(p, &tag)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		cf, err := img.ConfigFile()
		if err != nil || cf.Architecture != "amd64" || len(cf.Config.Entrypoint) != 1 {
			t.Fatalf("%s config %+v (%v)", s, cf, err)
		}
	}
}
