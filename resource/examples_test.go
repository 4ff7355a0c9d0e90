package resource

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
	"gopkg.in/yaml.v3"
)

const examplesDir = "../examples"

// TestExamples decodes (for apply) and validates every example manifest:
// none may have a problem, and every appliable kind has its own example.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	kindsSeen := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := Decode(data, filepath.Base(f), ForApply())
		if err != nil {
			t.Errorf("%s: decode:\n%v", f, err)
			continue
		}
		if len(ms) == 0 {
			t.Errorf("%s: no objects", f)
		}
		if ds := ValidateManifests(ms); len(ds) > 0 {
			t.Errorf("%s: validate:\n%s", f, FormatViolations(ds))
		}
		if filepath.Base(f) != "all.yaml" {
			for _, m := range ms {
				kindsSeen[m.Kind.Name] = true
			}
		}
	}
	for _, k := range Kinds() {
		if k.Appliable && !kindsSeen[k.Name] {
			t.Errorf("no example file for appliable kind %s", k.Name)
		}
	}
}

// TestExamplesAll checks that all.yaml holds exactly the objects of the
// single-kind examples, referenced kinds first; not the ReleaseFeed and
// Channel (a feed starts polling its URL once applied).
func TestExamplesAll(t *testing.T) {
	decode := func(name string) []*Manifest {
		data, err := os.ReadFile(filepath.Join(examplesDir, name))
		if err != nil {
			t.Fatal(err)
		}
		ms, err := Decode(data, name, ForApply())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return ms
	}
	all := decode("all.yaml")
	order := []string{"cluster.yaml", "machineclass.yaml", "networkprofile.yaml", "maintenancewindow.yaml", "pool.yaml"}
	if len(all) != len(order) {
		t.Fatalf("all.yaml has %d objects, want %d", len(all), len(order))
	}
	for i, name := range order {
		one := decode(name)
		if len(one) != 1 {
			t.Fatalf("%s has %d objects, want 1", name, len(one))
		}
		if !proto.Equal(one[0].Object, all[i].Object) {
			t.Errorf("all.yaml object %d differs from %s", i, name)
		}
	}
}

// TestRBACExample checks the Kubernetes RBAC example for the hub's
// credentials: YAML documents with apiVersion, kind and a name each, shown
// verbatim in docs/operations.md.
func TestRBACExample(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(examplesDir, "kubernetes", "roost-hub-rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	kinds := map[string]bool{}
	for {
		var doc struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Metadata   struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if doc.APIVersion == "" || doc.Kind == "" || doc.Metadata.Name == "" {
			t.Errorf("a document lacks apiVersion, kind or metadata.name: %+v", doc)
		}
		kinds[doc.Kind] = true
	}
	for _, k := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Secret"} {
		if !kinds[k] {
			t.Errorf("no %s", k)
		}
	}
	docs, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(docs, data) {
		t.Error("docs/operations.md does not show examples/kubernetes/roost-hub-rbac.yaml as it is: copy it there")
	}
}
