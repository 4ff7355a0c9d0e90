package resource

import (
	"github.com/roostfleet/roost/netprofiles"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// BondModes are the bonding modes a NetworkProfile bond may use.
var BondModes = netprofiles.BondModes

// validateNetworkProfile delegates to netprofiles.Validate, the one source
// of truth for NetworkProfile rules (the same code the agent runs before it
// applies a profile).
func validateNetworkProfile(e *violations, s *roostv1.NetworkProfileSpec) {
	e.list = append(e.list, netprofiles.Validate(s)...)
}
