package boot

import (
	"context"
	"fmt"
	"strings"
)

// CheckUnits returns nil when every named unit is "active", and otherwise
// one error naming each unit that is not with its state (or the error
// reading it), in the order given, e.g. `units not active: kubelet.service
// (activating), foo.service (failed)`.
func CheckUnits(ctx context.Context, u Units, names []string) error {
	var bad []string
	for _, n := range names {
		st, err := u.ActiveState(ctx, n)
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s (%v)", n, err))
		case st != "active":
			bad = append(bad, fmt.Sprintf("%s (%s)", n, st))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("units not active: %s", strings.Join(bad, ", "))
}
