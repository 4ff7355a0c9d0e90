package feeds

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/blobs"
	"github.com/roostfleet/roost/hub/controller"
	"github.com/roostfleet/roost/hub/state"
	"github.com/roostfleet/roost/imagebuilder/feed"
	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
	"github.com/roostfleet/roost/resource"
)

// Retry delays after a failed poll: FirstRetry, doubling, at most the
// feed's poll interval.
const FirstRetry = 30 * time.Second

// MaxFeedReleases is how many FeedRelease entries a feed's status keeps
// (the newest).
const MaxFeedReleases = 50

// Reasons of FeedRelease entries and of the FetchFailed condition.
const (
	ReasonBadSignature     = "BadSignature"
	ReasonArtifactMismatch = "ArtifactMismatch"
	ReasonFetchFailed      = "FetchFailed"
	ReasonRefused          = "Refused"
	ReasonBadIndex         = "BadIndex"
	ReasonUnreachable      = "Unreachable"
	ReasonNoTrustedKey     = "NoTrustedKey"
	ReasonPolled           = "Polled"
)

// Controller polls each ReleaseFeed while this member leads: a
// hub/controller loop keyed by feed name. Set the exported fields, then
// call Run.
type Controller struct {
	IsLeader func() bool
	FSM      *state.FSM
	// Propose writes a command through Raft (on the leader).
	Propose func(context.Context, *roostv1.Command) error
	Barrier func(context.Context) error
	// Blobs is this member's artifact store, filled from the feeds.
	Blobs *blobs.Store
	// Client fetches HTTP(S) feeds; nil means a client with a 10-minute
	// timeout.
	Client *http.Client
	// NewUID names a new ImageRelease.
	NewUID func() string
	// Interval, when positive, replaces every feed's spec.pollInterval
	// (and caps the retry backoff).
	Interval time.Duration
	// Now is the clock; nil means time.Now.
	Now     func() time.Time
	Metrics *controller.Metrics
	Log     *slog.Logger

	mu sync.Mutex
	// polled remembers, per feed, the generation last polled and the
	// consecutive failures (for the backoff); a new leader polls at once.
	polled map[string]pollMemo
}

type pollMemo struct {
	generation int64
	failures   int
}

// Run reconciles each feed whose spec changed, when its next poll is due,
// while this member leads, until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	(&controller.Controller{
		Name: "feeds", Reconcile: c.Reconcile, Watch: c.FSM.Subscribe, IsLeader: c.IsLeader, Barrier: c.Barrier,
		Sources: []controller.Source{{Kind: "ReleaseFeed", Keys: controller.ByName}},
		OnStart: func(context.Context) { c.mu.Lock(); c.polled = nil; c.mu.Unlock() },
		Metrics: c.Metrics, Log: c.Log,
	}).Run(ctx)
}

func (c *Controller) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

func (c *Controller) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

func (c *Controller) client() *http.Client {
	if c.Client != nil {
		return c.Client
	}
	return &http.Client{Timeout: 10 * time.Minute}
}

// Reconcile polls feed name when its poll is due (its next_poll passed,
// or its spec changed, or this member did not poll it yet in this term)
// and records the result; it asks to run again at the next poll. A feed
// that does not exist is done.
func (c *Controller) Reconcile(ctx context.Context, name string) (controller.Result, error) {
	o := c.FSM.Reader().Get("ReleaseFeed", name)
	if o == nil {
		c.mu.Lock()
		delete(c.polled, name)
		c.mu.Unlock()
		return controller.Result{}, nil
	}
	f := o.GetReleaseFeed()
	now := c.now()
	c.mu.Lock()
	memo, seen := c.polled[name]
	c.mu.Unlock()
	if seen && memo.generation == f.GetMetadata().GetGeneration() {
		if next := f.GetStatus().GetNextPoll(); next != nil && next.AsTime().After(now) {
			return controller.Result{RequeueAfter: next.AsTime().Sub(now)}, nil
		}
	}
	st, ok := c.Poll(ctx, f)
	if ok {
		memo.failures = 0
	} else {
		memo.failures++
	}
	memo.generation = f.GetMetadata().GetGeneration()
	interval := resource.FeedPollInterval(f.GetSpec())
	if c.Interval > 0 {
		interval = c.Interval
	}
	wait := interval
	if !ok {
		wait = min(FirstRetry<<min(memo.failures-1, 16), interval)
	}
	st.NextPoll = timestamppb.New(now.Add(wait))
	c.mu.Lock()
	if c.polled == nil {
		c.polled = map[string]pollMemo{}
	}
	c.polled[name] = memo
	c.mu.Unlock()
	if err := c.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_UpdateReleaseFeedStatus{UpdateReleaseFeedStatus: &roostv1.UpdateReleaseFeedStatus{
		Feed: name, Status: st}}}); err != nil {
		return controller.Result{}, fmt.Errorf("feed %s: %w", name, err)
	}
	return controller.Result{RequeueAfter: wait}, nil
}

