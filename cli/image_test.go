package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/agent/fetch"
	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// makeBundle builds a small signed release bundle and returns its
// directory and the public key file.
func makeBundle(t *testing.T, version string, sizes ...int) (dir, pubFile string) {
	t.Helper()
	src := t.TempDir()
	files := []string{"vmlinuz", "initrd.img", "systemd-bootx64.efi"}
	for i, f := range files {
		data := bytes.Repeat([]byte{byte('a' + i)}, sizes[i])
		data = append(data, []byte(version+f)...)
		if err := os.WriteFile(filepath.Join(src, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	prefix := filepath.Join(t.TempDir(), "release")
	if _, err := release.GenerateKey(prefix); err != nil {
		t.Fatal(err)
	}
	priv, err := release.LoadPrivateKey(prefix + ".key")
	if err != nil {
		t.Fatal(err)
	}
	d := &release.Definition{APIVersion: release.APIVersion, Kind: release.DefinitionKind, Name: "test", Version: version,
		Date: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Components: map[string]string{"kubelet": "v1.34.4"},
		Kernel: release.Source{Path: filepath.Join(src, files[0])}, Initrd: release.Source{Path: filepath.Join(src, files[1])},
		Bootloader: release.Source{Path: filepath.Join(src, files[2])}}
	dir = filepath.Join(t.TempDir(), "bundle")
	if _, err := release.Build(d, dir, release.Options{Key: priv}); err != nil {
		t.Fatal(err)
	}
	return dir, prefix + ".pub"
}

// adminConn dials the hub with the admin configuration.
func adminConn(t *testing.T, config string) *grpc.ClientConn {
	t.Helper()
	cfg, err := client.LoadConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := client.Dial(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// pushRaw uploads data under digest from offset and returns the error of
// CloseAndRecv (or of the first failed Send).
func pushRaw(ctx context.Context, hub roostv1.HubServiceClient, digest string, size, offset int64, data []byte) (*roostv1.PushArtifactResponse, error) {
	stream, err := hub.PushArtifact(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&roostv1.PushArtifactRequest{Sha256: digest, Size: size, Offset: offset, Data: data}); err != nil && err != io.EOF {
		return nil, err
	}
	return stream.CloseAndRecv()
}

// TestImagePush pushes a bundle to a real hub, reads it back, fetches an
// artifact as an agent would, and checks the artifact RPCs' errors.
func TestImagePush(t *testing.T) {
	_, config, run := realHubCLI(t)
	bundle, pub := makeBundle(t, "2026.11.0", 3<<20, 1000, 10)

	r := run("image", "push", bundle, "--key", pub)
	if r.code != 0 {
		t.Fatalf("push: %d\n%s%s", r.code, r.out, r.err)
	}
	if strings.Contains(r.err, "warning") {
		t.Errorf("push with --key warns: %s", r.err)
	}
	for _, want := range []string{"kernel", "initrd", "bootloader", "uploaded 3.0 MiB", "imagerelease/v2026-11-0 created (version 2026.11.0)",
		"on no channel yet: Pools that follow a channel move to it after 'roostctl image promote 2026.11.0 --channel"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("push output lacks %q:\n%s", want, r.out)
		}
	}

	b, err := release.Load(bundle, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn := adminConn(t, config)
	hubc := roostv1.NewHubServiceClient(conn)
	ctx := context.Background()
	kernel, _ := b.Manifest.Artifact("kernel")
	st, err := hubc.StatArtifact(ctx, &roostv1.StatArtifactRequest{Sha256: kernel.SHA256})
	if err != nil || !st.GetComplete() || st.GetSize() != kernel.Size {
		t.Fatalf("StatArtifact(kernel) = %v, %v", st, err)
	}

	r = run("get", "imagereleases")
	if r.code != 0 || !strings.Contains(r.out, "v2026-11-0") || !strings.Contains(r.out, "2026.11.0") {
		t.Fatalf("get imagereleases: %d\n%s%s", r.code, r.out, r.err)
	}

	// Again: nothing uploaded, unchanged; without --key a warning.
	r = run("image", "push", bundle)
	if r.code != 0 || strings.Count(r.out, "already stored") != 3 || !strings.Contains(r.out, "imagerelease/v2026-11-0 unchanged") {
		t.Fatalf("second push: %d\n%s%s", r.code, r.out, r.err)
	}
	if !strings.Contains(r.err, "not checked locally") {
		t.Errorf("push without --key does not warn: %q", r.err)
	}
	r = run("image", "push", bundle, "-o", "json")
	var obj struct {
		Kind     string
		Metadata struct{ Name string }
		Spec     struct {
			Version string
			Kernel  struct{ Sha256 string }
		}
	}
	if r.code != 0 || json.Unmarshal([]byte(r.out), &obj) != nil || obj.Kind != "ImageRelease" || obj.Metadata.Name != "v2026-11-0" ||
		obj.Spec.Kernel.Sha256 != kernel.SHA256 {
		t.Fatalf("push -o json: %d %+v\n%s%s", r.code, obj, r.out, r.err)
	}
	if r = run("image", "push", bundle, "-o", "name"); r.out != "imagerelease/v2026-11-0\n" {
		t.Fatalf("push -o name: %q %s", r.out, r.err)
	}

	// FetchArtifact with the admin certificate, through the agent's fetcher
	// (which resumes from a partial file).
	kdata, err := os.ReadFile(b.Path("kernel"))
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cache, "sha256"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, "sha256", kernel.SHA256+".partial"), kdata[:1<<20+7], 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := fetch.Fetch(ctx, roostv1.NewAgentServiceClient(conn), &roostv1.Artifact{Sha256: kernel.SHA256, Size: kernel.Size}, cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, kdata) {
		t.Fatal("fetched kernel differs")
	}
	fs, err := roostv1.NewAgentServiceClient(conn).FetchArtifact(ctx, &roostv1.FetchArtifactRequest{Sha256: strings.Repeat("0", 64)})
	if err == nil {
		_, err = fs.Recv()
	}
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), strings.Repeat("0", 64)) {
		t.Fatalf("FetchArtifact of a missing blob: %v", err)
	}
	fs, err = roostv1.NewAgentServiceClient(conn).FetchArtifact(ctx, &roostv1.FetchArtifactRequest{Sha256: kernel.SHA256, Offset: kernel.Size + 1})
	if err == nil {
		_, err = fs.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("FetchArtifact past the end: %v", err)
	}

	// A resumed upload whose content does not match is DataLoss, and the
	// partial upload is gone.
	good := []byte("the content the digest names, more or less 40 bytes")
	digest := sum(good)
	if resp, err := pushRaw(ctx, hubc, digest, int64(len(good)), 0, good[:10]); err != nil || resp.GetSize() != 10 {
		t.Fatalf("first part: %v %v", resp, err)
	}
	if st, _ := hubc.StatArtifact(ctx, &roostv1.StatArtifactRequest{Sha256: digest}); st.GetComplete() || st.GetSize() != 10 {
		t.Fatalf("after the first part: %v", st)
	}
	if _, err := pushRaw(ctx, hubc, digest, int64(len(good)), 0, good); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("wrong offset: %v", err)
	}
	corrupt := bytes.ToUpper(good[10:])
	if _, err := pushRaw(ctx, hubc, digest, int64(len(good)), 10, corrupt); status.Code(err) != codes.DataLoss {
		t.Fatalf("corrupt upload: %v, want DataLoss", err)
	}
	if st, _ := hubc.StatArtifact(ctx, &roostv1.StatArtifactRequest{Sha256: digest}); st.GetComplete() || st.GetSize() != 0 {
		t.Fatalf("after the corrupt upload: %v", st)
	}
	if _, err := hubc.StatArtifact(ctx, &roostv1.StatArtifactRequest{Sha256: "ABC"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad digest: %v", err)
	}

	// PutImageRelease refuses a release whose artifacts are not stored, and
	// one whose manifest disagrees with its spec.
	bundle2, _ := makeBundle(t, "2026.12.0-rc.1", 100, 100, 100)
	b2, err := release.Load(bundle2, nil)
	if err != nil {
		t.Fatal(err)
	}
	manifest2, _ := os.ReadFile(filepath.Join(bundle2, release.ManifestFile))
	sig2, _ := os.ReadFile(filepath.Join(bundle2, release.SignatureFile))
	spec := &roostv1.ImageReleaseSpec{Version: "2026.12.0-rc.1", Manifest: manifest2, Signature: strings.TrimSpace(string(sig2))}
	for name, dst := range map[string]**roostv1.Artifact{"kernel": &spec.Kernel, "initrd": &spec.Initrd, "bootloader": &spec.BootLoader} {
		a, _ := b2.Manifest.Artifact(name)
		*dst = &roostv1.Artifact{Sha256: a.SHA256, Size: a.Size}
	}
	_, err = hubc.PutImageRelease(ctx, &roostv1.PutImageReleaseRequest{Release: &roostv1.ImageRelease{Spec: spec}})
	k2, _ := b2.Manifest.Artifact("kernel")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), k2.SHA256) {
		t.Fatalf("release with missing blobs: %v", err)
	}
	spec.Kernel = &roostv1.Artifact{Sha256: kernel.SHA256, Size: kernel.Size}
	_, err = hubc.PutImageRelease(ctx, &roostv1.PutImageReleaseRequest{Release: &roostv1.ImageRelease{Spec: spec}})
	if ae := apierror.FromError(err); ae.Code != codes.InvalidArgument || len(ae.Violations) != 1 || ae.Violations[0].Field != "release.spec.kernel" {
		t.Fatalf("release disagreeing with its manifest: %v", err)
	}
	r = run("image", "push", bundle2)
	if r.code != 0 || !strings.Contains(r.out, "imagerelease/v2026-12-0-rc-1 created") {
		t.Fatalf("push 2: %d\n%s%s", r.code, r.out, r.err)
	}
}

