package cli

import (
	"strings"
	"testing"

	"github.com/roostfleet/roost/hub/revisions"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// poolsYAML: lab and demo name no channel and no version, workers follows
// stable, old pins 2026.11.0.
const poolsYAML = clusterYAML + `---
apiVersion: roost.io/v1
kind: Pool
metadata: {name: lab}
spec: {cluster: prod, replicas: 1}
---
apiVersion: roost.io/v1
kind: Pool
metadata: {name: demo}
spec: {cluster: prod, replicas: 1}
---
apiVersion: roost.io/v1
kind: Pool
metadata: {name: workers}
spec: {cluster: prod, replicas: 1, imageChannel: stable}
---
apiVersion: roost.io/v1
kind: Pool
metadata: {name: old}
spec: {cluster: prod, replicas: 1, imageVersion: 2026.11.0}
`

// TestImagePoolsTargeting: push names the Pools that move to a new
// release at once (they name no channel and no version), and describe
// lists exactly the Pools whose current target the release is.
func TestImagePoolsTargeting(t *testing.T) {
	_, _, run := realHubCLI(t)
	if r := run("apply", "-f", writeFile(t, t.TempDir(), "pools.yaml", poolsYAML)); r.code != 0 {
		t.Fatalf("apply: %d\n%s%s", r.code, r.out, r.err)
	}
	const hint = "but Pools demo, lab name no channel and no version: they move to "
	describePools := func(version string) string {
		t.Helper()
		r := run("image", "describe", version)
		if r.code != 0 {
			t.Fatalf("describe %s: %d\n%s%s", version, r.code, r.out, r.err)
		}
		for _, line := range strings.Split(r.out, "\n") {
			if rest, ok := strings.CutPrefix(line, "Pools:"); ok {
				return strings.TrimSpace(rest)
			}
		}
		t.Fatalf("describe %s shows no Pools line:\n%s", version, r.out)
		return ""
	}

	b1, _ := makeBundle(t, "2026.11.0", 10, 10, 10)
	r := run("image", "push", b1)
	if r.code != 0 || !strings.Contains(r.out, "on no channel yet") || !strings.Contains(r.out, hint+"2026.11.0 right away, promoted or not") {
		t.Fatalf("push 2026.11.0: %d\n%s%s", r.code, r.out, r.err)
	}
	if strings.Contains(r.out, "workers") || strings.Contains(r.out, "old") {
		t.Errorf("the hint names Pools that follow a channel or pin a version:\n%s", r.out)
	}
	if got, want := describePools("2026.11.0"), "demo (no channel or version: the newest release), lab (no channel or version: the newest release), old (pinned)"; got != want {
		t.Errorf("describe 2026.11.0 Pools = %q, want %q", got, want)
	}
	if r = run("image", "promote", "2026.11.0", "--channel", "stable"); r.code != 0 {
		t.Fatalf("promote: %d %s", r.code, r.err)
	}
	if got := describePools("2026.11.0"); !strings.Contains(got, "workers (follows stable)") {
		t.Errorf("describe 2026.11.0 after promote: Pools = %q", got)
	}

	// A newer release, not promoted: the channel-less Pools move to it,
	// workers stays on 2026.11.0.
	b2, _ := makeBundle(t, "2026.12.0", 10, 10, 10)
	if r = run("image", "push", b2); r.code != 0 || !strings.Contains(r.out, hint+"2026.12.0 right away") {
		t.Fatalf("push 2026.12.0: %d\n%s%s", r.code, r.out, r.err)
	}
	if got, want := describePools("2026.12.0"), "demo (no channel or version: the newest release), lab (no channel or version: the newest release)"; got != want {
		t.Errorf("describe 2026.12.0 Pools = %q, want %q", got, want)
	}
	if got, want := describePools("2026.11.0"), "old (pinned), workers (follows stable)"; got != want {
		t.Errorf("describe 2026.11.0 Pools = %q, want %q", got, want)
	}
	// Pushed again (unchanged), it is still the newest: the hint stays.
	if r = run("image", "push", b2); r.code != 0 || !strings.Contains(r.out, "unchanged") || !strings.Contains(r.out, hint+"2026.12.0") {
		t.Fatalf("push 2026.12.0 again: %d\n%s%s", r.code, r.out, r.err)
	}

	// Promoted, it is the target of workers too; 2026.11.0, still on
	// stable, is no longer (describe listed such Pools before).
	if r = run("image", "promote", "2026.12.0", "--channel", "stable"); r.code != 0 {
		t.Fatalf("promote: %d %s", r.code, r.err)
	}
	if got, want := describePools("2026.11.0"), "old (pinned)"; got != want {
		t.Errorf("describe 2026.11.0 Pools = %q, want %q", got, want)
	}
	if got := describePools("2026.12.0"); !strings.Contains(got, "workers (follows stable)") || !strings.Contains(got, "lab (") {
		t.Errorf("describe 2026.12.0 Pools = %q", got)
	}

	// An older release pushed again while a newer one exists: no Pool
	// moves to it.
	b3, _ := makeBundle(t, "2026.12.1", 10, 10, 10)
	if r = run("image", "push", b3); r.code != 0 || !strings.Contains(r.out, hint+"2026.12.1") {
		t.Fatalf("push 2026.12.1: %d\n%s%s", r.code, r.out, r.err)
	}
	if r = run("image", "promote", "2026.12.0", "--channel", "stable", "--remove"); r.code != 0 {
		t.Fatalf("promote --remove: %d %s", r.code, r.err)
	}
	if r = run("image", "push", b2); r.code != 0 || !strings.Contains(r.out, "on no channel yet") || strings.Contains(r.out, "lab") {
		t.Fatalf("push 2026.12.0 again after 2026.12.1: %d\n%s%s", r.code, r.out, r.err)
	}
	if got, want := describePools("2026.11.0"), "old (pinned), workers (follows stable)"; got != want {
		t.Errorf("describe 2026.11.0 after the removal: Pools = %q, want %q", got, want)
	}
}

// TestImagePushRefusesBadVersion: a bundle whose version breaks the rule
// is refused before roostctl dials the hub (exit code 2).
func TestImagePushRefusesBadVersion(t *testing.T) {
	config := newTestPKI(t).writeConfig(t, "127.0.0.1:1") // no hub there
	for _, v := range []string{"bad version", "a/b", "2026..1", "V2026.11.0"} {
		bundle, _ := makeBundle(t, v, 10, 10, 10)
		r := runCLI(t, "", "--config", config, "image", "push", bundle)
		if r.code != ExitUsage || !strings.Contains(r.err, "release.json: version ") || !strings.Contains(r.err, "nothing was uploaded") {
			t.Errorf("push of version %q: %d\n%s%s", v, r.code, r.out, r.err)
		}
	}
}

// TestNewestReleaseMatchesHub: the CLI's idea of a Pool's target is the
// revision controller's.
func TestNewestReleaseMatchesHub(t *testing.T) {
	rel := func(version string, index uint64, channels ...string) *roostv1.Object {
		return &roostv1.Object{Kind: &roostv1.Object_ImageRelease{ImageRelease: &roostv1.ImageRelease{
			Metadata: &roostv1.ObjectMeta{Name: imageReleaseName(version), CreateIndex: index},
			Spec:     &roostv1.ImageReleaseSpec{Version: version, Channels: channels}}}}
	}
	objs := []*roostv1.Object{rel("2026.11.0", 5, "stable", "beta"), rel("2026.12.0", 9, "beta"), rel("2026.10.0", 2, "stable"), rel("2027.1.0", 12)}
	for _, ch := range []string{"", "stable", "beta", "nowhere"} {
		want := revisions.PickRelease(objs, "", ch).GetMetadata().GetName()
		if got := newestRelease(releasesOf(objs), ch).GetMetadata().GetName(); got != want {
			t.Errorf("channel %q: newestRelease = %q, revisions.PickRelease = %q", ch, got, want)
		}
	}
}

func TestShortList(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"a"}, "a"},
		{[]string{"a", "b", "c"}, "a, b, c"},
		{[]string{"a", "b", "c", "d", "e", "f", "g"}, "a, b, c, d, e and 2 more"},
	} {
		if got := shortList(tc.names, maxPoolsShown); got != tc.want {
			t.Errorf("shortList(%v) = %q, want %q", tc.names, got, tc.want)
		}
	}
}