// Poll reads feed f once and imports its new releases; it returns f's new
// status (but next_poll) and whether the feed could be read. A release
// that fails to import is an ImportFailed entry; the feed stays Ready.
func (c *Controller) Poll(ctx context.Context, f *roostv1.ReleaseFeed) (*roostv1.ReleaseFeedStatus, bool) {
	now := c.now()
	st := &roostv1.ReleaseFeedStatus{LastPoll: timestamppb.New(now), Releases: slices.Clone(f.GetStatus().GetReleases())}
	conds := f.GetStatus().GetConditions()
	fail := func(reason string, err error) (*roostv1.ReleaseFeedStatus, bool) {
		c.log().Warn("release feed poll failed", "feed", f.GetMetadata().GetName(), "reason", reason, "err", err)
		conds = state.SetCondition(conds, state.FeedReady, "False", reason, err.Error(), now)
		st.Conditions = state.SetCondition(conds, state.FeedFetchFailed, "True", reason, err.Error(), now)
		return st, false
	}
	src, err := NewSource(f.GetSpec().GetUrl(), c.client())
	if err != nil {
		return fail(ReasonBadIndex, err)
	}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	data, err := src.ReadFile(pctx, feed.IndexFile, feed.MaxIndexSize)
	if err != nil {
		return fail(ReasonUnreachable, fmt.Errorf("feed %s: %w", src, err))
	}
	ix, err := feed.ParseIndex(data)
	if err != nil {
		return fail(ReasonBadIndex, fmt.Errorf("feed %s: %w", src, err))
	}
	keys, keyErr := state.FeedKeys(c.FSM.TrustedKeys(), f.GetSpec())
	for _, ch := range ix.Channels {
		if allow := f.GetSpec().GetChannels(); len(allow) > 0 && !slices.Contains(allow, ch) {
			continue
		}
		data, err := src.ReadFile(pctx, feed.ChannelPath(ch), feed.MaxIndexSize)
		if err != nil {
			return fail(ReasonUnreachable, fmt.Errorf("feed %s: %w", src, err))
		}
		ci, err := feed.ParseChannel(ch, data)
		if err != nil {
			return fail(ReasonBadIndex, fmt.Errorf("feed %s: %w", src, err))
		}
		for _, e := range ci.Releases {
			if c.recorded(e.Version, ch) {
				continue
			}
			var fr *roostv1.FeedRelease
			if keyErr != nil {
				fr = failed(e.Version, ch, ReasonNoTrustedKey, keyErr.Error())
			} else {
				fr = c.importRelease(ctx, f.GetMetadata().GetName(), src, ch, e, keys)
			}
			fr.Time = timestamppb.New(c.now())
			st.Releases = recordRelease(st.Releases, fr)
		}
		for _, e := range ci.Extensions {
			fr := c.extensionRecorded(e, ch)
			if fr == nil {
				continue
			}
			if fr.State == "" {
				if keyErr != nil {
					fr = failedExtension(e, ch, ReasonNoTrustedKey, keyErr.Error())
				} else {
					fr = c.importExtension(ctx, src, ch, e, keys)
				}
			}
			fr.Time = timestamppb.New(c.now())
			st.Releases = recordRelease(st.Releases, fr)
		}
	}
	conds = state.SetCondition(conds, state.FeedFetchFailed, "False", ReasonPolled, "", now)
	msg := fmt.Sprintf("read %s of %s", englishChannels(len(ix.Channels)), src)
	if keyErr != nil {
		msg += "; nothing imported: " + keyErr.Error()
	}
	st.Conditions = state.SetCondition(conds, state.FeedReady, "True", ReasonPolled, msg, now)
	return st, true
}

func englishChannels(n int) string {
	if n == 1 {
		return "1 channel"
	}
	return fmt.Sprintf("%d channels", n)
}

