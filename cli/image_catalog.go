package cli

import (
	"context"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// What the image catalog verbs share: the releases and which pools and
// Revisions use them, lookups by name, table cells. Each verb group has
// its own file: image_trust.go, image_list.go, image_describe.go,
// image_promote.go, image_delete.go.

// releaseUsage counts the Revisions that boot each release (by name, or
// by version for Revisions that name none) and holds the Pools and the
// releases, to tell which release each Pool targets.
type releaseUsage struct {
	revisions map[string][]string // release name → Revision names
	pools     []*roostv1.Pool
	releases  []*roostv1.ImageRelease
}

// releasesOf returns the ImageReleases among objs.
func releasesOf(objs []*roostv1.Object) []*roostv1.ImageRelease {
	var rels []*roostv1.ImageRelease
	for _, o := range objs {
		if r := o.GetImageRelease(); r != nil {
			rels = append(rels, r)
		}
	}
	return rels
}

// newestRelease is the release a Pool that follows channel targets — or,
// with channel "", a Pool that names neither a channel nor a version: the
// newest (highest create index) on the channel, or of all, promoted or
// not. It is the hub's rule (hub/revisions.PickRelease); nil when there is
// none.
func newestRelease(rels []*roostv1.ImageRelease, channel string) *roostv1.ImageRelease {
	var newest *roostv1.ImageRelease
	for _, r := range rels {
		if channel != "" && !slices.Contains(r.GetSpec().GetChannels(), channel) {
			continue
		}
		if newest == nil || r.GetMetadata().GetCreateIndex() > newest.GetMetadata().GetCreateIndex() {
			newest = r
		}
	}
	return newest
}

// poolTarget says how Pool p targets release r now ("pinned", "follows
// stable", …), or "" when p's current target is another release (rels
// are all the releases).
func poolTarget(p *roostv1.Pool, r *roostv1.ImageRelease, rels []*roostv1.ImageRelease) string {
	s := p.GetSpec()
	switch {
	case s.GetImageVersion() != "":
		if s.GetImageVersion() == r.GetSpec().GetVersion() {
			return "pinned"
		}
	case s.GetImageChannel() != "":
		if newestRelease(rels, s.GetImageChannel()).GetMetadata().GetName() == r.GetMetadata().GetName() {
			return "follows " + s.GetImageChannel()
		}
	default:
		if newestRelease(rels, "").GetMetadata().GetName() == r.GetMetadata().GetName() {
			return "no channel or version: the newest release"
		}
	}
	return ""
}

func (u releaseUsage) revisionsOf(ir *roostv1.ImageRelease) []string {
	return u.revisions[ir.GetMetadata().GetName()]
}

// usage reads Revisions and Pools and indexes them by release.
func (o *options) usage(ctx context.Context, conn *hubConn, rels []*roostv1.Object, stale bool) (releaseUsage, error) {
	u := releaseUsage{revisions: map[string][]string{}, releases: releasesOf(rels)}
	byVersion := map[string]string{}
	for _, r := range rels {
		byVersion[r.GetImageRelease().GetSpec().GetVersion()] = r.GetImageRelease().GetMetadata().GetName()
	}
	revs, err := conn.hub.List(ctx, &roostv1.ListRequest{Kind: "Revision", Consistency: consistency(stale)})
	if err != nil {
		return u, o.wrapCallError(err)
	}
	for _, ob := range revs.GetObjects() {
		s := ob.GetRevision().GetSpec()
		name := s.GetImageRelease()
		if name == "" {
			name = byVersion[s.GetImageVersion()]
		}
		u.revisions[name] = append(u.revisions[name], ob.GetRevision().GetMetadata().GetName())
	}
	pools, err := conn.hub.List(ctx, &roostv1.ListRequest{Kind: "Pool", Consistency: consistency(stale)})
	if err != nil {
		return u, o.wrapCallError(err)
	}
	for _, ob := range pools.GetObjects() {
		if p := ob.GetPool(); p != nil {
			u.pools = append(u.pools, p)
		}
	}
	return u, nil
}

// getRelease reads the ImageRelease of a version (or named so).
func (o *options) getRelease(ctx context.Context, conn *hubConn, arg string, stale bool) (*roostv1.ImageRelease, error) {
	resp, err := conn.hub.Get(ctx, &roostv1.GetRequest{Kind: "ImageRelease", Name: imageReleaseName(arg), Consistency: consistency(stale)})
	if statusCode(err) == codes.NotFound && strings.HasPrefix(arg, "v") && len(validation.IsDNS1123Label(arg)) == 0 {
		if r, err2 := conn.hub.Get(ctx, &roostv1.GetRequest{Kind: "ImageRelease", Name: arg, Consistency: consistency(stale)}); err2 == nil {
			resp, err = r, nil
		}
	}
	if err != nil {
		return nil, o.wrapCallError(releaseNotFound(err, arg))
	}
	return resp.GetObject().GetImageRelease(), nil
}

// releaseNotFound words a NotFound answer for the release version arg in
// the user's terms (the version given, not the object name the hub stores
// it under); other errors pass through.
func releaseNotFound(err error, arg string) error {
	if statusCode(err) != codes.NotFound {
		return err
	}
	return status.Errorf(codes.NotFound, "no image release %q ('roostctl image list' lists the versions)", arg)
}

func (o *options) age(t time.Time, known bool) string {
	if !known {
		return "<unknown>"
	}
	return duration.HumanDuration(o.now().Sub(t))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// tableCell keeps a value on one line.
func tableCell(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}
