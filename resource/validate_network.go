package resource

import (
	"math"

	"github.com/roostfleet/roost/netprofiles"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// BondModes are the bonding modes a NetworkProfile bond may use.
var BondModes = netprofiles.BondModes

// MaxBondMiimon is the largest bond miimon, the MII link monitoring
// interval in milliseconds: the bonding driver keeps it in a C int and
// refuses larger values (INT_MAX, about 24.8 days).
const MaxBondMiimon = math.MaxInt32

// validateNetworkProfile delegates to netprofiles.Validate, the one source
// of truth for NetworkProfile rules (the same code the agent runs before it
// applies a profile), and adds the bounds the kernel sets on values the
// agent hands it: a bond's miimon is at most MaxBondMiimon.
func validateNetworkProfile(e *violations, s *roostv1.NetworkProfileSpec) {
	e.list = append(e.list, netprofiles.Validate(s)...)
	for i, b := range s.GetBonds() {
		if m := b.GetMiimon(); m > MaxBondMiimon {
			e.addf(joinIndex("spec.bonds", i)+".miimon", "it is in milliseconds: 100 checks the links ten times a second",
				"must be at most %d (the kernel's limit, in milliseconds), got %d", MaxBondMiimon, m)
		}
	}
}
