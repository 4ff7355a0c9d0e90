package netprofiles

import (
	"strconv"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// The versioned model is the proto itself (roostv1.NetworkProfileSpec,
// apiVersion roost.io/v1): this package adds views and helpers over it
// rather than a parallel set of structs, so the wire form, validation and
// apply can never disagree about a field.

// Kind is the kind of an interface a profile declares.
type Kind string

// The kinds of interface a profile declares.
const (
	KindLink   Kind = "link"
	KindBond   Kind = "bond"
	KindVlan   Kind = "VLAN"
	KindBridge Kind = "bridge"
)

// BondModes are the bonding modes a bond may use.
var BondModes = []string{"802.3ad", "active-backup", "balance-xor", "balance-tlb", "balance-alb", "balance-rr", "broadcast"}

// XmitHashPolicies are the transmit hash policies a bond may use.
var XmitHashPolicies = []string{"layer2", "layer2+3", "layer3+4", "encap2+3", "encap3+4"}

// MaxIfNameLen is the longest Linux interface name (IFNAMSIZ - 1).
const MaxIfNameLen = 15

// Iface is a kind-independent view of one interface of a profile: what
// every kind shares (name, MTU, addressing, routes), with the typed
// message it came from.
type Iface struct {
	Kind Kind
	Name string
	// Path is its field path, e.g. "spec.bonds[0]".
	Path      string
	MTU       uint32
	Addresses []string
	DHCP4     bool
	DHCP6     bool
	Routes    []*roostv1.Route

	// Exactly one of these is set, by Kind.
	Link   *roostv1.Link
	Bond   *roostv1.Bond
	Vlan   *roostv1.Vlan
	Bridge *roostv1.Bridge
}

// Interfaces lists a profile's interfaces: links, bonds, VLANs, bridges,
// each in the profile's order.
func Interfaces(s *roostv1.NetworkProfileSpec) []Iface {
	var out []Iface
	for i, l := range s.GetLinks() {
		out = append(out, Iface{Kind: KindLink, Name: l.GetName(), Path: index("spec.links", i), MTU: l.GetMtu(),
			Addresses: l.GetAddresses(), DHCP4: l.GetDhcp4(), DHCP6: l.GetDhcp6(), Routes: l.GetRoutes(), Link: l})
	}
	for i, b := range s.GetBonds() {
		out = append(out, Iface{Kind: KindBond, Name: b.GetName(), Path: index("spec.bonds", i), MTU: b.GetMtu(),
			Addresses: b.GetAddresses(), DHCP4: b.GetDhcp4(), DHCP6: b.GetDhcp6(), Routes: b.GetRoutes(), Bond: b})
	}
	for i, v := range s.GetVlans() {
		out = append(out, Iface{Kind: KindVlan, Name: v.GetName(), Path: index("spec.vlans", i), MTU: v.GetMtu(),
			Addresses: v.GetAddresses(), DHCP4: v.GetDhcp4(), DHCP6: v.GetDhcp6(), Routes: v.GetRoutes(), Vlan: v})
	}
	for i, br := range s.GetBridges() {
		out = append(out, Iface{Kind: KindBridge, Name: br.GetName(), Path: index("spec.bridges", i), MTU: br.GetMtu(),
			Addresses: br.GetAddresses(), DHCP4: br.GetDhcp4(), DHCP6: br.GetDhcp6(), Routes: br.GetRoutes(), Bridge: br})
	}
	return out
}

// index appends a list index to a field path.
func index(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }

// DHCP4Interfaces lists the profile's interfaces with dhcp4, in profile
// order: the agent runs a DHCP client (netprofiles/dhcp4) for each after
// applying the profile.
func DHCP4Interfaces(spec *roostv1.NetworkProfileSpec) []string {
	var out []string
	for _, it := range Interfaces(spec) {
		if it.DHCP4 {
			out = append(out, it.Name)
		}
	}
	return out
}
