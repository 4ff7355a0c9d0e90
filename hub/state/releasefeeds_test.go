package state

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
	"github.com/roostfleet/roost/resource"
)

// signedRelease is an ImageRelease of version signed with priv, its
// manifest listing a kernel and an initrd and upgradesFrom.
func signedRelease(t *testing.T, priv ed25519.PrivateKey, version string, upgradesFrom ...string) *roostv1.ImageRelease {
	t.Helper()
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	k, i := &roostv1.Artifact{Sha256: sum("k" + version), Size: 10}, &roostv1.Artifact{Sha256: sum("i" + version), Size: 20}
	manifest, err := json.Marshal(map[string]any{"kind": "ImageRelease", "version": version, "upgradesFrom": upgradesFrom,
		"artifacts": []map[string]any{{"name": "kernel", "sha256": k.Sha256, "size": 10}, {"name": "initrd", "sha256": i.Sha256, "size": 20}}})
	if err != nil {
		t.Fatal(err)
	}
	return &roostv1.ImageRelease{Metadata: &roostv1.ObjectMeta{Name: "v" + strings.ReplaceAll(version, ".", "-")},
		Spec: &roostv1.ImageReleaseSpec{Version: version, Kernel: k, Initrd: i, Manifest: manifest, UpgradesFrom: upgradesFrom,
			Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, manifest))}}
}

func importCmd(feed, channel string, ir *roostv1.ImageRelease, uid string) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_ImportImageRelease{ImportImageRelease: &roostv1.ImportImageRelease{
		Feed: feed, Release: ir, Channel: channel, Uid: uid}}}
}

func feedObj(name string, keys []string, channels ...string) *roostv1.Object {
	return resource.Wrap(&roostv1.ReleaseFeed{Metadata: &roostv1.ObjectMeta{Name: name},
		Spec: &roostv1.ReleaseFeedSpec{Url: "https://releases.example.com/roost", TrustedKeys: keys, Channels: channels}})
}

