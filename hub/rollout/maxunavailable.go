package rollout

import (
	"strconv"
	"strings"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// MaxUnavailable resolves a Pool's rollout.maxUnavailable: a count, or a
// percentage of the Pool's Machines rounded down; at least 1 (default 1).
func MaxUnavailable(p *roostv1.Pool) int32 {
	mu := p.GetSpec().GetRollout().GetMaxUnavailable()
	n := int32(1)
	switch v := mu.GetValue().(type) {
	case *roostv1.IntOrString_IntVal:
		n = v.IntVal
	case *roostv1.IntOrString_StrVal:
		if pct, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v.StrVal), "%")); err == nil {
			n = int32(int64(p.GetStatus().GetMachines()) * int64(pct) / 100)
		}
	}
	return max(n, 1)
}
