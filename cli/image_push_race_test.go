package cli

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// TestImagePushKeepsConcurrentPromote races 'roostctl image push' of a
// release that is already recorded against 'roostctl image promote' of
// the same release, many times, against a real hub: every promotion must
// survive the push (the FSM keeps a stored release's channels; the push
// does not write back channels it read).
func TestImagePushKeepsConcurrentPromote(t *testing.T) {
	_, config, run := realHubCLI(t)
	bundle, pub := makeBundle(t, "2026.11.0", 1000, 1000, 10)
	if r := run("image", "push", bundle, "--key", pub); r.code != 0 {
		t.Fatalf("push: %d\n%s%s", r.code, r.out, r.err)
	}
	hubc := roostv1.NewHubServiceClient(adminConn(t, config))
	const iterations = 50
	for i := range iterations {
		channel := fmt.Sprintf("c%d", i)
		var wg sync.WaitGroup
		var push, promote result
		wg.Add(2)
		go func() { defer wg.Done(); push = run("image", "push", bundle, "--key", pub) }()
		go func() { defer wg.Done(); promote = run("image", "promote", "2026.11.0", "--channel", channel) }()
		wg.Wait()
		if push.code != 0 {
			t.Fatalf("iteration %d: push: %d\n%s%s", i, push.code, push.out, push.err)
		}
		if promote.code != 0 {
			t.Fatalf("iteration %d: promote: %d\n%s%s", i, promote.code, promote.out, promote.err)
		}
		resp, err := hubc.Get(t.Context(), &roostv1.GetRequest{Kind: "ImageRelease", Name: "v2026-11-0"})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetObject().GetImageRelease().GetSpec().GetChannels(); !slices.Contains(got, channel) {
			t.Fatalf("iteration %d: channels %v after a push and a promote to %s: the promotion was lost", i, got, channel)
		}
	}
}
