package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/state"
	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// TestImageCatalog drives the catalog verbs against a real hub: trusted
// keys, pushes checked against them, list, describe, promote and delete.
func TestImageCatalog(t *testing.T) {
	h, config, run := realHubCLI(t)
	bundle, pub := makeBundle(t, "2026.11.0", 2000, 1000, 10)
	other, otherPub := makeBundle(t, "2026.12.0", 10, 10, 10)

	// No key trusted: push works and warns twice (roostctl, then the hub).
	if r := run("image", "trust", "list"); r.code != 0 || !strings.Contains(r.err, "No release key is trusted") {
		t.Fatalf("trust list (empty): %d\n%s%s", r.code, r.out, r.err)
	}
	r := run("image", "push", bundle)
	if r.code != 0 || !strings.Contains(r.err, "not checked locally") || !strings.Contains(r.err, "Warning from hub: no release key is trusted") {
		t.Fatalf("push without trusted keys: %d\n%s%s", r.code, r.out, r.err)
	}

	// Trust a key; the id is printed and listed; adding it again is fine.
	r = run("image", "trust", "add", otherPub, "--comment", "beta team")
	if r.code != 0 || !strings.Contains(r.out, "trusted (ID ") {
		t.Fatalf("trust add: %d\n%s%s", r.code, r.out, r.err)
	}
	if r = run("image", "trust", "add", otherPub, "-o", "json"); r.code != 0 {
		t.Fatalf("trust add again: %d %s", r.code, r.err)
	}
	var key trustedKeyJSON
	if err := json.Unmarshal([]byte(r.out), &key); err != nil || len(key.ID) != 64 || key.Comment != "beta team" || key.AddedAt == "" {
		t.Fatalf("trust add -o json: %v %+v", err, key)
	}
	if r = run("image", "trust", "add", otherPub); r.code != 0 || r.out != "release key "+key.ID[:16]+" was trusted already\n" {
		t.Fatalf("trust add again: %d %q %s", r.code, r.out, r.err)
	}
	if r = run("image", "trust", "add", otherPub, "--comment", "beta"); r.code != 0 ||
		r.out != "release key "+key.ID[:16]+` was trusted already; comment "beta team" replaced by "beta"`+"\n" {
		t.Fatalf("trust add with another comment: %d %q %s", r.code, r.out, r.err)
	}
	if r = run("image", "trust", "add", otherPub, "--comment", "beta team"); r.code != 0 {
		t.Fatalf("trust add with the first comment: %d %q %s", r.code, r.out, r.err)
	}
	r = run("image", "trust", "list")
	if r.code != 0 || !strings.Contains(r.out, key.ID[:16]) || strings.Contains(r.out, key.ID) || !strings.Contains(r.out, "beta team") {
		t.Fatalf("trust list: %d\n%s%s", r.code, r.out, r.err)
	}
	if r = run("image", "trust", "list", "-o", "wide"); !strings.Contains(r.out, key.ID) {
		t.Fatalf("trust list -o wide: %s", r.out)
	}
	if r = run("image", "trust", "list", "-o", "yaml"); r.code != 0 || !strings.Contains(r.out, "publicKeyPem: |") {
		t.Fatalf("trust list -o yaml: %d %s %s", r.code, r.out, r.err)
	}
	keyData, _ := os.ReadFile(filepath.Join(filepath.Dir(pub), "release.key"))
	priv := writeFile(t, t.TempDir(), "priv.pem", string(keyData))
	if r = run("image", "trust", "add", priv); r.code != ExitUsage || !strings.Contains(r.err, "private key") {
		t.Fatalf("trust add of a private key: %d %s", r.code, r.err)
	}

	// A bundle signed by an untrusted key is refused before any upload.
	bundle2, _ := makeBundle(t, "2026.11.1", 10, 10, 10)
	r = run("image", "push", bundle2)
	b2, _ := release.Load(bundle2, nil)
	k2, _ := b2.Manifest.Artifact("kernel")
	if r.code != ExitFailed || !strings.Contains(r.err, "not trusted") && !strings.Contains(r.err, "does not trust") || !strings.Contains(r.err, "nothing was uploaded") {
		t.Fatalf("push of an untrusted bundle: %d\n%s%s", r.code, r.out, r.err)
	}
	if r = run("get", "imagerelease", "v2026-11-1"); r.code != ExitFailed {
		t.Fatalf("the untrusted release was recorded: %s", r.out)
	}
	conn := adminConn(t, config)
	hubc := roostv1.NewHubServiceClient(conn)
	if st, err := hubc.StatArtifact(context.Background(), &roostv1.StatArtifactRequest{Sha256: k2.SHA256}); err != nil || st.GetSize() != 0 {
		t.Fatalf("the untrusted kernel was uploaded: %v %v", st, err)
	}
	// With --key the local check is the key's; the hub still refuses.
	r = run("image", "push", bundle2, "--key", filepath.Join(filepath.Dir(bundle2), "..", filepath.Base(filepath.Dir(bundle2)), "x"))
	if r.code != ExitUsage {
		t.Fatalf("push with a missing --key file: %d %s", r.code, r.err)
	}
	r = run("image", "push", other)
	if r.code != 0 || strings.Contains(r.err, "arning") {
		t.Fatalf("push of a trusted bundle: %d\n%s%s", r.code, r.out, r.err)
	}

	// promote, list, describe.
	if r = run("image", "promote", "2026.11.0", "--channel", "stable"); r.code != 0 || r.out != "imagerelease/v2026-11-0 promoted to stable (channels: stable)\n" {
		t.Fatalf("promote: %d %q %s", r.code, r.out, r.err)
	}
	if r = run("image", "promote", "2026.11.0", "--channel", "stable"); r.code != 0 || r.out != "imagerelease/v2026-11-0 was already in stable (channels: stable)\n" {
		t.Fatalf("promote again: %d %q %s", r.code, r.out, r.err)
	}
	if r = run("image", "promote", "2026.11.0", "--channel", "beta", "--remove"); r.code != 0 || r.out != "imagerelease/v2026-11-0 was not in beta (channels: stable)\n" {
		t.Fatalf("remove from a channel it is not in: %d %q %s", r.code, r.out, r.err)
	}
	if r = run("image", "promote", "v2026-12-0", "--channel", "beta", "-o", "name"); r.code != 0 || r.out != "imagerelease/v2026-12-0\n" {
		t.Fatalf("promote by name: %d %q %s", r.code, r.out, r.err)
	}
	if r = run("image", "promote", "2026.11.0", "--channel", "Not_A_Label"); r.code != ExitUsage {
		t.Fatalf("bad channel: %d %s", r.code, r.err)
	}
	if r = run("image", "promote", "2026.11.0"); r.code != ExitUsage {
		t.Fatalf("no channel: %d %s", r.code, r.err)
	}
	if r = run("image", "promote", "1999.1.0", "--channel", "beta"); r.code != ExitFailed {
		t.Fatalf("unknown version: %d %s", r.code, r.err)
	}

	// A Revision boots 2026.11.0 (written the way the hub's controllers do).
	putRevision(t, h.Node().Apply)
	r = run("image", "list")
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if r.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "VERSION") || !strings.HasPrefix(lines[1], "2026.12.0") ||
		!strings.Contains(lines[2], "stable") || !strings.HasSuffix(lines[2], " 1") || !strings.HasSuffix(lines[1], " 0") {
		t.Fatalf("image list: %d\n%s%s", r.code, r.out, r.err)
	}
	if f := strings.Fields(lines[2]); len(f) < 3 || f[2] != "<none>" { // the test release names no kernel version
		t.Errorf("image list KERNEL column: %q", lines[2])
	}
	if r = run("image", "list", "-o", "name"); r.out != "imagerelease/v2026-12-0\nimagerelease/v2026-11-0\n" {
		t.Fatalf("image list -o name: %q", r.out)
	}
	if r = run("image", "list", "-o", "wide"); !strings.Contains(r.out, "SIGNED BY") || !strings.Contains(r.out, "v1.34.4") {
		t.Fatalf("image list -o wide: %s", r.out)
	}
	r = run("image", "describe", "2026.11.0")
	for _, want := range []string{"Version:", "2026.11.0", "Channels:", "stable", "kernel", "sha256:", "Signed by:", "not trusted now", "Used by:    1 Revision", "srv-1-1"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("describe lacks %q:\n%s%s", want, r.out, r.err)
		}
	}
	if r = run("image", "describe", "v2026-12-0"); r.code != 0 || !strings.Contains(r.out, "beta") || !strings.Contains(r.out, ", trusted (beta team)") {
		t.Fatalf("describe by name: %d\n%s%s", r.code, r.out, r.err)
	}

	// delete: refused while the Revision uses it.
	r = run("image", "delete", "2026.11.0")
	if r.code != ExitFailed || !strings.Contains(r.err, "1 Revision (srv-1-1)") {
		t.Fatalf("delete of a release in use: %d\n%s%s", r.code, r.out, r.err)
	}
	if r = run("image", "delete", "2026.12.0", "1999.1.0"); r.code != ExitFailed || r.out != "imagerelease/v2026-12-0 deleted\n" {
		t.Fatalf("delete: %d %q %s", r.code, r.out, r.err)
	}
	if !strings.Contains(r.err, `no image release "1999.1.0" ('roostctl image list' lists the versions)`) {
		t.Errorf("delete of an unknown version: %s", r.err)
	}
	if r = run("image", "describe", "9.9.9"); r.code != ExitFailed || !strings.Contains(r.err, `no image release "9.9.9"`) {
		t.Errorf("describe of an unknown version: %d %s", r.code, r.err)
	}
	if r = run("image", "delete", "1999.1.0", "--ignore-not-found"); r.code != 0 {
		t.Fatalf("delete --ignore-not-found: %d %s", r.code, r.err)
	}

	// trust remove: by prefix; unknown is exit 1, malformed exit 2.
	if r = run("image", "trust", "remove", key.ID[:8]); r.code != 0 || r.out != "release key "+key.ID[:16]+" no longer trusted\n" {
		t.Fatalf("trust remove: %d %s %s", r.code, r.out, r.err)
	}
	if keys := run("image", "trust", "list", "-o", "json"); (keys.out == "[]\n") != strings.Contains(r.err, "Warning: no release key is trusted now") {
		t.Errorf("trust remove: warning %q with keys %s", r.err, keys.out)
	}
	if r = run("image", "trust", "remove", key.ID[:8]); r.code != ExitFailed {
		t.Fatalf("trust remove again: %d %s", r.code, r.err)
	}
	if r = run("image", "trust", "remove", "zz"); r.code != ExitUsage {
		t.Fatalf("trust remove zz: %d %s", r.code, r.err)
	}
	if r = run("image", "trust", "remove"); r.code != ExitUsage {
		t.Fatalf("trust remove without ID: %d %s", r.code, r.err)
	}
}

// putRevision records Server srv-1 and its Revision 1, which boots
// v2026-11-0, through Raft.
func putRevision(t *testing.T, apply func(context.Context, []byte) (any, uint64, error)) {
	t.Helper()
	objs := []*roostv1.Object{
		resource.Wrap(&roostv1.Server{Metadata: &roostv1.ObjectMeta{Name: "srv-1"}, Spec: &roostv1.ServerSpec{SystemUuid: "4c4c4544-0000-1000-8000-000000000001"}}),
		resource.Wrap(&roostv1.Revision{Metadata: &roostv1.ObjectMeta{Name: "srv-1-1"}, Spec: &roostv1.RevisionSpec{Server: "srv-1", Number: 1,
			Machine: "m", ImageRelease: "v2026-11-0", ImageVersion: "2026.11.0"}}),
	}
	cmd := &roostv1.Command{Time: timestamppb.Now(), Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{
		Objects: objs, Uids: []string{"00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"}}}}
	data, err := proto.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := apply(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := res.(*state.ApplyResult); !ok || r.Err != nil {
		t.Fatalf("ApplyObjects: %#v", res)
	}
}
