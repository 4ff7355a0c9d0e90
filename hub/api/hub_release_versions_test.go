package api_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/imagebuilder/release"
)

// TestPutImageReleaseVersions: the hub refuses a version that breaks the
// version rule (InvalidArgument on release.spec.version, before any
// artifact is looked at), and names both versions when two map to the
// same ImageRelease name.
func TestPutImageReleaseVersions(t *testing.T) {
	h := startMember(t, "hub-a", "", "")
	eventually(t, "admin.conf", func() bool { _, err := client.LoadConfig(h.AdminConfigPath()); return err == nil })
	cfg, err := client.LoadConfig(h.AdminConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := client.Dial(context.Background(), cfg, []string{h.APIAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	for _, v := range []string{"bad version", "a/b", "2026..1", "V2026.11.0"} {
		_, _, err := putRelease(conn, newRelease(t, v, nil))
		e := apierror.FromError(err)
		if e.Code != codes.InvalidArgument {
			t.Errorf("version %q: %v, want InvalidArgument", v, err)
			continue
		}
		found := false
		for _, vi := range e.Violations {
			found = found || vi.Field == "release.spec.version" && strings.Contains(vi.Message, release.VersionRule)
		}
		if !found {
			t.Errorf("version %q: violations %v, want release.spec.version with the rule", v, e.Violations)
		}
	}

	r1 := newRelease(t, "2026.11.0", nil)
	push(t, conn, r1.kernel)
	push(t, conn, r1.initrd)
	if _, _, err := putRelease(conn, r1); err != nil {
		t.Fatal(err)
	}
	r2 := newRelease(t, "2026-11-0", nil)
	push(t, conn, r2.kernel)
	push(t, conn, r2.initrd)
	_, _, err = putRelease(conn, r2)
	if apierror.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "versions 2026.11.0 and 2026-11-0 map to the same ImageRelease name v2026-11-0") {
		t.Fatalf("same name: %v", err)
	}
	// The same version with another manifest (another key: the same
	// artifacts, already stored) keeps its own message.
	r3 := newRelease(t, "2026.11.0", nil)
	if _, _, err = putRelease(conn, r3); apierror.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "releases are immutable") {
		t.Fatalf("same version, other manifest: %v", err)
	}
}
