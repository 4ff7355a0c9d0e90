package state

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/go-memdb"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/internal/english"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// The image catalog: ImageReleases are immutable once recorded, except for
// their channels (PromoteImageRelease), labels and annotations; one in use
// cannot be deleted. Under apply rules RulesImageReleases the FSM enforces
// it (putImageReleaseOver); before, the leader's API did.

const kindImageRelease = "ImageRelease"

// maxNamedUsers is how many users a refused delete names.
const maxNamedUsers = 3

// findImageRelease returns the stored ImageRelease whose spec.version is
// version, else the one named version, else nil.
func findImageRelease(txn *memdb.Txn, version string) (*roostv1.ImageRelease, error) {
	it, err := txn.Get(kindImageRelease, indexID)
	if err != nil {
		return nil, err
	}
	var byName *roostv1.ImageRelease
	for raw := it.Next(); raw != nil; raw = it.Next() {
		ir := raw.(*roostv1.Object).GetImageRelease()
		if ir.GetSpec().GetVersion() == version {
			return ir, nil
		}
		if ir.GetMetadata().GetName() == version {
			byName = ir
		}
	}
	return byName, nil
}

// CheckImageReleasePut checks that in, an ImageRelease put over the
// stored old of the same name, is the same release: the same version, and
// everything else of its spec but the channels equal (manifest, signature,
// artifacts, components). Errors: FailedPrecondition (two versions that
// map to the same name; another release under a recorded version). The
// FSM checks it under RulesImageReleases; the leader's API checks it
// before proposing while a member implements older rules.
func CheckImageReleasePut(in, old *roostv1.ImageRelease) *apierror.Error {
	name, oldSpec, inSpec := old.GetMetadata().GetName(), old.GetSpec(), in.GetSpec()
	if oldSpec.GetVersion() != inSpec.GetVersion() {
		return apierror.FailedPrecondition("versions %s and %s map to the same ImageRelease name %s, and %s is recorded under it: "+
			"give the new release a version that differs in more than its separators (. + _ -)",
			oldSpec.GetVersion(), inSpec.GetVersion(), name, oldSpec.GetVersion())
	}
	a, b := proto.Clone(oldSpec).(*roostv1.ImageReleaseSpec), proto.Clone(inSpec).(*roostv1.ImageReleaseSpec)
	if a == nil {
		a = &roostv1.ImageReleaseSpec{}
	}
	if b == nil {
		b = &roostv1.ImageReleaseSpec{}
	}
	a.Channels, b.Channels = nil, nil
	if !proto.Equal(a, b) {
		return apierror.FailedPrecondition("ImageRelease %s (version %s) exists with another manifest, signature or artifacts; releases are immutable: make a new version (roost-image release)",
			name, oldSpec.GetVersion())
	}
	return nil
}

// putImageReleaseOver returns the ImageRelease to store when in is put
// over old (nil for a create). Under RulesImageReleases, in must be the
// release old is (CheckImageReleasePut) and the result carries old's
// channels whatever in lists: channels change only through
// PromoteImageRelease, so a push of a recorded release never undoes a
// promotion, however it interleaves with it. Labels and annotations are
// in's. Under older rules in is stored as it is. in is copied, never
// changed.
func (a *applier) putImageReleaseOver(in, old *roostv1.ImageRelease) (*roostv1.ImageRelease, *apierror.Error) {
	if old == nil || a.rules < RulesImageReleases {
		return in, nil
	}
	if aerr := CheckImageReleasePut(in, old); aerr != nil {
		return nil, aerr
	}
	if slices.Equal(in.GetSpec().GetChannels(), old.GetSpec().GetChannels()) {
		return in, nil
	}
	out := proto.Clone(in).(*roostv1.ImageRelease)
	if out.Spec == nil {
		out.Spec = &roostv1.ImageReleaseSpec{}
	}
	out.Spec.Channels = slices.Clone(old.GetSpec().GetChannels())
	return out, nil
}