func TestImportImageRelease(t *testing.T) {
	h := newHarness(t, Options{})
	h.rules = RulesVersion
	pub, priv, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	key := &roostv1.TrustedKey{Id: releasesig.KeyID(pub), PublicKeyPem: string(releasesig.MarshalPublicKeyPEM(pub))}
	rel := signedRelease(t, priv, "2027.01.0")

	// No feed yet; then a feed but no trusted key.
	wantCode(t, h.apply(importCmd("upstream", "beta", rel, "u-1")).Err, codes.NotFound)
	h.mustApply(h.objects(feedObj("upstream", nil, "beta")))
	res := h.apply(importCmd("upstream", "beta", rel, "u-1"))
	wantCode(t, res.Err, codes.FailedPrecondition)
	wantMessage(t, res.Err, "no release key is trusted")
	h.mustApply(putKeyCmd(key, ""))

	// Refusals: another channel than the allow-list, another signer, a
	// manifest changed after signing, upgradesFrom not the manifest's.
	res = h.apply(importCmd("upstream", "stable", rel, "u-1"))
	wantCode(t, res.Err, codes.InvalidArgument)
	wantMessage(t, res.Err, `channel "stable" is not in the feed's spec.channels (beta)`)
	wantMessage(t, h.apply(importCmd("upstream", "beta", signedRelease(t, other, "2027.01.0"), "u-1")).Err, "not signed by a trusted key")
	tampered := proto.Clone(rel).(*roostv1.ImageRelease)
	tampered.Spec.Manifest = []byte(strings.Replace(string(tampered.Spec.Manifest), "2027.01.0", "2027.01.1", 1))
	wantMessage(t, h.apply(importCmd("upstream", "beta", tampered, "u-1")).Err, "not signed by a trusted key")
	widened := proto.Clone(rel).(*roostv1.ImageRelease)
	widened.Spec.UpgradesFrom = []string{"2026.01.0"}
	wantMessage(t, h.apply(importCmd("upstream", "beta", widened, "u-1")).Err, "differs from its signed manifest")
	// A feed restricted to another key refuses it too.
	h.mustApply(h.objects(feedObj("pinned", []string{strings.Repeat("0", 16)})))
	wantMessage(t, h.apply(importCmd("pinned", "beta", rel, "u-1")).Err, "none of the feed's spec.trustedKeys")
	if _, err := h.f.Get("ImageRelease", "v2027-01-0"); err == nil {
		t.Fatal("a refused import stored the release")
	}

	// Imported: created on the channel, with when it joined.
	res = h.mustApply(importCmd("upstream", "beta", rel, "u-1"))
	if got := actions(res); len(got) != 1 || got[0] != "ImageRelease/v2027-01-0=created" {
		t.Fatalf("results %v", got)
	}
	o, _ := h.f.Get("ImageRelease", "v2027-01-0")
	ir := o.GetImageRelease()
	if strings.Join(ir.GetSpec().GetChannels(), ",") != "beta" || len(ir.GetStatus().GetChannels()) != 1 ||
		!ir.GetStatus().GetChannels()[0].GetSince().AsTime().Equal(timeAt(res.Index)) || ir.GetMetadata().GetUid() != "u-1" {
		t.Fatalf("imported %v", ir)
	}
	// Again: unchanged. On another allowed channel of another feed: joins it.
	if got := actions(h.mustApply(importCmd("upstream", "beta", rel, "u-2"))); got[0] != "ImageRelease/v2027-01-0=unchanged" {
		t.Errorf("second import %v", got)
	}
	h.mustApply(h.objects(feedObj("mirror", []string{key.GetId()[:16]})))
	h.mustApply(importCmd("mirror", "stable", rel, "u-3"))
	o, _ = h.f.Get("ImageRelease", "v2027-01-0")
	if got := o.GetImageRelease(); strings.Join(got.GetSpec().GetChannels(), ",") != "beta,stable" || len(got.GetStatus().GetChannels()) != 2 {
		t.Errorf("after the second feed %v", got)
	}
	var imported int
	for _, e := range h.f.Reader().List("Event") {
		if e.GetEvent().GetSpec().GetReason() == FeedImported {
			imported++
		}
	}
	if imported != 2 {
		t.Errorf("%d Imported Events, want 2", imported)
	}

	// Under the previous rules the command and the kinds are unknown.
	wantCode(t, h.apply(withRules(RulesReleaseFeeds-1, importCmd("upstream", "beta", rel, "u-1"))).Err, codes.InvalidArgument)
	res = h.apply(withRules(RulesReleaseFeeds-1, h.objects(feedObj("old", nil))))
	wantMessage(t, res.Err, "does not know the kind ReleaseFeed yet")

	// A snapshot keeps the feeds and the memberships.
	g := restoreNew(t, snapshotBytes(t, h.f))
	if o, err := g.Get("ImageRelease", "v2027-01-0"); err != nil || !proto.Equal(o, func() *roostv1.Object { x, _ := h.f.Get("ImageRelease", "v2027-01-0"); return x }()) {
		t.Errorf("restored release %v %v", o, err)
	}
	if _, err := g.Get("ReleaseFeed", "mirror"); err != nil {
		t.Error(err)
	}
}

