package state

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
)

// ReleaseFeeds (apply rules 14): the leader's feed controller records a
// feed's status (UpdateReleaseFeedStatus) and each release it verified
// and stored (ImportImageRelease). The FSM checks the signature again
// against the keys trusted when the entry applies, so a key removed
// between the controller's check and the commit refuses the import.

const kindReleaseFeed = "ReleaseFeed"

// States and reasons of a FeedRelease, and the ReleaseFeed conditions.
const (
	FeedImported     = "Imported"
	FeedImportFailed = "ImportFailed"
	FeedReady        = "Ready"
	FeedFetchFailed  = "FetchFailed"
)

// getReleaseFeed returns the stored ReleaseFeed name, or nil.
func (a *applier) getReleaseFeed(name string) (*roostv1.ReleaseFeed, *apierror.Error) {
	raw, err := a.txn.First(kindReleaseFeed, indexID, name)
	if err != nil {
		return nil, internal(err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*roostv1.Object).GetReleaseFeed(), nil
}

// updateReleaseFeedStatus replaces feed's status. Errors: NotFound.
func (a *applier) updateReleaseFeedStatus(c *roostv1.UpdateReleaseFeedStatus) *apierror.Error {
	if a.rules < RulesReleaseFeeds {
		return a.unknownCommand()
	}
	old, aerr := a.getReleaseFeed(c.GetFeed())
	if aerr != nil {
		return aerr
	}
	if old == nil {
		return apierror.NotFound(kindReleaseFeed, c.GetFeed())
	}
	f := proto.Clone(old).(*roostv1.ReleaseFeed)
	f.Status = proto.Clone(c.GetStatus()).(*roostv1.ReleaseFeedStatus)
	if f.Status == nil {
		f.Status = &roostv1.ReleaseFeedStatus{}
	}
	if proto.Equal(f, old) {
		return nil
	}
	a.touch(f.Metadata, false)
	if aerr := a.put(f, false); aerr != nil {
		return aerr
	}
	before := FindCondition(old.GetStatus().GetConditions(), FeedFetchFailed)
	if now := FindCondition(f.Status.GetConditions(), FeedFetchFailed); now.GetStatus() == "True" && (before.GetStatus() != "True" || before.GetReason() != now.GetReason()) {
		return a.recordEvent(kindReleaseFeed, f.Metadata.GetName(), EventWarning, FeedFetchFailed, now.GetMessage(), "feeds")
	}
	return nil
}

// FeedKeys returns the trusted release keys feed's releases may be signed
// with: the keys trusted on the hub whose id starts with one of the feed's
// spec.trustedKeys, or all of them when it lists none. Errors name what is
// missing (no key trusted; a listed id that matches none).
func FeedKeys(trusted []*roostv1.TrustedKey, feed *roostv1.ReleaseFeedSpec) ([]ed25519.PublicKey, error) {
	if len(trusted) == 0 {
		return nil, errors.New("no release key is trusted: trust the feed's signing key with 'roostctl image trust add KEY.pub'")
	}
	var keys []ed25519.PublicKey
	for _, k := range trusted {
		if len(feed.GetTrustedKeys()) > 0 && !slices.ContainsFunc(feed.GetTrustedKeys(), func(id string) bool { return strings.HasPrefix(k.GetId(), id) }) {
			continue
		}
		pub, err := releasesig.ParsePublicKeyPEM([]byte(k.GetPublicKeyPem()))
		if err != nil {
			return nil, fmt.Errorf("trusted key %s: %w", k.GetId(), err)
		}
		keys = append(keys, pub)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("none of the feed's spec.trustedKeys (%s) is trusted: trust them with 'roostctl image trust add KEY.pub'",
			strings.Join(feed.GetTrustedKeys(), ", "))
	}
	return keys, nil
}

// trustedKeysIn lists the trusted keys in a's transaction.
func (a *applier) trustedKeysIn() ([]*roostv1.TrustedKey, *apierror.Error) {
	it, err := a.txn.Get(tableTrustedKeys, indexID)
	if err != nil {
		return nil, internal(err)
	}
	var out []*roostv1.TrustedKey
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*roostv1.TrustedKey))
	}
	return out, nil
}

