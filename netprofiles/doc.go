// Package netprofiles holds the NetworkProfile model, its validation, and
// its idempotent apply through netlink (github.com/vishvananda/netlink).
//
// # Model
//
// The versioned model is the proto (roostv1.NetworkProfileSpec, apiVersion
// roost.io/v1); this package adds views over it (Interfaces, Iface) rather
// than a second set of structs. Validate is the one source of truth for
// the rules: resource.Validate delegates to it, so `roostctl apply`
// (client side), the hub (at the edge) and the agent (before it applies)
// check the same things, with field paths such as
// "spec.bonds[0].members[1]" that resource turns into YAML lines.
//
// # Apply
//
// Observe reads a host's links, addresses and routes into a HostState;
// Plan diffs a profile against one and returns ordered Actions that print
// like a terraform plan ("+ create bond bond0 (802.3ad, miimon 100)",
// "~ set mtu 9000 on eth0", "- delete bridge br-old"); Apply observes,
// plans, executes, observes again and returns the observed state and the
// drift. Plan runs every action against an in-memory Fake of the host, so
// later steps see what earlier ones did, and a kernel refusal shows up at
// plan time.
//
// Ownership: a link Roost creates carries the alias "roost:<profile>";
// only such links are ever deleted. Physical links are changed (renamed,
// MTU, enslaved, addresses) only when the profile names them through a
// match (MAC, name glob, driver, PCI path); a physical link Roost renames
// gets the alias "roost-was:<original name>" so its name glob still
// matches. Routes Roost adds carry protocol RouteProtocol (201); only such
// routes are deleted. Links, addresses and routes of anything else (a
// container runtime's bridge, a veth, DHCP routes) are never touched.
//
// The code path is the same for every kind of link; CI's kernel lacks
// bonding and VLANs, so bonds and VLANs run against the Fake in unit tests
// (transitions_test.go) and against a real kernel in the QEMU end-to-end
// tests, while bridges, veth, addresses, routes and MTUs also run against
// the real kernel in network namespaces (netns_test.go, as root).
//
// # DHCP
//
// DHCP4 keeps a DHCPv4 lease on one interface (github.com/insomniacslk/dhcp
// nclient4), renewing it at T1; the agent runs one per DHCP4Interfaces
// entry after Apply. Leased addresses have a finite lifetime, which Plan
// keeps on dhcp4 interfaces.
package netprofiles