// ValidateChannel checks a channel name (a DNS label, e.g. "stable");
// field is the violation's field path.
func ValidateChannel(field, channel string) []apierror.Violation {
	if channel == "" {
		return []apierror.Violation{{Field: field, Message: "is required", Hint: `name a channel, e.g. "stable"`}}
	}
	if msgs := validation.IsDNS1123Label(channel); len(msgs) > 0 {
		return []apierror.Violation{{Field: field, Message: fmt.Sprintf("invalid channel %q: %s", channel, strings.Join(msgs, "; ")),
			Hint: `use a DNS label such as "stable" or "beta"`}}
	}
	return nil
}

// promoteImageRelease adds c.channel to the channels of the release of
// c.version (appended; Pools following the channel take its newest
// release), or removes it with c.remove. Promoting to a channel the
// release is on, or removing one it is not on, changes nothing (result
// "unchanged"). Errors: InvalidArgument (no version, bad channel),
// NotFound (no such release).
func (a *applier) promoteImageRelease(c *roostv1.PromoteImageRelease) ([]*roostv1.ApplyResult, *apierror.Error) {
	var vs []apierror.Violation
	if c.GetVersion() == "" {
		vs = append(vs, apierror.Violation{Field: "version", Message: "is required", Hint: `give the release's version, e.g. "2026.11.0"`})
	}
	vs = append(vs, ValidateChannel("channel", c.GetChannel())...)
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid promotion", vs...)
	}
	old, err := findImageRelease(a.txn, c.GetVersion())
	if err != nil {
		return nil, internal(err)
	}
	if old == nil {
		return nil, apierror.NotFound(kindImageRelease, c.GetVersion())
	}
	name := old.GetMetadata().GetName()
	channels := old.GetSpec().GetChannels()
	has := slices.Contains(channels, c.GetChannel())
	if has != c.GetRemove() {
		return []*roostv1.ApplyResult{{Kind: kindImageRelease, Name: name, Action: ActionUnchanged}}, nil
	}
	ir := proto.Clone(old).(*roostv1.ImageRelease)
	if ir.Spec == nil {
		ir.Spec = &roostv1.ImageReleaseSpec{}
	}
	if c.GetRemove() {
		ir.Spec.Channels = slices.DeleteFunc(slices.Clone(channels), func(ch string) bool { return ch == c.GetChannel() })
	} else {
		ir.Spec.Channels = append(slices.Clone(channels), c.GetChannel())
	}
	a.syncChannelMemberships(ir, "")
	a.touch(ir.Metadata, true)
	if aerr := a.put(ir, false); aerr != nil {
		return nil, aerr
	}
	return []*roostv1.ApplyResult{{Kind: kindImageRelease, Name: name, Action: ActionConfigured}}, nil
}

// ImageReleaseUsage is what keeps an ImageRelease from being deleted.
type ImageReleaseUsage struct {
	// Revisions are the names of the Revisions that boot the release
	// (spec.imageRelease names it, or spec.imageVersion is its version),
	// sorted.
	Revisions []string
	// Pools are the Pools that pin its version (spec.imageVersion), sorted.
	Pools []string
}

// imageReleaseUsage finds the users of ir in txn.
func imageReleaseUsage(txn *memdb.Txn, ir *roostv1.ImageRelease) (ImageReleaseUsage, error) {
	var u ImageReleaseUsage
	name, version := ir.GetMetadata().GetName(), ir.GetSpec().GetVersion()
	it, err := txn.Get(kindRevision, indexID)
	if err != nil {
		return u, err
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		r := raw.(*roostv1.Object).GetRevision()
		if s := r.GetSpec(); s.GetImageRelease() == name || (version != "" && s.GetImageVersion() == version) {
			u.Revisions = append(u.Revisions, r.GetMetadata().GetName())
		}
	}
	it, err = txn.Get(kindPool, indexID)
	if err != nil {
		return u, err
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		p := raw.(*roostv1.Object).GetPool()
		if version != "" && p.GetSpec().GetImageVersion() == version {
			u.Pools = append(u.Pools, p.GetMetadata().GetName())
		}
	}
	sort.Strings(u.Revisions)
	sort.Strings(u.Pools)
	return u, nil
}

