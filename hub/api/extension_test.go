package api_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/api"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
)

// testExtension is a signed extension: its image and the Extension
// roostctl extension push sends (no metadata.name: the hub names it).
type testExtension struct {
	image []byte
	obj   *roostv1.Extension
}

func newExtension(t *testing.T, name, version string, priv ed25519.PrivateKey, paths ...string) *testExtension {
	t.Helper()
	image := bytes.Repeat([]byte(name+version), 1000)
	sum := sha256.Sum256(image)
	m := releasesig.ExtensionManifest{APIVersion: "roost.io/v1", Kind: "ExtensionManifest", Name: name, Version: version, Architecture: "x86-64", Paths: paths}
	m.Image.File, m.Image.Size, m.Image.SHA256 = name+"-"+version+".raw", int64(len(image)), hex.EncodeToString(sum[:])
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return &testExtension{image: image, obj: &roostv1.Extension{Spec: &roostv1.ExtensionSpec{Name: name, Version: version, Architecture: "x86-64",
		Image: &roostv1.Artifact{Sha256: m.Image.SHA256, Size: m.Image.Size}, Paths: paths, Manifest: data,
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, data))}}}
}

// applyObjects calls Apply and returns the response, the warnings and the
// error.
func applyObjects(conn *grpc.ClientConn, objs ...*roostv1.Object) (*roostv1.ApplyResponse, []string, error) {
	var hdr metadata.MD
	resp, err := roostv1.NewHubServiceClient(conn).Apply(context.Background(), &roostv1.ApplyRequest{Objects: objs}, grpc.Header(&hdr))
	return resp, hdr.Get(api.WarningHeader), err
}

func extObj(x *testExtension) *roostv1.Object {
	return &roostv1.Object{Kind: &roostv1.Object_Extension{Extension: x.obj}}
}

func classObj(name string, refs ...string) *roostv1.Object {
	return &roostv1.Object{Kind: &roostv1.Object_MachineClass{MachineClass: &roostv1.MachineClass{
		Metadata: &roostv1.ObjectMeta{Name: name}, Spec: &roostv1.MachineClassSpec{Extensions: refs}}}}
}

