package revisions

import (
	"fmt"
	"slices"
	"strings"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// UpgradePaths answers, for one target release, which release a Server
// running some version moves to next: releases list the versions they
// upgrade from (spec.upgradesFrom; none means any), and a jump the target
// does not list goes through intermediate releases that do. Build it with
// NewUpgradePaths; it is read only afterwards.
type UpgradePaths struct {
	target *roostv1.ImageRelease
	rels   []*roostv1.ImageRelease
	// dist is the number of supported moves from a release (by version)
	// to the target; releases that cannot reach it are missing.
	dist map[string]int
}

// upgradesFrom says whether a Server running version may move to r
// directly: it runs r already, or r lists version, or r lists nothing.
func upgradesFrom(r *roostv1.ImageRelease, version string) bool {
	from := r.GetSpec().GetUpgradesFrom()
	return len(from) == 0 || version == r.GetSpec().GetVersion() || slices.Contains(from, version)
}

// NewUpgradePaths computes the paths to target over the releases in objs
// (a breadth-first search backwards from target).
func NewUpgradePaths(objs []*roostv1.Object, target *roostv1.ImageRelease) *UpgradePaths {
	p := &UpgradePaths{target: target, dist: map[string]int{target.GetSpec().GetVersion(): 0}}
	for _, o := range objs {
		if r := o.GetImageRelease(); r != nil {
			p.rels = append(p.rels, r)
		}
	}
	queue := []*roostv1.ImageRelease{target}
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		d := p.dist[r.GetSpec().GetVersion()]
		for _, q := range p.rels {
			v := q.GetSpec().GetVersion()
			if _, seen := p.dist[v]; seen || !upgradesFrom(r, v) {
				continue
			}
			p.dist[v] = d + 1
			queue = append(queue, q)
		}
	}
	return p
}

// Next returns the release Servers running the versions in from (""
// entries, Servers that run no known release yet, are skipped) move to
// next: the target when it upgrades from each of them; else the release
// nearest the target (fewest moves left, then the newest) that upgrades
// from each of them and leads to the target. note says why it is not the
// target ("" when it is). When no release fits, Next returns nil and note
// says which jump is unsupported: the Servers stay where they are.
func (p *UpgradePaths) Next(from []string) (*roostv1.ImageRelease, string) {
	ok := func(r *roostv1.ImageRelease) bool {
		for _, v := range from {
			if v != "" && !upgradesFrom(r, v) {
				return false
			}
		}
		return true
	}
	if ok(p.target) {
		return p.target, ""
	}
	var best *roostv1.ImageRelease
	bestDist := 0
	for _, r := range p.rels {
		d, reach := p.dist[r.GetSpec().GetVersion()]
		if !reach || r == p.target || !ok(r) {
			continue
		}
		if best == nil || d < bestDist || d == bestDist && r.GetMetadata().GetCreateIndex() > best.GetMetadata().GetCreateIndex() {
			best, bestDist = r, d
		}
	}
	tv := p.target.GetSpec().GetVersion()
	var unsupported []string
	for _, v := range from {
		if v != "" && !upgradesFrom(p.target, v) && !slices.Contains(unsupported, v) {
			unsupported = append(unsupported, v)
		}
	}
	slices.Sort(unsupported)
	if best == nil {
		return nil, fmt.Sprintf("no supported upgrade path from %s to %s (%s upgrades only from %s, and no release leads there): publish an intermediate release",
			strings.Join(unsupported, ", "), tv, tv, strings.Join(p.target.GetSpec().GetUpgradesFrom(), ", "))
	}
	return best, fmt.Sprintf("through %s: %s upgrades only from %s, not from %s", best.GetSpec().GetVersion(), tv,
		strings.Join(p.target.GetSpec().GetUpgradesFrom(), ", "), strings.Join(unsupported, ", "))
}