// importImageRelease records c.release, delivered by feed c.feed, on
// c.channel: a new release is created on the channel (its UID c.uid); a
// recorded one must be the same release (CheckImageReleasePut) and joins
// the channel if it is not on it. Errors: NotFound (no such feed),
// InvalidArgument (no release, version or channel; a channel the feed
// does not allow), FailedPrecondition (not signed by a key the feed
// trusts; another release under the version).
func (a *applier) importImageRelease(c *roostv1.ImportImageRelease) ([]*roostv1.ApplyResult, *apierror.Error) {
	if a.rules < RulesReleaseFeeds {
		return nil, a.unknownCommand()
	}
	feed, aerr := a.getReleaseFeed(c.GetFeed())
	if aerr != nil {
		return nil, aerr
	}
	if feed == nil {
		return nil, apierror.NotFound(kindReleaseFeed, c.GetFeed())
	}
	in := c.GetRelease()
	var vs []apierror.Violation
	if in.GetMetadata().GetName() == "" || in.GetSpec().GetVersion() == "" {
		vs = append(vs, apierror.Violation{Field: "release", Message: "needs metadata.name and spec.version"})
	}
	vs = append(vs, ValidateChannel("channel", c.GetChannel())...)
	if allow := feed.GetSpec().GetChannels(); len(allow) > 0 && c.GetChannel() != "" && !slices.Contains(allow, c.GetChannel()) {
		vs = append(vs, apierror.Violation{Field: "channel", Message: fmt.Sprintf("channel %q is not in the feed's spec.channels (%s)", c.GetChannel(), strings.Join(allow, ", "))})
	}
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid import", vs...)
	}
	trusted, aerr := a.trustedKeysIn()
	if aerr != nil {
		return nil, aerr
	}
	keys, err := FeedKeys(trusted, feed.GetSpec())
	if err != nil {
		return nil, apierror.FailedPrecondition("release %s of feed %s: %v", in.GetSpec().GetVersion(), c.GetFeed(), err)
	}
	if _, err := releasesig.Verify(releasesig.FromImageRelease(in.GetSpec()), keys); err != nil {
		return nil, apierror.FailedPrecondition("feed %s: %v", c.GetFeed(), err)
	}
	if err := releasesig.CheckSignedFields(in.GetSpec()); err != nil {
		return nil, apierror.FailedPrecondition("feed %s: %v", c.GetFeed(), err)
	}
	name := in.GetMetadata().GetName()
	raw, err := a.txn.First(kindImageRelease, indexID, name)
	if err != nil {
		return nil, internal(err)
	}
	now, aerr := a.now()
	if aerr != nil {
		return nil, aerr
	}
	if raw != nil {
		old := raw.(*roostv1.Object).GetImageRelease()
		if aerr := CheckImageReleasePut(in, old); aerr != nil {
			return nil, aerr
		}
		if slices.Contains(old.GetSpec().GetChannels(), c.GetChannel()) {
			return []*roostv1.ApplyResult{{Kind: kindImageRelease, Name: name, Action: ActionUnchanged}}, nil
		}
		ir := proto.Clone(old).(*roostv1.ImageRelease)
		ir.Spec.Channels = append(ir.Spec.Channels, c.GetChannel())
		a.syncChannelMemberships(ir, "")
		a.touch(ir.Metadata, true)
		if aerr := a.put(ir, false); aerr != nil {
			return nil, aerr
		}
		return []*roostv1.ApplyResult{{Kind: kindImageRelease, Name: name, Action: ActionConfigured}},
			a.recordEvent(kindReleaseFeed, c.GetFeed(), EventNormal, FeedImported, fmt.Sprintf("release %s joined channel %s", in.GetSpec().GetVersion(), c.GetChannel()), "feeds")
	}
	if c.GetUid() == "" {
		return nil, apierror.Invalid("invalid import", apierror.Violation{Field: "uid", Message: "a new release needs a UID in the command"})
	}
	ir := &roostv1.ImageRelease{ApiVersion: "roost.io/v1", Kind: kindImageRelease, Metadata: a.newMeta(name, c.GetUid(), now),
		Spec: proto.Clone(in.GetSpec()).(*roostv1.ImageReleaseSpec)}
	ir.Metadata.Labels = in.GetMetadata().GetLabels()
	ir.Metadata.Annotations = map[string]string{"roost.io/feed": c.GetFeed()}
	ir.Spec.Channels = []string{c.GetChannel()}
	a.syncChannelMemberships(ir, "")
	if aerr := a.put(ir, true); aerr != nil {
		return nil, aerr
	}
	return []*roostv1.ApplyResult{{Kind: kindImageRelease, Name: name, Action: ActionCreated}},
		a.recordEvent(kindReleaseFeed, c.GetFeed(), EventNormal, FeedImported, fmt.Sprintf("imported release %s on channel %s", in.GetSpec().GetVersion(), c.GetChannel()), "feeds")
}
