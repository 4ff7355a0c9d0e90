package feeds

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/roostfleet/roost/hub/blobs"
	"github.com/roostfleet/roost/hub/state"
	"github.com/roostfleet/roost/imagebuilder/feed"
	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
)

// bundle builds a signed release bundle of version with unique artifacts.
func bundle(t *testing.T, priv ed25519.PrivateKey, version string, upgradesFrom ...string) string {
	t.Helper()
	src := t.TempDir()
	for _, f := range []string{"k", "i", "b"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte(f+version), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := &release.Definition{Name: "t", Version: version, Date: t0, UpgradesFrom: upgradesFrom,
		Kernel: release.Source{Path: filepath.Join(src, "k")}, Initrd: release.Source{Path: filepath.Join(src, "i")}, Bootloader: release.Source{Path: filepath.Join(src, "b")}}
	out := filepath.Join(t.TempDir(), version)
	if _, err := release.Build(d, out, release.Options{Key: priv}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A feed in a directory (an air-gapped site): imported with its
// upgradesFrom; polled again only when due; a feed that cannot be read
// backs off from FirstRetry, doubling, and recovers.
// directoryFeed is a fleet that trusts a new release key (priv signs for
// it), its ReleaseFeed "mirror" over the directory dir (not created yet),
// and the feed controller over a new blob store.
func directoryFeed(t *testing.T) (fl *fleet, c *Controller, dir string, priv ed25519.PrivateKey, store *blobs.Store) {
	t.Helper()
	fl = newFleet(t, t0)
	pub, priv, _ := ed25519.GenerateKey(nil)
	fl.apply(&roostv1.Command{Command: &roostv1.Command_PutTrustedKey{PutTrustedKey: &roostv1.PutTrustedKey{
		Key: &roostv1.TrustedKey{Id: releasesig.KeyID(pub), PublicKeyPem: string(releasesig.MarshalPublicKeyPEM(pub))}}}})
	dir = filepath.Join(t.TempDir(), "feed")
	fl.objects(&roostv1.ReleaseFeed{Metadata: &roostv1.ObjectMeta{Name: "mirror"}, Spec: &roostv1.ReleaseFeedSpec{Url: "file://" + dir}})
	store, err := blobs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c = &Controller{IsLeader: func() bool { return true }, FSM: fl.f, Propose: fl.propose, Blobs: store, NewUID: fl.newUID,
		Now: func() time.Time { return fl.now }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return fl, c, dir, priv, store
}

func TestControllerDirectoryFeed(t *testing.T) {
	fl, c, dir, priv, _ := directoryFeed(t)
	ctx := context.Background()
	status := func() *roostv1.ReleaseFeedStatus {
		o, _ := fl.f.Get("ReleaseFeed", "mirror")
		return o.GetReleaseFeed().GetStatus()
	}

	// The directory does not exist yet: FetchFailed, retried after 30s,
	// then 60s.
	for i, want := range []time.Duration{FirstRetry, 2 * FirstRetry} {
		res, err := c.Reconcile(ctx, "mirror")
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter != want {
			t.Errorf("failure %d: requeue after %s, want %s", i+1, res.RequeueAfter, want)
		}
		if f := state.FindCondition(status().GetConditions(), state.FeedFetchFailed); f.GetStatus() != "True" || f.GetReason() != ReasonUnreachable {
			t.Fatalf("FetchFailed %v", f)
		}
		fl.now = fl.now.Add(want)
	}

	if _, err := feed.Publish(dir, "beta", []string{bundle(t, priv, "2027.01.0"), bundle(t, priv, "2027.02.0", "2027.01.0")}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Reconcile(ctx, "mirror")
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != time.Hour {
		t.Errorf("requeue after %s, want the default poll interval", res.RequeueAfter)
	}
	st := status()
	if r := state.FindCondition(st.GetConditions(), state.FeedReady); r.GetStatus() != "True" || len(st.GetReleases()) != 2 {
		t.Fatalf("status %v", st)
	}
	o, err := fl.f.Get("ImageRelease", release.Name("2027.02.0"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(o.GetImageRelease().GetSpec().GetUpgradesFrom()); got != "[2027.01.0]" {
		t.Errorf("upgradesFrom %s", got)
	}
	// Not due: nothing read, nothing written.
	before := fl.idx
	fl.now = fl.now.Add(time.Minute)
	if res, err := c.Reconcile(ctx, "mirror"); err != nil || fl.idx != before || res.RequeueAfter != 59*time.Minute {
		t.Errorf("an early reconcile: %v, %d commands, requeue %s", err, fl.idx-before, res.RequeueAfter)
	}
	// Due: polled, nothing new imported.
	fl.now = fl.now.Add(time.Hour)
	if _, err := c.Reconcile(ctx, "mirror"); err != nil {
		t.Fatal(err)
	}
	if n := fl.f.Count("ImageRelease"); n != 2 {
		t.Errorf("%d releases after a second poll", n)
	}
	// A deleted feed is done.
	fl.apply(&roostv1.Command{Command: &roostv1.Command_DeleteObject{DeleteObject: &roostv1.DeleteObject{Kind: "ReleaseFeed", Name: "mirror"}}})
	if res, err := c.Reconcile(ctx, "mirror"); err != nil || res.RequeueAfter != 0 {
		t.Errorf("deleted feed: %v %v", res, err)
	}
}
