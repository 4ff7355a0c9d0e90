// Package netprofiles holds the NetworkProfile model and its validation:
// pure functions over the proto, with no netlink, DHCP client or system
// calls, so the hub and roostctl link it freely. Applying a profile to a
// host is netprofiles/hostnet's (observe, plan, the simulated kernel; no
// netlink), talking to the real kernel is netprofiles/hostnet/nlkernel's
// (netlink) and keeping DHCP leases is netprofiles/dhcp4's; only the agent
// links the last two (roostctl links hostnet for `roostctl netprofile
// plan`).
//
// # Model
//
// The versioned model is the proto (roostv1.NetworkProfileSpec, apiVersion
// roost.io/v1); this package adds views over it (Interfaces, Iface,
// DHCP4Interfaces) rather than a second set of structs, and renders
// /etc/resolv.conf for a profile (ResolvConf).
//
// # Validation
//
// Validate is the one source of truth for the rules: resource.Validate
// delegates to it, so `roostctl apply` (client side), the hub (at the
// edge) and the agent (before it applies) check the same things, with
// field paths such as "spec.bonds[0].members[1]" that resource turns into
// YAML lines.
package netprofiles
