package hub_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// An open Watch does not hold Close for the graceful stop's whole timeout
// (5 s): Close ends it at once with Unavailable, saying the member is
// stopping, so that the client moves to another member.
func TestCloseEndsOpenWatch(t *testing.T) {
	dir := t.TempDir()
	h := startHub(t, dir, hub.Options{NodeID: "hub-a"})
	waitFor(t, "admin.conf", func() bool { _, err := client.LoadConfig(h.AdminConfigPath()); return err == nil })
	c := dial(t, filepath.Join(dir, "admin.conf"))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{cluster("prod", "v1.34.4")}}); err != nil {
		t.Fatal(err)
	}
	watch, err := c.Watch(ctx, &roostv1.WatchRequest{Kind: "Cluster"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil { // the stream is open on the member
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := watch.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()

	start := time.Now()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("Close with a Watch open took %s", took.Round(time.Millisecond))
	// The graceful stop waits up to 5 s; well under it means Close did not
	// wait for the Watch (without the fix it took 5 s).
	if took > 2500*time.Millisecond {
		t.Errorf("Close took %s with a Watch open: it waited for the stream", took)
	}
	select {
	case err := <-ended:
		if apierror.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "hub member hub-a is stopping; reconnect to another member") {
			t.Errorf("watch ended with %v, want Unavailable saying the member is stopping", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Watch did not end")
	}
}