// recorded says whether release version is recorded on channel.
func (c *Controller) recorded(version, channel string) bool {
	o := c.FSM.Reader().Get("ImageRelease", release.Name(version))
	return o != nil && o.GetImageRelease().GetSpec().GetVersion() == version && slices.Contains(o.GetImageRelease().GetSpec().GetChannels(), channel)
}

// extensionRecorded says what to do with extension version e of channel:
// nil when the hub holds it (as an Extension with the feed's manifest),
// an ImportFailed entry when it holds another manifest under that name
// (extensions are immutable), else an empty entry: import it.
func (c *Controller) extensionRecorded(e feed.ExtensionEntry, channel string) *roostv1.FeedRelease {
	o := c.FSM.Reader().Get("Extension", resource.ExtensionObjectName(e.Name, e.Version))
	if o == nil {
		return &roostv1.FeedRelease{}
	}
	if x := o.GetExtension().GetSpec(); x.GetName() == e.Name && x.GetVersion() == e.Version {
		return nil
	}
	return failedExtension(e, channel, ReasonRefused, fmt.Sprintf("the hub holds Extension %s for another extension", o.GetExtension().GetMetadata().GetName()))
}

// recordRelease puts fr into rs in place of the entry of its extension,
// version and channel, keeping the newest MaxFeedReleases.
func recordRelease(rs []*roostv1.FeedRelease, fr *roostv1.FeedRelease) []*roostv1.FeedRelease {
	rs = slices.DeleteFunc(rs, func(r *roostv1.FeedRelease) bool {
		return r.GetExtension() == fr.GetExtension() && r.GetVersion() == fr.GetVersion() && r.GetChannel() == fr.GetChannel()
	})
	rs = append(rs, fr)
	if len(rs) > MaxFeedReleases {
		rs = rs[len(rs)-MaxFeedReleases:]
	}
	return rs
}

func failed(version, channel, reason, msg string) *roostv1.FeedRelease {
	return &roostv1.FeedRelease{Version: version, Channel: channel, State: state.FeedImportFailed, Reason: reason, Message: msg}
}

func failedExtension(e feed.ExtensionEntry, channel, reason, msg string) *roostv1.FeedRelease {
	fr := failed(e.Version, channel, reason, msg)
	fr.Extension = e.Name
	return fr
}

// fill copies the artifacts sizes names (sha256 → size in bytes, from a
// signed manifest) from the feed into the blob store, each checked
// against its digest and size; an interrupted copy resumes at the next
// poll. On failure it returns the FeedRelease reason (ArtifactMismatch or
// FetchFailed) and the error.
func (c *Controller) fill(ctx context.Context, src Source, sizes map[string]int64) (string, error) {
	bs := blobSource{src: src, sizes: sizes}
	for _, d := range slices.Sorted(maps.Keys(sizes)) {
		if _, err := c.Blobs.Fill(ctx, d, []blobs.Source{bs}); err != nil {
			reason := ReasonFetchFailed
			if strings.Contains(err.Error(), blobs.ErrDigestMismatch.Error()) || strings.Contains(err.Error(), "the signed manifest says") {
				reason = ReasonArtifactMismatch
			}
			return reason, fmt.Errorf("artifact sha256 %s: %v", d, err)
		}
	}
	return "", nil
}

