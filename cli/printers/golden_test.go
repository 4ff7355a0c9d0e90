package printers

import (
	"testing"

	"github.com/roostfleet/roost/internal/golden"
)

// checkGolden compares got with the golden file at path, or rewrites the
// file with -update (internal/golden).
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	golden.Check(t, path, got)
}
