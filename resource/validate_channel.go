package resource

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// DefaultChannelSoak is a Channel's spec.soak when unset.
const DefaultChannelSoak = 7 * 24 * time.Hour

// ChannelSoak is a Channel's soak: spec.soak, or DefaultChannelSoak when
// unset.
func ChannelSoak(s *roostv1.ChannelSpec) time.Duration {
	if d := s.GetSoak(); d != nil {
		return d.AsDuration()
	}
	return DefaultChannelSoak
}

// ChannelMinMachines is a Channel's spec.minMachines, 1 when unset.
func ChannelMinMachines(s *roostv1.ChannelSpec) int32 {
	if s == nil || s.MinMachines == nil {
		return 1
	}
	return s.GetMinMachines()
}

// validateChannel checks a Channel (named for the channel it fills):
// follows is another channel (a DNS label), soak ≥ 0, minMachines ≥ 0.
func validateChannel(e *violations, name string, s *roostv1.ChannelSpec) {
	switch f := s.GetFollows(); {
	case f == "":
		e.add("spec.follows", "is required", `name the channel releases are promoted from, e.g. "beta"`)
	case len(validation.IsDNS1123Label(f)) > 0:
		e.addf("spec.follows", `use a name such as "beta"`, "invalid channel %q: %s", f, strings.Join(validation.IsDNS1123Label(f), "; "))
	case f == name:
		e.addf("spec.follows", "name another channel, e.g. \"beta\"", "channel %q cannot follow itself", f)
	}
	checkDuration(e, "spec.soak", s.GetSoak())
	if s.GetMinMachines() < 0 {
		e.add("spec.minMachines", fmt.Sprintf("must be ≥ 0, got %d", s.GetMinMachines()), "0 promotes on the soak alone")
	}
}