func TestUpdateReleaseFeedStatus(t *testing.T) {
	h := newHarness(t, Options{})
	h.rules = RulesVersion
	h.mustApply(h.objects(feedObj("upstream", nil)))
	failed := &roostv1.ReleaseFeedStatus{Conditions: []*roostv1.Condition{
		{Type: FeedReady, Status: "False", Reason: "Unreachable", Message: "dial tcp: refused"},
		{Type: FeedFetchFailed, Status: "True", Reason: "Unreachable", Message: "dial tcp: refused"}}}
	set := func(st *roostv1.ReleaseFeedStatus) *roostv1.Command {
		return &roostv1.Command{Command: &roostv1.Command_UpdateReleaseFeedStatus{UpdateReleaseFeedStatus: &roostv1.UpdateReleaseFeedStatus{Feed: "upstream", Status: st}}}
	}
	h.mustApply(set(failed))
	h.mustApply(set(failed))
	o, _ := h.f.Get("ReleaseFeed", "upstream")
	if !proto.Equal(o.GetReleaseFeed().GetStatus(), failed) || o.GetReleaseFeed().GetSpec().GetUrl() == "" {
		t.Fatalf("status %v", o.GetReleaseFeed())
	}
	var warnings int
	for _, e := range h.f.Reader().List("Event") {
		if e.GetEvent().GetSpec().GetReason() == FeedFetchFailed {
			warnings++
		}
	}
	if warnings != 1 {
		t.Errorf("%d FetchFailed Events for one failure, want 1", warnings)
	}
	wantCode(t, h.apply(&roostv1.Command{Command: &roostv1.Command_UpdateReleaseFeedStatus{UpdateReleaseFeedStatus: &roostv1.UpdateReleaseFeedStatus{Feed: "nope"}}}).Err, codes.NotFound)
}

// A push records when the release joined its channels, and a promotion
// when it joined the new one; older rules record nothing.
func TestChannelMemberships(t *testing.T) {
	h := newHarness(t, Options{})
	h.rules = RulesVersion
	ir := resource.Wrap(&roostv1.ImageRelease{Metadata: &roostv1.ObjectMeta{Name: "v1"}, Spec: &roostv1.ImageReleaseSpec{Version: "1", Channels: []string{"beta"}}})
	created := h.mustApply(h.objects(ir))
	promoted := h.mustApply(&roostv1.Command{Command: &roostv1.Command_PromoteImageRelease{PromoteImageRelease: &roostv1.PromoteImageRelease{Version: "1", Channel: "stable"}}})
	o, _ := h.f.Get("ImageRelease", "v1")
	ms := o.GetImageRelease().GetStatus().GetChannels()
	if len(ms) != 2 || ms[0].GetChannel() != "beta" || !ms[0].GetSince().AsTime().Equal(timeAt(created.Index)) ||
		ms[1].GetChannel() != "stable" || !ms[1].GetSince().AsTime().Equal(timeAt(promoted.Index)) {
		t.Fatalf("memberships %v", ms)
	}
	h.mustApply(&roostv1.Command{Command: &roostv1.Command_PromoteImageRelease{PromoteImageRelease: &roostv1.PromoteImageRelease{Version: "1", Channel: "beta", Remove: true}}})
	o, _ = h.f.Get("ImageRelease", "v1")
	if ms := o.GetImageRelease().GetStatus().GetChannels(); len(ms) != 1 || ms[0].GetChannel() != "stable" {
		t.Fatalf("after leaving beta %v", ms)
	}
	h.mustApply(withRules(RulesReleaseFeeds-1, h.objects(resource.Wrap(&roostv1.ImageRelease{Metadata: &roostv1.ObjectMeta{Name: "v2"},
		Spec: &roostv1.ImageReleaseSpec{Version: "2", Channels: []string{"beta"}}}))))
	o, _ = h.f.Get("ImageRelease", "v2")
	if len(o.GetImageRelease().GetStatus().GetChannels()) != 0 {
		t.Errorf("rules %d recorded memberships", RulesReleaseFeeds-1)
	}
	// PromoteAfterSoak and UpdateChannelStatus are unknown to older rules.
	wantCode(t, h.apply(withRules(RulesReleaseFeeds-1, &roostv1.Command{Command: &roostv1.Command_PromoteAfterSoak{PromoteAfterSoak: &roostv1.PromoteAfterSoak{Channel: "stable", Version: "2"}}})).Err, codes.InvalidArgument)
	wantCode(t, h.apply(&roostv1.Command{Command: &roostv1.Command_PromoteAfterSoak{PromoteAfterSoak: &roostv1.PromoteAfterSoak{Channel: "stable", Version: "2"}}}).Err, codes.NotFound)
}
