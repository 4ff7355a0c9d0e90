package resource

import (
	"fmt"
	"net"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strings"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// NetworkProfile checks here are structural only; the netprofiles package
// owns the full model.

// BondModes are the bonding modes a NetworkProfile bond may use.
var BondModes = []string{"802.3ad", "active-backup", "balance-xor", "balance-tlb", "balance-alb", "balance-rr", "broadcast"}

var (
	xmitHashPolicies = []string{"layer2", "layer2+3", "layer3+4", "encap2+3", "encap3+4"}
	pciPathRE        = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
)

// maxIfNameLen is the longest Linux interface name (IFNAMSIZ - 1).
const maxIfNameLen = 15

// netIface is one interface declared by a profile.
type netIface struct {
	kind  string // "link", "bond", "vlan", "bridge"
	field string // its path, e.g. spec.bonds[0]
}

// validateNetworkProfile: interface names are legal Linux names (at most
// 15 bytes, no '/', ':' or whitespace) and unique; links have a match;
// MTUs are 0 or 68–65535; addresses are CIDRs; routes have a destination
// ("default" or a CIDR) and an IP gateway; bonds have a known mode and
// link members; VLAN ids are 1–4094 on a link, bond or bridge; bridge ports
// are links, bonds or VLANs; no interface is in two bonds or bridges; DNS
// servers are IP addresses.
func validateNetworkProfile(e *violations, s *roostv1.NetworkProfileSpec) {
	ifaces := map[string]netIface{}
	declare := func(field, kind, name string) {
		f := field + ".name"
		if !checkIfName(e, f, name) {
			return
		}
		if prev, dup := ifaces[name]; dup {
			e.addf(f, "interface names are unique across links, bonds, VLANs and bridges", "%q is already the name of %s %s", name, prev.kind, prev.field)
			return
		}
		ifaces[name] = netIface{kind: kind, field: field}
	}
	for i, l := range s.GetLinks() {
		f := joinIndex("spec.links", i)
		declare(f, "link", l.GetName())
		checkMatch(e, f+".match", l.GetMatch())
		checkL3(e, f, l.GetMtu(), l.GetAddresses(), l.GetRoutes())
	}
	for i, b := range s.GetBonds() {
		f := joinIndex("spec.bonds", i)
		declare(f, "bond", b.GetName())
		checkL3(e, f, b.GetMtu(), b.GetAddresses(), b.GetRoutes())
	}
	for i, v := range s.GetVlans() {
		f := joinIndex("spec.vlans", i)
		declare(f, "VLAN", v.GetName())
		checkL3(e, f, v.GetMtu(), v.GetAddresses(), v.GetRoutes())
	}
	for i, br := range s.GetBridges() {
		f := joinIndex("spec.bridges", i)
		declare(f, "bridge", br.GetName())
		checkL3(e, f, br.GetMtu(), br.GetAddresses(), br.GetRoutes())
	}

	// owner records which bond or bridge enslaves an interface.
	owner := map[string]string{}
	enslave := func(field, name, by string, allowed ...string) {
		iface, ok := ifaces[name]
		switch {
		case name == "":
			e.add(field, "is empty", "name an interface of this profile")
			return
		case !ok:
			e.addf(field, "declare it under spec."+allowed[0]+"s", "%q is not an interface of this profile", name)
			return
		case !slices.Contains(allowed, iface.kind):
			e.addf(field, "", "%q is a %s; only a %s can be here", name, iface.kind, strings.Join(allowed, " or "))
			return
		}
		if prev, dup := owner[name]; dup {
			e.addf(field, "an interface can belong to only one bond or bridge", "%q is already in %s", name, prev)
			return
		}
		owner[name] = by
	}
	for i, b := range s.GetBonds() {
		f := joinIndex("spec.bonds", i)
		by := fmt.Sprintf("bond %q", b.GetName())
		switch m := b.GetMode(); {
		case m == "":
			e.add(f+".mode", "is required", "one of "+strings.Join(BondModes, ", "))
		case !slices.Contains(BondModes, m):
			e.addf(f+".mode", "one of "+strings.Join(BondModes, ", "), "unknown bond mode %q", m)
		}
		if len(b.GetMembers()) == 0 {
			e.add(f+".members", "is required", "list the links the bond aggregates")
		}
		for j, m := range b.GetMembers() {
			enslave(joinIndex(f+".members", j), m, by, "link")
		}
		if r := b.GetLacpRate(); r != "" {
			if r != "slow" && r != "fast" {
				e.addf(f+".lacpRate", `"slow" or "fast"`, "unknown LACP rate %q", r)
			} else if b.GetMode() != "802.3ad" {
				e.add(f+".lacpRate", "applies to mode 802.3ad only", "remove it or set mode: 802.3ad")
			}
		}
		if p := b.GetXmitHashPolicy(); p != "" && !slices.Contains(xmitHashPolicies, p) {
			e.addf(f+".xmitHashPolicy", "one of "+strings.Join(xmitHashPolicies, ", "), "unknown transmit hash policy %q", p)
		}
		if p := b.GetPrimary(); p != "" {
			if !slices.Contains(b.GetMembers(), p) {
				e.addf(f+".primary", "name one of the bond's members", "%q is not a member of the bond", p)
			} else if m := b.GetMode(); m != "active-backup" && m != "balance-tlb" && m != "balance-alb" {
				e.add(f+".primary", "applies to modes active-backup, balance-tlb and balance-alb only", "remove it or change the mode")
			}
		}
	}
	type vlanKey struct {
		link string
		id   uint32
	}
	vlanIDs := map[vlanKey]string{}
	for i, v := range s.GetVlans() {
		f := joinIndex("spec.vlans", i)
		if v.GetId() < 1 || v.GetId() > 4094 {
			e.addf(f+".id", "", "must be from 1 to 4094, got %d", v.GetId())
		}
		switch parent, ok := ifaces[v.GetLink()]; {
		case v.GetLink() == "":
			e.add(f+".link", "is required", "name the link, bond or bridge that carries the VLAN")
		case !ok:
			e.addf(f+".link", "declare it under spec.links, spec.bonds or spec.bridges", "%q is not an interface of this profile", v.GetLink())
		case parent.kind == "VLAN":
			e.addf(f+".link", "stacked VLANs are not supported", "%q is a VLAN; only a link, bond or bridge can carry a VLAN", v.GetLink())
		default:
			k := vlanKey{v.GetLink(), v.GetId()}
			if prev, dup := vlanIDs[k]; dup {
				e.addf(f+".id", "", "VLAN %d on %q is already declared at %s", v.GetId(), v.GetLink(), prev)
			} else {
				vlanIDs[k] = f
			}
		}
	}
	for i, br := range s.GetBridges() {
		f := joinIndex("spec.bridges", i)
		by := fmt.Sprintf("bridge %q", br.GetName())
		for j, p := range br.GetPorts() {
			enslave(joinIndex(f+".ports", j), p, by, "link", "bond", "VLAN")
		}
	}
	for i, srv := range s.GetDns().GetServers() {
		if _, err := netip.ParseAddr(srv); err != nil {
			e.addf(joinIndex("spec.dns.servers", i), `e.g. "192.0.2.53" or "2001:db8::53"`, "invalid IP address %q", srv)
		}
	}
	for i, d := range s.GetDns().GetSearch() {
		if d == "" || strings.ContainsAny(d, " \t/") {
			e.addf(joinIndex("spec.dns.search", i), `e.g. "example.com"`, "invalid search domain %q", d)
		}
	}
}

// checkIfName checks a Linux interface name; it says whether it is good.
func checkIfName(e *violations, field, name string) bool {
	switch {
	case name == "":
		e.add(field, "is required", `a Linux interface name such as "bond0"`)
	case len(name) > maxIfNameLen:
		e.addf(field, "Linux interface names are at most 15 bytes", "%q is %d bytes long", name, len(name))
	case name == "." || name == ".." || strings.ContainsAny(name, "/: \t\r\n"):
		e.addf(field, `use letters, digits, '-', '_' and '.'`, "%q is not a legal interface name", name)
	default:
		return true
	}
	return false
}

// checkMatch checks a link's match rule.
func checkMatch(e *violations, field string, m *roostv1.LinkMatch) {
	if m.GetMac() == "" && m.GetName() == "" && m.GetDriver() == "" && m.GetPciPath() == "" {
		e.add(field, "is required", "set at least one of mac, name, driver, pciPath")
		return
	}
	if mac := m.GetMac(); mac != "" {
		if hw, err := net.ParseMAC(mac); err != nil || len(hw) != 6 {
			e.addf(field+".mac", `e.g. "52:54:00:12:34:56"`, "invalid MAC address %q", mac)
		}
	}
	if g := m.GetName(); g != "" {
		if _, err := path.Match(g, ""); err != nil {
			e.addf(field+".name", `a shell glob such as "enp*s0"`, "invalid pattern %q", g)
		}
	}
	if p := m.GetPciPath(); p != "" && !pciPathRE.MatchString(p) {
		e.addf(field+".pciPath", `lower-case domain:bus:device.function, e.g. "0000:3b:00.0"`, "invalid PCI address %q", p)
	}
}

// checkL3 checks what every interface kind shares: MTU, addresses, routes.
func checkL3(e *violations, field string, mtu uint32, addrs []string, routes []*roostv1.Route) {
	if mtu != 0 && (mtu < 68 || mtu > 65535) {
		e.addf(field+".mtu", "0 keeps the current MTU", "must be from 68 to 65535, got %d", mtu)
	}
	for i, a := range addrs {
		if _, err := netip.ParsePrefix(a); err != nil {
			e.addf(joinIndex(field+".addresses", i), `an address with its prefix length, e.g. "192.0.2.10/24"`, "invalid CIDR %q", a)
		}
	}
	for i, r := range routes {
		f := joinIndex(field+".routes", i)
		switch d := r.GetDestination(); {
		case d == "":
			e.add(f+".destination", "is required", `a CIDR such as "10.0.0.0/8", or "default"`)
		case d != "default":
			if _, err := netip.ParsePrefix(d); err != nil {
				e.addf(f+".destination", `a CIDR such as "10.0.0.0/8", or "default"`, "invalid destination %q", d)
			}
		}
		if g := r.GetGateway(); g != "" {
			if _, err := netip.ParseAddr(g); err != nil {
				e.addf(f+".gateway", `e.g. "192.0.2.1"`, "invalid gateway %q", g)
			}
		}
	}
}