// ImageReleaseUsage returns the Revisions and Pools that use the
// ImageRelease of version (or name); NotFound when there is none.
func (f *FSM) ImageReleaseUsage(version string) (ImageReleaseUsage, error) {
	txn := f.db.Load().Txn(false)
	ir, err := findImageRelease(txn, version)
	if err != nil {
		return ImageReleaseUsage{}, internal(err)
	}
	if ir == nil {
		return ImageReleaseUsage{}, apierror.NotFound(kindImageRelease, version)
	}
	u, err := imageReleaseUsage(txn, ir)
	if err != nil {
		return u, internal(err)
	}
	return u, nil
}

// deleteObjectChecked is deleteObject with the catalogs' rules: an
// ImageRelease is not deleted while a Revision boots it or a Pool pins
// its version (FailedPrecondition naming a few of them), an Extension
// while a MachineClass resolves to it (checkExtensionDelete). Other kinds
// go straight to deleteObject.
func (a *applier) deleteObjectChecked(c *roostv1.DeleteObject) ([]*roostv1.ApplyResult, *apierror.Error) {
	if k, err := resource.Lookup(c.GetKind()); err == nil && k.Name == kindExtension {
		if aerr := a.checkExtensionDelete(c.GetName()); aerr != nil {
			return nil, aerr
		}
	}
	if k, err := resource.Lookup(c.GetKind()); err == nil && k.Name == kindImageRelease && c.GetName() != "" {
		raw, err := a.txn.First(kindImageRelease, indexID, c.GetName())
		if err != nil {
			return nil, internal(err)
		}
		if raw != nil {
			ir := raw.(*roostv1.Object).GetImageRelease()
			u, err := imageReleaseUsage(a.txn, ir)
			if err != nil {
				return nil, internal(err)
			}
			if aerr := inUseError(ir, u); aerr != nil {
				return nil, aerr
			}
		}
	}
	return a.deleteObject(c)
}

// inUseError is the FailedPrecondition of deleting ir while u uses it, or
// nil when nothing does.
func inUseError(ir *roostv1.ImageRelease, u ImageReleaseUsage) *apierror.Error {
	var parts []string
	if n := len(u.Revisions); n > 0 {
		parts = append(parts, fmt.Sprintf("%s (%s)", english.Count(n, "Revision", "Revisions"), fewNames(u.Revisions)))
	}
	if n := len(u.Pools); n > 0 {
		parts = append(parts, fmt.Sprintf("%s pinning its version (%s)", english.Count(n, "Pool", "Pools"), fewNames(u.Pools)))
	}
	if len(parts) == 0 {
		return nil
	}
	var hints []string
	if len(u.Pools) > 0 {
		hints = append(hints, "pin the Pools to another version or let them follow a channel")
	}
	if len(u.Revisions) > 0 {
		hints = append(hints, fmt.Sprintf("move the Servers to another release; Revisions stay as boot history until newer ones replace them (the last %d per Server are kept, and always the booted one)", MaxRevisionHistory))
	}
	return apierror.FailedPrecondition("ImageRelease %s (version %s) is in use by %s: %s",
		ir.GetMetadata().GetName(), ir.GetSpec().GetVersion(), strings.Join(parts, " and "), strings.Join(hints, "; "))
}

// fewNames joins the first maxNamedUsers names and counts the rest.
func fewNames(names []string) string {
	if len(names) <= maxNamedUsers {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxNamedUsers], ", "), len(names)-maxNamedUsers)
}
