package state

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

func imageObj(name, version string, channels ...string) *roostv1.Object {
	return resource.Wrap(&roostv1.ImageRelease{Metadata: meta(name, nil), Spec: &roostv1.ImageReleaseSpec{
		Version: version, Channels: channels, Kernel: &roostv1.Artifact{Sha256: strings.Repeat("a", 64), Size: 10}}})
}

func serverObj(name string) *roostv1.Object {
	return resource.Wrap(&roostv1.Server{Metadata: meta(name, nil), Spec: &roostv1.ServerSpec{SystemUuid: "4c4c4544-0000-1000-8000-" + fmt.Sprintf("%012d", len(name))}})
}

// revisionObj is Revision n of server; image names the release (empty:
// only version is set).
func revisionObj(server string, n int64, image, version string) *roostv1.Object {
	return resource.Wrap(&roostv1.Revision{Metadata: meta(RevisionName(server, n), nil), Spec: &roostv1.RevisionSpec{
		Server: server, Number: n, Machine: "m-" + server, ImageRelease: image, ImageVersion: version}})
}

func promoteCmd(version, channel string, remove bool) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_PromoteImageRelease{PromoteImageRelease: &roostv1.PromoteImageRelease{
		Version: version, Channel: channel, Remove: remove}}}
}

func channelsOf(t *testing.T, f *FSM, name string) []string {
	t.Helper()
	o, err := f.Get("ImageRelease", name)
	if err != nil {
		t.Fatal(err)
	}
	return o.GetImageRelease().GetSpec().GetChannels()
}

func TestPromoteImageRelease(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(imageObj("v2026-11-0", "2026.11.0", "beta")))
	before, _ := h.f.Get("ImageRelease", "v2026-11-0")

	res := h.mustApply(promoteCmd("2026.11.0", "stable", false))
	if got := actions(res); !slices.Equal(got, []string{"ImageRelease/v2026-11-0=configured"}) {
		t.Fatalf("promote: %v", got)
	}
	if got := channelsOf(t, h.f, "v2026-11-0"); !slices.Equal(got, []string{"beta", "stable"}) {
		t.Fatalf("channels = %v", got)
	}
	after, _ := h.f.Get("ImageRelease", "v2026-11-0")
	am, bm := after.GetImageRelease().GetMetadata(), before.GetImageRelease().GetMetadata()
	if am.GetModifyIndex() != res.Index || am.GetGeneration() != bm.GetGeneration()+1 || am.GetUid() != bm.GetUid() {
		t.Errorf("metadata after promote: %v (before %v)", am, bm)
	}
	// Everything but the channels stays.
	as, bs := after.GetImageRelease().GetSpec(), before.GetImageRelease().GetSpec()
	if as.GetVersion() != bs.GetVersion() || as.GetKernel().GetSha256() != bs.GetKernel().GetSha256() {
		t.Errorf("spec changed: %v", as)
	}

	// Idempotent both ways; the name works as well as the version.
	if got := actions(h.mustApply(promoteCmd("v2026-11-0", "stable", false))); !slices.Equal(got, []string{"ImageRelease/v2026-11-0=unchanged"}) {
		t.Errorf("promote again: %v", got)
	}
	h.mustApply(promoteCmd("2026.11.0", "beta", true))
	if got := channelsOf(t, h.f, "v2026-11-0"); !slices.Equal(got, []string{"stable"}) {
		t.Fatalf("after removing beta: %v", got)
	}
	if got := actions(h.mustApply(promoteCmd("2026.11.0", "beta", true))); !slices.Equal(got, []string{"ImageRelease/v2026-11-0=unchanged"}) {
		t.Errorf("remove again: %v", got)
	}

	wantCode(t, h.apply(promoteCmd("2027.1.0", "stable", false)).Err, codes.NotFound)
	e := wantCode(t, h.apply(promoteCmd("2026.11.0", "Stable_1", false)).Err, codes.InvalidArgument)
	if len(e.Violations) != 1 || e.Violations[0].Field != "channel" || !strings.Contains(e.Violations[0].Message, "Stable_1") {
		t.Errorf("bad channel: %v", e.Violations)
	}
	e = wantCode(t, h.apply(promoteCmd("", "", false)).Err, codes.InvalidArgument)
	if len(e.Violations) != 2 {
		t.Errorf("empty promotion: %v", e.Violations)
	}
}

