package cli

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestApplyWhatGetPrints runs kubectl's habit against a real hub: get -o
// yaml, edit, apply. The output of get applies as it is; its
// metadata.modifyIndex makes the apply fail (exit 1, nothing applied)
// when the object changed in between; without it the apply overwrites.
func TestApplyWhatGetPrints(t *testing.T) {
	_, _, run := realHubCLI(t)
	dir := t.TempDir()
	manifest := writeFile(t, dir, "manifest.yaml", clusterYAML+"---\n"+poolYAML)
	if r := run("apply", "-f", manifest); r.code != 0 {
		t.Fatalf("apply: %d %s", r.code, r.err)
	}
	kc := laptopKubeconfig(t, dir)
	if r := run("cluster", "set-credentials", "prod", "--kubeconfig", kc, "--context", "sa@prod"); r.code != 0 {
		t.Fatalf("set-credentials: %d %s", r.code, r.err)
	}

	// What get prints, with status and hub-set metadata, applies unchanged
	// (a Cluster keeps its write-only credentials).
	for _, obj := range []string{"pool/workers", "cluster/prod"} {
		kind, name, _ := strings.Cut(obj, "/")
		r := run("get", kind, name, "-o", "yaml")
		if r.code != 0 || !strings.Contains(r.out, "modifyIndex: ") || !strings.Contains(r.out, "uid: ") ||
			(kind == "cluster" && !strings.Contains(r.out, "\nstatus:")) {
			t.Fatalf("get %s -o yaml: %d\n%s%s", obj, r.code, r.out, r.err)
		}
		got := writeFile(t, dir, "got.yaml", r.out)
		if r := run("apply", "-f", got); r.code != 0 || r.out != obj+" unchanged\n" {
			t.Errorf("apply what get %s printed: %d\n%s%s", obj, r.code, r.out, r.err)
		}
	}
	if r := run("get", "clusters", "-o", "wide"); r.code != 0 || !strings.Contains(r.out, "<set>") {
		t.Errorf("the credentials were lost: %d\n%s%s", r.code, r.out, r.err)
	}

	// Read, edit, apply: configured.
	read := run("get", "pool", "workers", "-o", "yaml").out
	edited := writeFile(t, dir, "p.yaml", strings.Replace(read, "replicas: 3", "replicas: 4", 1))
	if r := run("apply", "-f", edited); r.code != 0 || r.out != "pool/workers configured\n" {
		t.Fatalf("apply the edited pool: %d\n%s%s", r.code, r.out, r.err)
	}

	// Read, someone else changes the pool, edit, apply: refused.
	read = run("get", "pool", "workers", "-o", "yaml").out
	readIndex := regexp.MustCompile(`modifyIndex: (\d+)`).FindStringSubmatch(read)[1]
	other := writeFile(t, dir, "other.yaml", strings.Replace(poolYAML, "env: prod", "env: staging", 1))
	if r := run("apply", "-f", other); r.code != 0 || r.out != "pool/workers configured\n" {
		t.Fatalf("the concurrent apply: %d\n%s%s", r.code, r.out, r.err)
	}
	now := regexp.MustCompile(`modifyIndex: (\d+)`).FindStringSubmatch(run("get", "pool", "workers", "-o", "yaml").out)[1]
	edited = writeFile(t, dir, "p.yaml", strings.Replace(read, "replicas: 4", "replicas: 5", 1))
	line := 1 + strings.Count(read[:strings.Index(read, "modifyIndex:")], "\n")
	msg := fmt.Sprintf("modified since it was read (modifyIndex %s, now %s)", readIndex, now)
	for _, dry := range []bool{true, false} {
		args := []string{"apply", "-f", edited}
		if dry {
			args = append(args, "--dry-run")
		}
		r := run(args...)
		// The conflict is said once, where the manifest has it.
		want := fmt.Sprintf("Error from hub: an object changed since it was read; nothing was applied:\n"+
			"%s:%d:3: Pool \"workers\": metadata.modifyIndex: %s (get it again and re-apply your change, or remove metadata.modifyIndex to overwrite)\n",
			edited, line, msg)
		if r.code != ExitFailed || r.err != want || r.out != "" {
			t.Errorf("apply (dry run %t) after a concurrent change: exit %d\nstdout %q\nstderr %q\nwant   %q", dry, r.code, r.out, r.err, want)
		}
	}
	if r := run("get", "pool", "workers", "-o", "yaml"); !strings.Contains(r.out, "env: staging") || !strings.Contains(r.out, "replicas: 3") {
		t.Errorf("the refused apply changed the pool:\n%s", r.out)
	}

	// Without metadata.modifyIndex the apply overwrites the change.
	overwrite := writeFile(t, dir, "p.yaml", regexp.MustCompile(`(?m)^  modifyIndex: \d+\n`).ReplaceAllString(strings.Replace(read, "replicas: 4", "replicas: 5", 1), ""))
	if r := run("apply", "-f", overwrite); r.code != 0 || r.out != "pool/workers configured\n" {
		t.Fatalf("apply without modifyIndex: %d\n%s%s", r.code, r.out, r.err)
	}
	if r := run("get", "pool", "workers", "-o", "yaml"); !strings.Contains(r.out, "env: prod") || !strings.Contains(r.out, "replicas: 5") {
		t.Errorf("not overwritten:\n%s", r.out)
	}

	// A manifest of a Pool deleted (and created again) since it was read.
	read = run("get", "pool", "workers", "-o", "yaml").out
	if r := run("delete", "pool", "workers"); r.code != 0 {
		t.Fatalf("delete: %d %s", r.code, r.err)
	}
	got := writeFile(t, dir, "got.yaml", read)
	if r := run("apply", "-f", got); r.code != ExitFailed || !strings.Contains(r.err, `got.yaml:10:3: Pool "workers": metadata.modifyIndex: deleted since it was read (modifyIndex `) {
		t.Errorf("apply of a deleted pool's manifest: %d\n%s%s", r.code, r.out, r.err)
	}
	if r := run("apply", "-f", manifest); r.code != 0 {
		t.Fatalf("apply: %d %s", r.code, r.err)
	}
	noIndex := writeFile(t, dir, "got.yaml", regexp.MustCompile(`(?m)^  modifyIndex: \d+\n`).ReplaceAllString(read, ""))
	if r := run("apply", "-f", noIndex); r.code != ExitFailed || !strings.Contains(r.err, `got.yaml:7:3: Pool "workers": metadata.uid: deleted and created again since it was read (uid `) {
		t.Errorf("apply of a recreated pool's manifest: %d\n%s%s", r.code, r.out, r.err)
	}
}
