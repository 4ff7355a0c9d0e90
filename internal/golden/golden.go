// Package golden compares test output with golden files under a
// package's testdata/ and rewrites them when the test binary runs with
// -update (go test ./pkg -update).
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// Update is the -update flag: rewrite golden files instead of comparing.
var Update = flag.Bool("update", false, "rewrite golden files under testdata/")

// Check compares got with the file at path (relative to the package
// directory), or writes got there under -update. A missing file or a
// difference fails the test with both texts.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *Update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs (run go test -update to accept):\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}
