package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/resource"
)

func TestReadInputsDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "b.yaml", "b")
	writeFile(t, dir, "a.yml", "a")
	writeFile(t, dir, "c.JSON", "c")
	writeFile(t, dir, "notes.txt", "skip me")
	writeFile(t, dir, "sub/d.yaml", "not recursive")
	single := writeFile(t, t.TempDir(), "z.yaml", "z")

	o := &options{Streams: Streams{In: strings.NewReader("stdin")}}
	got, err := o.readInputs([]string{single, dir, "-"})
	if err != nil {
		t.Fatal(err)
	}
	var sources, data []string
	for _, in := range got {
		sources = append(sources, filepath.Base(in.source))
		data = append(data, string(in.data))
	}
	if strings.Join(sources, " ") != "z.yaml a.yml b.yaml c.JSON "+stdinSource {
		t.Errorf("sources = %v", sources)
	}
	if strings.Join(data, " ") != "z a b c stdin" {
		t.Errorf("data = %v", data)
	}
}

func TestReadInputsErrors(t *testing.T) {
	empty := t.TempDir()
	writeFile(t, empty, "README", "x")
	o := &options{Streams: Streams{In: strings.NewReader("")}}
	_, err := o.readInputs([]string{"-", "-", filepath.Join(empty, "nope.yaml"), empty})
	if exitCode(err) != ExitUsage {
		t.Fatalf("exit %d for %v", exitCode(err), err)
	}
	for _, want := range []string{"more than once", "nope.yaml: no such file", "holds no *.yaml"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestLocateViolations(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.yaml", clusterYAML)
	b := writeFile(t, dir, "b.yaml", strings.Replace(clusterYAML, "prod", "dev", 1)+"---\n"+poolYAML)
	o := &options{}
	inputs, err := o.readInputs([]string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	ms, diags := decodeInputs(inputs, resource.ForApply())
	if len(diags) > 0 || len(ms) != 3 {
		t.Fatalf("%d manifests, diagnostics %v", len(ms), diags)
	}
	located, rest := locateViolations(ms, []apierror.Violation{
		{Field: "objects[2].spec.imageChannel", Message: `no release in channel "stable"`}, // after spec.cluster in the file
		{Field: "objects[2].spec.cluster", Message: `Cluster "prod" does not exist`, Hint: "apply it first"},
		{Field: "objects[1].spec.drainTimeout", Message: "is required"}, // not written: its parent
		{Field: "objects[0]", Message: "whole object"},
		{Field: "objects[7].spec", Message: "out of range"},
		{Field: "labelSelector", Message: "not about an object"},
	})
	// In the order of the files and lines.
	want := []string{
		a + `:1:1: Cluster "prod": whole object`,
		b + `:5:1: Cluster "dev": spec.drainTimeout: is required`,
		b + `:16:3: Pool "workers": spec.cluster: Cluster "prod" does not exist (apply it first)`,
		b + `:17:3: Pool "workers": spec.imageChannel: no release in channel "stable"`,
	}
	if len(located) != len(want) {
		t.Fatalf("located %v", located)
	}
	for i, d := range located {
		if d.String() != want[i] {
			t.Errorf("located[%d]:\n got %s\nwant %s", i, d.String(), want[i])
		}
	}
	if len(rest) != 2 || rest[0].Field != "objects[7].spec" || rest[1].Field != "labelSelector" {
		t.Errorf("rest = %v", rest)
	}
}

func TestApplyInvalidManifestsSendsNothing(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	dir := t.TempDir()
	writeFile(t, dir, "1-cluster.yaml", strings.Replace(clusterYAML, "https://10.0.0.1:6443", "http://10.0.0.1:6443", 1))
	writeFile(t, dir, "2-pool.yaml", strings.Replace(poolYAML, "replicas: 3", "replicas: 3\n  replicaz: 4", 1))
	writeFile(t, dir, "3-server.yaml", "apiVersion: roost.io/v1\nkind: Server\nmetadata:\n  name: s1\n")
	r := runCLI(t, "", "--config", config, "apply", "-f", dir)
	if r.code != ExitUsage {
		t.Fatalf("exit %d, want 2; stderr:\n%s", r.code, r.err)
	}
	if len(f.applies) != 0 {
		t.Errorf("apply sent %d requests despite invalid manifests", len(f.applies))
	}
	for _, want := range []string{
		"error: 3 problems in the manifests; nothing was sent to the hub:",
		filepath.Join(dir, "1-cluster.yaml") + ":6:3: ",
		"spec.apiEndpoint",
		filepath.Join(dir, "2-pool.yaml") + ":11:3: ",
		"replicaz",
		filepath.Join(dir, "3-server.yaml") + ":",
	} {
		if !strings.Contains(r.err, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.err)
		}
	}
	if r.out != "" {
		t.Errorf("stdout: %q", r.out)
	}
}

func TestApplyEmptyManifests(t *testing.T) {
	p := writeFile(t, t.TempDir(), "empty.yaml", "# nothing\n---\n")
	r := runCLI(t, "", "--config", "/nonexistent", "apply", "-f", p)
	if r.code != ExitUsage || !strings.Contains(r.err, "hold no objects") {
		t.Errorf("exit %d, stderr %q", r.code, r.err)
	}
}