// importExtension imports extension version e of channel: it reads the
// manifest and signature, verifies them with keys and checks the
// Extension they describe (resource.Validate) before anything else, fills
// the image into the blob store from the feed, and proposes the Extension
// (an ApplyObjects command, as roostctl extension push does). MachineClasses
// that follow the extension by name then move to it, inside windows.
func (c *Controller) importExtension(ctx context.Context, src Source, channel string, e feed.ExtensionEntry, keys []ed25519.PublicKey) *roostv1.FeedRelease {
	manifest, err := src.ReadFile(ctx, e.Manifest, feed.MaxManifestSize)
	if err != nil {
		return failedExtension(e, channel, ReasonFetchFailed, err.Error())
	}
	sig, err := src.ReadFile(ctx, e.Signature, feed.MaxManifestSize)
	if err != nil {
		return failedExtension(e, channel, ReasonFetchFailed, err.Error())
	}
	x, err := resource.ExtensionFromManifest(manifest, strings.TrimSpace(string(sig)))
	if err != nil {
		return failedExtension(e, channel, ReasonBadSignature, fmt.Sprintf("%s: %v", e.Manifest, err))
	}
	if err := releasesig.VerifyExtension(releasesig.FromExtension(x.GetSpec()), keys); err != nil {
		return failedExtension(e, channel, ReasonBadSignature, err.Error())
	}
	if s := x.GetSpec(); s.GetName() != e.Name || s.GetVersion() != e.Version {
		return failedExtension(e, channel, ReasonRefused, fmt.Sprintf("%s is extension %s %s, the channel lists %s %s", e.Manifest, s.GetName(), s.GetVersion(), e.Name, e.Version))
	}
	obj := resource.Wrap(x)
	if vs := resource.Validate(obj); len(vs) > 0 {
		return failedExtension(e, channel, ReasonRefused, fmt.Sprintf("%s: %s", e.Manifest, vs[0].String()))
	}
	img := x.GetSpec().GetImage()
	if reason, err := c.fill(ctx, src, map[string]int64{img.GetSha256(): img.GetSize()}); err != nil {
		return failedExtension(e, channel, reason, err.Error())
	}
	err = c.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_ApplyObjects{ApplyObjects: &roostv1.ApplyObjects{
		Objects: []*roostv1.Object{obj}, Uids: []string{c.NewUID()}}}})
	if err != nil {
		return failedExtension(e, channel, ReasonRefused, err.Error())
	}
	c.log().Info("imported extension from feed", "extension", e.Name, "version", e.Version, "channel", channel)
	return &roostv1.FeedRelease{Extension: e.Name, Version: e.Version, Channel: channel, State: state.FeedImported}
}

// importRelease imports release e of channel: it reads the manifest and
// signature and verifies them with keys before anything else, fills the
// artifacts into the blob store from the feed (each checked against the
// sha256 and size the signed manifest gives; an interrupted copy resumes
// at the next poll), and proposes ImportImageRelease.
func (c *Controller) importRelease(ctx context.Context, feedName string, src Source, channel string, e feed.Entry, keys []ed25519.PublicKey) *roostv1.FeedRelease {
	manifest, err := src.ReadFile(ctx, e.Manifest, feed.MaxManifestSize)
	if err != nil {
		return failed(e.Version, channel, ReasonFetchFailed, err.Error())
	}
	sig, err := src.ReadFile(ctx, e.Signature, feed.MaxManifestSize)
	if err != nil {
		return failed(e.Version, channel, ReasonFetchFailed, err.Error())
	}
	var m release.Manifest
	if err := json.Unmarshal(manifest, &m); err != nil {
		return failed(e.Version, channel, ReasonBadSignature, fmt.Sprintf("%s: not a release manifest: %v", e.Manifest, err))
	}
	spec := release.Spec(&m, manifest, strings.TrimSpace(string(sig)))
	if _, err := releasesig.Verify(releasesig.FromImageRelease(spec), keys); err != nil {
		return failed(e.Version, channel, ReasonBadSignature, err.Error())
	}
	if err := releasesig.CheckSignedFields(spec); err != nil {
		return failed(e.Version, channel, ReasonBadSignature, err.Error())
	}
	if m.Kind != release.ReleaseKind || m.Version != e.Version {
		return failed(e.Version, channel, ReasonRefused, fmt.Sprintf("%s is %s %q, the channel lists version %s", e.Manifest, m.Kind, m.Version, e.Version))
	}
	sizes := map[string]int64{}
	for _, a := range []*roostv1.Artifact{spec.GetKernel(), spec.GetInitrd(), spec.GetBootLoader()} {
		if a.GetSha256() != "" {
			sizes[a.GetSha256()] = a.GetSize()
		}
	}
	if reason, err := c.fill(ctx, src, sizes); err != nil {
		return failed(e.Version, channel, reason, err.Error())
	}
	ir := &roostv1.ImageRelease{ApiVersion: resource.APIVersion, Kind: "ImageRelease", Metadata: &roostv1.ObjectMeta{Name: release.Name(e.Version)}, Spec: spec}
	err = c.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_ImportImageRelease{ImportImageRelease: &roostv1.ImportImageRelease{
		Feed: feedName, Release: ir, Channel: channel, Uid: c.NewUID()}}})
	if err != nil {
		return failed(e.Version, channel, ReasonRefused, err.Error())
	}
	c.log().Info("imported release from feed", "feed", feedName, "version", e.Version, "channel", channel)
	return &roostv1.FeedRelease{Version: e.Version, Channel: channel, State: state.FeedImported}
}
