package resource

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkManifestFile runs what `roostctl apply` runs on a file: Decode for
// apply, then ValidateManifests on what decoded. It returns every problem.
func checkManifestFile(t *testing.T, path string) Diagnostics {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := Decode(data, filepath.Base(path), ForApply())
	var ds Diagnostics
	if err != nil && !errors.As(err, &ds) {
		t.Fatalf("Decode returned %T, want Diagnostics: %v", err, err)
	}
	return append(ds, ValidateManifests(ms)...)
}

// TestBadManifests checks that every manifest under testdata/bad is
// refused with exactly the messages of its .golden file (-update rewrites
// them).
func TestBadManifests(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 24 {
		t.Fatalf("only %d bad manifests, want at least 24", len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			ds := checkManifestFile(t, f)
			if len(ds) == 0 {
				t.Fatalf("%s: no violation reported", f)
			}
			for _, d := range ds {
				if d.Line == 0 {
					t.Errorf("%s: violation without a line: %s", f, d)
				}
			}
			checkGolden(t, strings.TrimSuffix(f, ".yaml")+".golden", []byte(FormatViolations(ds)))
		})
	}
}