func TestDeleteImageReleaseInUse(t *testing.T) {
	h := newHarness(t, Options{})
	objs := []*roostv1.Object{imageObj("v2026-11-0", "2026.11.0", "stable"), imageObj("v2026-12-0", "2026.12.0")}
	for _, s := range []string{"srv-a", "srv-b", "srv-c", "srv-d"} {
		objs = append(objs, serverObj(s))
	}
	h.mustApply(h.objects(objs...))
	// srv-a..c boot 2026.11.0 by name, srv-d by version only.
	h.mustApply(h.objects(revisionObj("srv-a", 1, "v2026-11-0", "2026.11.0"), revisionObj("srv-b", 1, "v2026-11-0", "2026.11.0"),
		revisionObj("srv-c", 1, "v2026-11-0", ""), revisionObj("srv-d", 1, "", "2026.11.0")))

	e := wantCode(t, h.apply(deleteCmd("ImageRelease", "v2026-11-0")).Err, codes.FailedPrecondition)
	for _, want := range []string{"ImageRelease v2026-11-0 (version 2026.11.0)", "4 Revisions (srv-a-1, srv-b-1, srv-c-1 and 1 more)", "boot history"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("refusal %q lacks %q", e.Message, want)
		}
	}
	u, err := h.f.ImageReleaseUsage("2026.11.0")
	if err != nil || len(u.Revisions) != 4 || len(u.Pools) != 0 {
		t.Fatalf("ImageReleaseUsage = %+v, %v", u, err)
	}

	// A Pool pinning 2026.12.0 keeps it too.
	h.mustApply(h.objects(clusterObj("prod", nil), machineClassObj("standard"),
		poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.ImageChannel, s.ImageVersion = "", "2026.12.0" })))
	e = wantCode(t, h.apply(deleteCmd("imagerelease", "v2026-12-0")).Err, codes.FailedPrecondition)
	if !strings.Contains(e.Message, "1 Pool pinning its version (workers)") {
		t.Errorf("pinned: %q", e.Message)
	}
	h.mustApply(h.objects(poolObj("workers", "prod")))
	h.mustApply(deleteCmd("ImageRelease", "v2026-12-0"))
	if _, err := h.f.Get("ImageRelease", "v2026-12-0"); err == nil {
		t.Fatal("v2026-12-0 still stored")
	}
	wantCode(t, h.apply(deleteCmd("ImageRelease", "v2026-12-0")).Err, codes.NotFound)
	if _, err := h.f.ImageReleaseUsage("2026.12.0"); err == nil {
		t.Error("ImageReleaseUsage of a deleted release")
	}

	// Once no Revision uses it any more, it goes.
	for _, s := range []string{"srv-a", "srv-b", "srv-c", "srv-d"} {
		h.mustApply(deleteCmd("Revision", RevisionName(s, 1)))
	}
	h.mustApply(deleteCmd("ImageRelease", "v2026-11-0"))
}

// TestImageReleasePutRules: under RulesImageReleases an ImageRelease put
// again keeps its stored channels and must be the same release; under
// older rules the put is stored as it is, so replayed logs store what they
// stored before.
func TestImageReleasePutRules(t *testing.T) {
	for _, rules := range []uint32{RulesImageReleases - 1, RulesImageReleases} {
		h := newHarness(t, Options{})
		at := func(cmd *roostv1.Command) *roostv1.Command { cmd.RulesVersion = rules; return cmd }
		h.mustApply(at(h.objects(imageObj("v2026-11-0", "2026.11.0", "beta"))))
		h.mustApply(at(promoteCmd("2026.11.0", "stable", false)))

		// The same release again, with the channels read before the promotion.
		res := h.mustApply(at(h.objects(imageObj("v2026-11-0", "2026.11.0", "beta"))))
		want, wantAction := []string{"beta"}, "ImageRelease/v2026-11-0=configured"
		if rules >= RulesImageReleases {
			want, wantAction = []string{"beta", "stable"}, "ImageRelease/v2026-11-0=unchanged"
		}
		if got := channelsOf(t, h.f, "v2026-11-0"); !slices.Equal(got, want) {
			t.Errorf("rules %d: channels after a put of the same release = %v, want %v", rules, got, want)
		}
		if got := actions(res); !slices.Equal(got, []string{wantAction}) {
			t.Errorf("rules %d: put again: %v, want %s", rules, got, wantAction)
		}

		// Another kernel under the same version; another version under the same name.
		other := imageObj("v2026-11-0", "2026.11.0")
		other.GetImageRelease().Spec.Kernel.Sha256 = strings.Repeat("b", 64)
		collide := imageObj("v2026-11-0", "2026-11-0")
		for _, tc := range []struct {
			name string
			obj  *roostv1.Object
			msg  string
		}{
			{"another kernel", other, "releases are immutable"},
			{"another version", collide, "map to the same ImageRelease name"},
		} {
			res := h.apply(at(h.objects(tc.obj)))
			if rules < RulesImageReleases {
				if res.Err != nil {
					t.Errorf("rules %d, %s: %v, want it stored (the API checked it under these rules)", rules, tc.name, res.Err)
				}
				continue
			}
			wantCode(t, res.Err, codes.FailedPrecondition)
			if res.Err == nil || !strings.Contains(res.Err.Error(), tc.msg) {
				t.Errorf("rules %d, %s: %v, want a message with %q", rules, tc.name, res.Err, tc.msg)
			}
		}
	}
}