func TestImagePushRefusesBadBundles(t *testing.T) {
	bundle, pub := makeBundle(t, "2026.11.0", 10, 10, 10)
	config := newTestPKI(t).writeConfig(t, "127.0.0.1:1")
	run := cliWith(t, config)
	// Unsigned.
	if err := os.Remove(filepath.Join(bundle, release.SignatureFile)); err != nil {
		t.Fatal(err)
	}
	if r := run("image", "push", bundle); r.code != ExitUsage || !strings.Contains(r.err, "not signed") {
		t.Fatalf("unsigned: %d %s", r.code, r.err)
	}
	// Signed by another key.
	other, _ := makeBundle(t, "2026.11.0", 10, 10, 10)
	if r := run("image", "push", other, "--key", pub); r.code != ExitUsage || !strings.Contains(r.err, "does not verify") {
		t.Fatalf("wrong key: %d %s", r.code, r.err)
	}
	// A corrupted artifact.
	if err := os.WriteFile(filepath.Join(other, release.KernelFile), []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run("image", "push", other); r.code != ExitUsage || !strings.Contains(r.err, "kernel") {
		t.Fatalf("tampered: %d %s", r.code, r.err)
	}
	if r := run("image", "push", bundle, "-o", "table"); r.code != ExitUsage {
		t.Fatalf("bad -o: %d %s", r.code, r.err)
	}
	if r := run("image", "push"); r.code != ExitUsage {
		t.Fatalf("no args: %d %s", r.code, r.err)
	}
}
