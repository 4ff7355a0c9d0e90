// Package hostnet applies a NetworkProfile (package netprofiles) to a
// host's network stack: it observes the host, plans the changes and
// carries them out, idempotently, through a Netlink. It speaks its own
// types of links, addresses and routes (kernel.go) and links no netlink
// library: the real kernel is package hostnet/nlkernel, over
// github.com/vishvananda/netlink, which only the agent links. The agent
// links hostnet to apply profiles, and roostctl for `roostctl netprofile
// plan`; the hub never does.
//
// # Apply
//
// Observe reads a host's links, addresses and routes into a HostState;
// Plan diffs a profile against one and returns ordered Actions that print
// like a terraform plan ("+ create bond bond0 (802.3ad, miimon 100)",
// "~ set mtu 9000 on eth0", "- delete bridge br-old"); Apply observes,
// plans, executes, observes again and returns the observed state and the
// drift. Plan runs every action against a SimKernel, an in-memory
// simulation of the host's kernel (simkernel.go), so later steps see what
// earlier ones did, and a kernel refusal shows up at plan time.
// PlanForInventory plans against a server's reported inventory instead.
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
// bonding and VLANs, so bonds and VLANs run against the SimKernel in unit
// tests (transitions_test.go), through nlkernel's conversions in its unit
// tests, and against a real kernel in the QEMU end-to-end tests, while bridges, veth, addresses, routes and MTUs also
// run against the real kernel in network namespaces (netns_test.go, as
// root), as does the DHCP client of netprofiles/dhcp4
// (dhcp4_netns_test.go). Leased addresses have a finite lifetime, which
// Plan keeps on dhcp4 interfaces.
package hostnet
