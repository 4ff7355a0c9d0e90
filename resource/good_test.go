package resource

import (
	"path/filepath"
	"testing"
)

// TestGoodManifests checks that every manifest under testdata/good decodes
// for apply and validates without a problem.
func TestGoodManifests(t *testing.T) {
	files, err := filepath.Glob("testdata/good/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("only %d good manifests, want at least 3", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if ds := checkManifestFile(t, f); len(ds) > 0 {
				t.Errorf("%s:\n%s", f, FormatViolations(ds))
			}
		})
	}
}
