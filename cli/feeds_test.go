package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// roostctl get feeds and describe feed against a real hub: a feed whose
// directory does not exist is polled at once and shows FetchFailed; a
// Channel shows what its candidate waits for.
func TestGetAndDescribeFeeds(t *testing.T) {
	_, _, run := realHubCLI(t)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "feed.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: roost.io/v1
kind: ReleaseFeed
metadata: {name: mirror}
spec:
  url: `+filepath.Join(dir, "missing")+`
  channels: [beta]
---
apiVersion: roost.io/v1
kind: Channel
metadata: {name: stable}
spec: {follows: beta, soak: 72h}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run("apply", "-f", manifest)
	if r.code != 0 || !strings.Contains(r.err, "nothing will be imported until a key is trusted") {
		t.Fatalf("apply: %+v", r)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r = run("get", "feeds")
		if strings.Contains(r.out, "False/Unreachable") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r.code != 0 || !strings.Contains(r.out, "NAME") || !strings.Contains(r.out, "READY") || !strings.Contains(r.out, "mirror") ||
		!strings.Contains(r.out, "False/Unreachable") {
		t.Fatalf("get feeds: %+v", r)
	}
	r = run("describe", "feed", "mirror")
	if r.code != 0 || !strings.Contains(r.out, "FetchFailed") || !strings.Contains(r.out, "index.json") {
		t.Fatalf("describe feed: %+v", r)
	}
	r = run("get", "channels", "-o", "wide")
	if r.code != 0 || !strings.Contains(r.out, "FOLLOWS") || !strings.Contains(r.out, "beta") || !strings.Contains(r.out, "72h") {
		t.Fatalf("get channels: %+v", r)
	}
	if r = run("describe", "feed", "nope"); r.code != 1 {
		t.Errorf("describe of a missing feed: exit %d, want 1", r.code)
	}
}
