package scheduler

import (
	"strings"
	"testing"
)

func TestMachineName(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		n := MachineName("workers")
		suffix, ok := strings.CutPrefix(n, "workers-")
		if !ok || len(suffix) != 5 || strings.Trim(suffix, nameSuffixAlphabet) != "" {
			t.Fatalf("MachineName = %q", n)
		}
		seen[n] = true
	}
	if len(seen) < 95 {
		t.Errorf("only %d distinct names of 100", len(seen))
	}
}