// TestExtensionCatalog pushes Extensions through the followers of a
// three-member hub (which copy the images from the member that holds
// them), reads them back, names them in a MachineClass and deletes them.
func TestExtensionCatalog(t *testing.T) {
	_, conns := threeMembers(t)
	a, b, c := conns[0], conns[1], conns[2]
	ctx := context.Background()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	kubelet := newExtension(t, "kubelet", "v1.34.4", priv, "/usr/bin/kubelet")
	push(t, a, kubelet.image)

	// Pushed through hub-c: it copies the image, the leader records the
	// Extension unchecked (no key is trusted) and says so.
	resp, warnings, err := applyObjects(c, extObj(kubelet))
	if err != nil {
		t.Fatalf("push via hub-c: %v", err)
	}
	if r := resp.GetResults(); len(r) != 1 || r[0].GetKind() != "Extension" || r[0].GetName() != "kubelet-v1-34-4" || r[0].GetAction() != "created" {
		t.Fatalf("results %v", r)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "recorded extension kubelet v1.34.4 without checking its signature") {
		t.Errorf("warnings %q", warnings)
	}
	if !stored(t, c, kubelet.obj.Spec.Image.Sha256) {
		t.Error("hub-c did not copy the image")
	}
	got, err := roostv1.NewHubServiceClient(b).Get(ctx, &roostv1.GetRequest{Kind: "ext", Name: "kubelet-v1-34-4"})
	if err != nil || got.GetObject().GetExtension().GetSpec().GetImage().GetSha256() != kubelet.obj.Spec.Image.Sha256 {
		t.Fatalf("Get: %v %v", got, err)
	}
	list, err := roostv1.NewHubServiceClient(b).List(ctx, &roostv1.ListRequest{Kind: "extensions"})
	if err != nil || len(list.GetObjects()) != 1 {
		t.Fatalf("List: %v %v", list, err)
	}
	if resp, _, err = applyObjects(b, extObj(kubelet)); err != nil || resp.GetResults()[0].GetAction() != "unchanged" {
		t.Fatalf("push again: %v %v", resp, err)
	}

	// An image no member holds; an invalid Extension; one mixed with other
	// objects.
	tools := newExtension(t, "tools", "1.0", priv, "/usr/bin/kubelet")
	_, _, err = applyObjects(b, extObj(tools))
	if apierror.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "the image of extension tools 1.0 (sha256 ") ||
		!strings.Contains(err.Error(), "is stored on no hub member") {
		t.Fatalf("image not pushed: %v", err)
	}
	bad := newExtension(t, "tools", "1.0", priv, "/etc/tools")
	_, _, err = applyObjects(b, extObj(bad))
	if e := apierror.FromError(err); e.Code != codes.InvalidArgument || len(e.Violations) != 1 || e.Violations[0].Field != "objects[0].spec.paths[0]" {
		t.Fatalf("invalid Extension: %v", err)
	}
	_, _, err = applyObjects(b, classObj("c"), extObj(tools))
	if e := apierror.FromError(err); e.Code != codes.InvalidArgument || len(e.Violations) != 1 || e.Violations[0].Field != "objects[1].kind" {
		t.Fatalf("mixed apply: %v", err)
	}

	// A class names them; unknown ones and two shipping one path are refused.
	push(t, b, tools.image)
	if _, _, err := applyObjects(c, extObj(tools)); err != nil {
		t.Fatal(err)
	}
	_, _, err = applyObjects(b, classObj("workers", "kubelet", "nope"))
	if e := apierror.FromError(err); e.Code != codes.FailedPrecondition || len(e.Violations) != 1 || e.Violations[0].Field != "objects[0].spec.extensions[1]" ||
		!strings.Contains(e.Violations[0].Message, "no Extension nope is pushed") {
		t.Fatalf("unknown extension: %v", err)
	}
	_, _, err = applyObjects(b, classObj("workers", "kubelet", "tools=1.0"))
	if e := apierror.FromError(err); e.Code != codes.FailedPrecondition || !strings.Contains(err.Error(), "both ship /usr/bin/kubelet") {
		t.Fatalf("two extensions shipping one path: %v", err)
	}
	if _, _, err := applyObjects(b, classObj("workers", "kubelet")); err != nil {
		t.Fatal(err)
	}
	_, err = roostv1.NewHubServiceClient(c).Delete(ctx, &roostv1.DeleteRequest{Kind: "Extension", Name: "kubelet-v1-34-4"})
	if apierror.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), `MachineClass "workers"`) {
		t.Fatalf("delete while a class names it: %v", err)
	}
	if _, err := roostv1.NewHubServiceClient(c).Delete(ctx, &roostv1.DeleteRequest{Kind: "Extension", Name: "tools-1-0"}); err != nil {
		t.Fatalf("delete an unused one: %v", err)
	}

	// Once a key is trusted, an Extension another key signed is refused.
	_, otherPriv, _ := ed25519.GenerateKey(nil)
	if _, err := roostv1.NewHubServiceClient(a).TrustReleaseKey(ctx, &roostv1.TrustReleaseKeyRequest{
		PublicKeyPem: string(releasesig.MarshalPublicKeyPEM(otherPriv.Public().(ed25519.PublicKey)))}); err != nil {
		t.Fatal(err)
	}
	next := newExtension(t, "kubelet", "v1.35.0", priv, "/usr/bin/kubelet")
	push(t, a, next.image)
	_, _, err = applyObjects(b, extObj(next))
	if apierror.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "extension kubelet v1.35.0 is not signed by a trusted release key") {
		t.Fatalf("untrusted: %v", err)
	}
}
