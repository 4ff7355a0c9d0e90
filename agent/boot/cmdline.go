package boot

import (
	"fmt"
	"os"
	"strings"
)

// BootedRevision returns N from the roost.revision=N argument of a kernel
// command line (the content of /proc/cmdline), which Stage puts in every
// entry's options. The last roost.revision argument counts, as for most
// kernel parameters. It returns 0 when the argument is absent or its value
// is not a decimal revision ≥ 1 (no sign, no leading zero, no quotes).
func BootedRevision(cmdline string) int64 {
	var n int64
	for _, f := range strings.Fields(cmdline) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k != RevisionArg {
			continue
		}
		n, _ = parseRevision(v)
	}
	return n
}

// ReadBootedRevision is BootedRevision of /proc/cmdline. It fails only
// when /proc/cmdline cannot be read.
func ReadBootedRevision() (int64, error) {
	b, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return 0, fmt.Errorf("booted revision: %w", err)
	}
	return BootedRevision(string(b)), nil
}
