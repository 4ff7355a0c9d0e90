package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// applyPoolYAML is a Pool as kept in Git: it follows stable, pins nothing
// and does not pause its rollout.
const applyPoolYAML = `apiVersion: roost.io/v1
kind: Pool
metadata:
  name: workers
spec:
  imageChannel: stable
  rollout:
    maxUnavailable: 1
`

// stripServerFields turns 'get -o yaml' of one object into a manifest
// 'apply' takes: without status and the metadata the hub sets.
func stripServerFields(t *testing.T, y string) string {
	t.Helper()
	var b strings.Builder
	inStatus := false
	for _, l := range strings.SplitAfter(y, "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "status:"):
			inStatus = true
			continue
		case inStatus && (strings.HasPrefix(l, " ") || trimmed == ""):
			continue
		}
		inStatus = false
		key, _, _ := strings.Cut(trimmed, ":")
		if strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "   ") {
			switch key {
			case "uid", "generation", "createIndex", "modifyIndex", "creationTimestamp":
				continue
			}
		}
		b.WriteString(l)
	}
	return b.String()
}

// TestApplyKeepsPauseAndWarnsOnUnpin runs against a real hub: a pause set
// with 'rollout pause' survives applying the pool's manifest (with a
// warning roostctl prints) until 'rollout resume'; a pinned pool's
// 'get -o yaml' applies again; a manifest without imageVersion unpins the
// pool, with a warning.
func TestApplyKeepsPauseAndWarnsOnUnpin(t *testing.T) {
	h, config, run := realHubCLI(t)
	getPool := func() *roostv1.Pool {
		t.Helper()
		o, err := h.FSM().Get("Pool", "workers")
		if err != nil {
			t.Fatal(err)
		}
		return o.GetPool()
	}
	// waitPhase waits until the rollout controller shows one of phases.
	waitPhase := func(phases ...string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			got := getPool().GetStatus().GetRollout().GetPhase()
			for _, p := range phases {
				if got == p {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("rollout phase %q, want one of %v", got, phases)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	bundle, _ := makeBundle(t, "2026.11.0", 10, 10, 10)
	if r := run("image", "push", bundle); r.code != 0 {
		t.Fatalf("push: %d\n%s%s", r.code, r.out, r.err)
	}
	if r := run("image", "promote", "2026.11.0", "--channel", "stable"); r.code != 0 {
		t.Fatalf("promote: %d\n%s%s", r.code, r.out, r.err)
	}
	manifest := writeFile(t, t.TempDir(), "pool.yaml", applyPoolYAML)
	if r := run("apply", "-f", manifest); r.code != 0 || r.out != "pool/workers created\n" || r.err != "" {
		t.Fatalf("apply: %d\n%s%s", r.code, r.out, r.err)
	}
	// One Machine awaiting its first install gives the rollout work, so
	// that a pause shows as phase Paused.
	r := run("token", "create")
	if r.code != 0 {
		t.Fatalf("token create: %d %s", r.code, r.err)
	}
	token := strings.TrimSpace(strings.Split(r.out, "\n")[1])
	srv := availableServerCLI(t, h, config, token, "4c4c4544-0042-3510-8052-00000000000c", "52:54:00:00:00:0c")
	if r = run("pool", "assign", "workers", srv); r.code != 0 {
		t.Fatalf("pool assign: %d\n%s%s", r.code, r.out, r.err)
	}
	waitPhase("Progressing")

	// Pause, then re-apply the manifest from Git: still paused, and said so.
	if r := run("rollout", "pause", "workers"); r.code != 0 || r.out != "pool/workers paused\n" {
		t.Fatalf("pause: %d\n%s%s", r.code, r.out, r.err)
	}
	waitPhase("Paused")
	if r := run("rollout", "pause", "workers"); r.code != 0 || r.out != "pool/workers was already paused\n" {
		t.Fatalf("pause again: %d\nstdout %q\nstderr %q", r.code, r.out, r.err)
	}
	const keptWarning = "Warning from hub: pool/workers: spec.rollout.paused kept (paused by 'roostctl rollout pause' or an earlier manifest); " +
		"'roostctl rollout resume workers' lifts it\n"
	r = run("apply", "-f", manifest, "--dry-run")
	if r.code != 0 || r.out != "pool/workers unchanged (dry run)\n" || r.err != keptWarning {
		t.Errorf("apply --dry-run of a paused pool: %d\nstdout %q\nstderr %q\nwant   %q", r.code, r.out, r.err, keptWarning)
	}
	r = run("apply", "-f", manifest)
	if r.code != 0 || r.out != "pool/workers unchanged\n" || r.err != keptWarning {
		t.Errorf("apply of a paused pool: %d\nstdout %q\nstderr %q\nwant   %q", r.code, r.out, r.err, keptWarning)
	}
	// A change elsewhere in the spec is applied; the pause stays.
	changed := writeFile(t, t.TempDir(), "pool.yaml", strings.Replace(applyPoolYAML, "maxUnavailable: 1", "maxUnavailable: 2", 1))
	r = run("apply", "-f", changed)
	if r.code != 0 || r.out != "pool/workers configured\n" || r.err != keptWarning {
		t.Errorf("apply of a changed paused pool: %d\nstdout %q\nstderr %q", r.code, r.out, r.err)
	}
	r = run("apply", "-f", changed, "-o", "json")
	if r.code != 0 || !strings.Contains(r.out, `"action": "unchanged"`) || r.err != keptWarning {
		t.Errorf("apply -o json of a paused pool: %d\nstdout %q\nstderr %q", r.code, r.out, r.err)
	}
	time.Sleep(300 * time.Millisecond) // give the rollout controller a chance to get it wrong
	if p := getPool(); !p.GetSpec().GetRollout().GetPaused() || p.GetSpec().GetRollout().GetMaxUnavailable().GetIntVal() != 2 {
		t.Fatalf("after applies: spec.rollout %v, want paused with maxUnavailable 2", p.GetSpec().GetRollout())
	}
	waitPhase("Paused")

	// Only resume lifts it; then the manifest applies as it is, silently.
	if r := run("rollout", "resume", "workers"); r.code != 0 {
		t.Fatalf("resume: %d\n%s%s", r.code, r.out, r.err)
	}
	r = run("apply", "-f", manifest)
	if r.code != 0 || r.out != "pool/workers configured\n" || r.err != "" {
		t.Errorf("apply after resume: %d\nstdout %q\nstderr %q", r.code, r.out, r.err)
	}
	if getPool().GetSpec().GetRollout().GetPaused() {
		t.Fatal("still paused after resume and apply")
	}
	if r := run("rollout", "resume", "workers"); r.code != 0 || r.out != "pool/workers was neither paused nor halted\n" {
		t.Fatalf("resume again: %d\n%s%s", r.code, r.out, r.err)
	}
	waitPhase("Idle", "Progressing")

	// A manifest with paused: true pauses, without a warning.
	pausedManifest := writeFile(t, t.TempDir(), "pool.yaml", applyPoolYAML+"    paused: true\n")
	if r = run("apply", "-f", pausedManifest); r.code != 0 || r.out != "pool/workers configured\n" || r.err != "" {
		t.Errorf("apply paused: true: %d\nstdout %q\nstderr %q", r.code, r.out, r.err)
	}
	waitPhase("Paused")
	if r = run("rollout", "resume", "workers"); r.code != 0 {
		t.Fatalf("resume: %d\n%s%s", r.code, r.out, r.err)
	}

	// pin checks VERSION like a manifest's spec.imageVersion, in roostctl
	// and in the hub; a version no release has stays refused.
	if r = run("pool", "pin", "workers", "a/b"); r.code != ExitUsage || !strings.Contains(r.err, `"a/b" holds "/"`) {
		t.Errorf("pin a/b: %d\nstdout %q\nstderr %q", r.code, r.out, r.err)
	}
	hubc := roostv1.NewHubServiceClient(adminConn(t, config))
	_, err := hubc.RolloutControl(context.Background(), &roostv1.RolloutControlRequest{Pool: "workers", Action: roostv1.RolloutAction_ROLLOUT_ACTION_PIN, Version: "a/b"})
	if e := apierror.FromError(err); apierror.Code(err) != codes.InvalidArgument || len(e.Violations) != 1 || !strings.HasPrefix(e.Violations[0].Message, `"a/b" holds "/"`) {
		t.Errorf("RolloutControl PIN a/b: %v, want InvalidArgument naming the version", err)
	}
	if r = run("pool", "pin", "workers", "2027.01.0"); r.code != ExitFailed || !strings.Contains(r.err, "not found") {
		t.Errorf("pin of a version no release has: %d\nstdout %q\nstderr %q", r.code, r.out, r.err)
	}

	// Pin; the pool's manifest as the hub shows it (both fields) applies.
	if r = run("pool", "pin", "workers", "2026.11.0"); r.code != 0 || r.out != "pool/workers pinned to 2026.11.0\n" {
		t.Fatalf("pin: %d\n%s%s", r.code, r.out, r.err)
	}
	r = run("get", "pool", "workers", "-o", "yaml")
	if r.code != 0 || !strings.Contains(r.out, "imageChannel: stable") || !strings.Contains(r.out, "imageVersion: 2026.11.0") {
		t.Fatalf("get -o yaml of the pinned pool: %d\n%s%s", r.code, r.out, r.err)
	}
	pinned := writeFile(t, t.TempDir(), "pinned.yaml", stripServerFields(t, r.out))
	if r = run("apply", "-f", pinned); r.code != 0 || r.out != "pool/workers unchanged\n" || r.err != "" {
		t.Errorf("apply of the pinned pool's manifest: %d\nstdout %q\nstderr %q", r.code, r.out, r.err)
	}
	if r = run("get", "pools"); r.code != 0 || !strings.Contains(r.out, "=2026.11.0 (stable)") {
		t.Errorf("get pools of a pinned pool: %d\n%s%s", r.code, r.out, r.err)
	}

	// The manifest from Git has no imageVersion: unpinned, with a warning.
	const unpinWarning = "Warning from hub: pool/workers: unpinned from 2026.11.0 (the manifest sets no spec.imageVersion); it follows channel stable again\n"
	r = run("apply", "-f", manifest)
	if r.code != 0 || r.out != "pool/workers configured\n" || r.err != unpinWarning {
		t.Errorf("apply without imageVersion: %d\nstdout %q\nstderr %q\nwant   %q", r.code, r.out, r.err, unpinWarning)
	}
	if p := getPool(); p.GetSpec().GetImageVersion() != "" || p.GetSpec().GetImageChannel() != "stable" {
		t.Errorf("after apply: spec %v, want unpinned on stable", p.GetSpec())
	}
	if r = run("apply", "-f", manifest); r.code != 0 || r.out != "pool/workers unchanged\n" || r.err != "" {
		t.Errorf("apply again: %d\nstdout %q\nstderr %q", r.code, r.out, r.err)
	}
}
