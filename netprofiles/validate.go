package netprofiles

import (
	"fmt"
	"net"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

var pciPathRE = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// Validate checks a NetworkProfile spec on its own and returns every
// problem found, with field paths in the manifest convention
// ("spec.bonds[0].members[1]"); nil means the profile is good. Each
// violation says what is wrong, with the value found, and its hint how to
// fix it. The rules:
//
//   - Interface names are legal Linux names (1–15 bytes, no '/', ':' or
//     whitespace, not "." or "..") and unique across links, bonds, VLANs
//     and bridges.
//   - Links have a match (mac, name glob, driver, pciPath), and no two links
//     match the same MAC or PCI address.
//   - Bonds have a known mode and at least one member; members are links of
//     the profile. lacpRate applies to 802.3ad only; primary to
//     active-backup, balance-tlb and balance-alb, and must be a member.
//   - VLAN ids are 1–4094, on a link, bond or bridge of the profile (not on
//     a VLAN, not on a bond member), and unique per parent.
//   - Bridge ports are links, bonds or VLANs; no interface is in two bonds or
//     bridges; the graph of parents (VLAN → link, member → bond, port →
//     bridge) has no cycle.
//   - MTUs are 0 (keep the current value) or 68–65535; a child's MTU is at
//     most its parent's: a VLAN's at most its link's, a bond's at most each
//     member's, a bridge's at most each port's (checked when both are set).
//   - Addresses are CIDRs; the same address is not given twice, and two
//     interfaces do not hold overlapping subnets (several addresses of one
//     subnet on one interface are fine).
//   - dhcp4 together with static IPv4 addresses on one interface is an
//     error: the lease and the static address would both claim the
//     interface's IPv4 identity and default route, and which one wins
//     depends on timing. Static IPv6 next to dhcp6/SLAAC is allowed, since
//     IPv6 interfaces normally carry several addresses.
//   - A bond member or bridge port carries no addresses, DHCP or routes:
//     the master receives its traffic.
//   - Routes have a destination ("default" or a CIDR without host bits), a
//     gateway of the destination's family (required for "default"),
//     reachable through the interface's static subnets when the interface
//     has static addresses of that family and no DHCP for it; at most one
//     default route per address family and routing table.
//   - DNS servers are IP addresses; search domains are domain names.
func Validate(s *roostv1.NetworkProfileSpec) []apierror.Violation {
	var e violations
	validate(&e, s)
	return e.list
}

type violations struct{ list []apierror.Violation }

func (e *violations) add(field, msg, hint string) {
	e.list = append(e.list, apierror.Violation{Field: field, Message: msg, Hint: hint})
}

func (e *violations) addf(field, hint, format string, a ...any) {
	e.add(field, fmt.Sprintf(format, a...), hint)
}

// declared is one interface that passed the name checks.
type declared struct {
	Iface
	// master is the bond or bridge that enslaves it, e.g. `bond "bond0"`.
	master     string
	masterName string
}

func validate(e *violations, s *roostv1.NetworkProfileSpec) {
	all := Interfaces(s)
	ifaces := map[string]*declared{}
	for _, it := range all {
		f := it.Path + ".name"
		if checkIfName(e, f, it.Name) {
			if prev, dup := ifaces[it.Name]; dup {
				e.addf(f, "interface names are unique across links, bonds, VLANs and bridges", "%q is already the name of %s %s", it.Name, kindWord(prev.Kind), prev.Path)
			} else {
				ifaces[it.Name] = &declared{Iface: it}
			}
		}
		if it.Kind == KindLink {
			checkMatch(e, it.Path+".match", it.Link.GetMatch())
		}
		checkL3(e, it.Path, it.MTU, it.Addresses, it.Routes)
	}

	enslave := func(field, name, by, byName string, allowed ...Kind) {
		d, ok := ifaces[name]
		switch {
		case name == "":
			e.add(field, "is empty", "name an interface of this profile")
			return
		case !ok:
			e.addf(field, "declare it under spec."+string(allowed[0])+"s", "%q is not an interface of this profile", name)
			return
		case !slices.Contains(allowed, d.Kind):
			words := make([]string, len(allowed))
			for i, k := range allowed {
				words[i] = string(k)
			}
			e.addf(field, "name a "+strings.Join(words, " or ")+" of this profile", "%q is a %s; only a %s can be here", name, d.Kind, strings.Join(words, " or "))
			return
		}
		if d.master != "" {
			e.addf(field, "an interface can belong to only one bond or bridge", "%q is already in %s", name, d.master)
			return
		}
		d.master, d.masterName = by, byName
	}
	for i, b := range s.GetBonds() {
		f := index("spec.bonds", i)
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
			enslave(index(f+".members", j), m, by, b.GetName(), KindLink)
		}
		if r := b.GetLacpRate(); r != "" {
			if r != "slow" && r != "fast" {
				e.addf(f+".lacpRate", `"slow" or "fast"`, "unknown LACP rate %q", r)
			} else if b.GetMode() != "802.3ad" {
				e.add(f+".lacpRate", "applies to mode 802.3ad only", "remove it or set mode: 802.3ad")
			}
		}
		if p := b.GetXmitHashPolicy(); p != "" && !slices.Contains(XmitHashPolicies, p) {
			e.addf(f+".xmitHashPolicy", "one of "+strings.Join(XmitHashPolicies, ", "), "unknown transmit hash policy %q", p)
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
		f := index("spec.vlans", i)
		if v.GetId() < 1 || v.GetId() > 4094 {
			e.addf(f+".id", "802.1Q VLAN ids are 1 to 4094", "must be from 1 to 4094, got %d", v.GetId())
		}
		switch parent, ok := ifaces[v.GetLink()]; {
		case v.GetLink() == "":
			e.add(f+".link", "is required", "name the link, bond or bridge that carries the VLAN")
		case !ok:
			e.addf(f+".link", "declare it under spec.links, spec.bonds or spec.bridges", "%q is not an interface of this profile", v.GetLink())
		case parent.Kind == KindVlan:
			e.addf(f+".link", "stacked VLANs are not supported", "%q is a VLAN; only a link, bond or bridge can carry a VLAN", v.GetLink())
		default:
			k := vlanKey{v.GetLink(), v.GetId()}
			if prev, dup := vlanIDs[k]; dup {
				e.addf(f+".id", "remove one, or change its id", "VLAN %d on %q is already declared at %s", v.GetId(), v.GetLink(), prev)
			} else {
				vlanIDs[k] = f
			}
		}
	}
	for i, br := range s.GetBridges() {
		f := index("spec.bridges", i)
		by := fmt.Sprintf("bridge %q", br.GetName())
		for j, p := range br.GetPorts() {
			enslave(index(f+".ports", j), p, by, br.GetName(), KindLink, KindBond, KindVlan)
		}
	}
	for i, srv := range s.GetDns().GetServers() {
		if _, err := netip.ParseAddr(srv); err != nil {
			e.addf(index("spec.dns.servers", i), `e.g. "192.0.2.53" or "2001:db8::53"`, "invalid IP address %q", srv)
		}
	}
	for i, d := range s.GetDns().GetSearch() {
		if d == "" || strings.ContainsAny(d, " \t/") {
			e.addf(index("spec.dns.search", i), `e.g. "example.com"`, "invalid search domain %q", d)
		}
	}

	// Checks across interfaces, on the interfaces that declared cleanly.
	var good []*declared
	for _, it := range all {
		if d := ifaces[it.Name]; d != nil && d.Path == it.Path {
			good = append(good, d)
		}
	}
	checkEnslaved(e, good)
	checkVlanParents(e, s, ifaces)
	checkCycles(e, s, ifaces)
	checkMTUs(e, s, ifaces)
	checkAddressing(e, good)
	checkDefaultRoutes(e, good)
	checkMatchesUnique(e, s)
}

func kindWord(k Kind) string { return string(k) }

// checkEnslaved: bond members and bridge ports carry no L3 configuration.
func checkEnslaved(e *violations, good []*declared) {
	for _, d := range good {
		if d.master == "" {
			continue
		}
		hint := fmt.Sprintf("move it to %s, which receives the traffic of its %s", d.master, memberWord(d.master))
		if len(d.Addresses) > 0 {
			e.addf(d.Path+".addresses", hint, "%q is in %s; an enslaved interface carries no addresses", d.Name, d.master)
		}
		if d.DHCP4 {
			e.addf(d.Path+".dhcp4", hint, "%q is in %s; an enslaved interface does not run DHCP", d.Name, d.master)
		}
		if d.DHCP6 {
			e.addf(d.Path+".dhcp6", hint, "%q is in %s; an enslaved interface does not run DHCPv6", d.Name, d.master)
		}
		if len(d.Routes) > 0 {
			e.addf(d.Path+".routes", hint, "%q is in %s; an enslaved interface carries no routes", d.Name, d.master)
		}
	}
}

func memberWord(master string) string {
	if strings.HasPrefix(master, "bond") {
		return "members"
	}
	return "ports"
}

// checkVlanParents: a VLAN on a bond member would never see a frame.
func checkVlanParents(e *violations, s *roostv1.NetworkProfileSpec, ifaces map[string]*declared) {
	for i, v := range s.GetVlans() {
		p := ifaces[v.GetLink()]
		if p == nil || p.Kind != KindLink || !strings.HasPrefix(p.master, "bond ") {
			continue
		}
		e.addf(index("spec.vlans", i)+".link", fmt.Sprintf("set link: %s", p.masterName),
			"%q is a member of %s, which receives all its frames", v.GetLink(), p.master)
	}
}

// checkCycles: following lower devices (VLAN → its link, bond → its
// members, bridge → its ports) never comes back to where it started.
func checkCycles(e *violations, s *roostv1.NetworkProfileSpec, ifaces map[string]*declared) {
	// up holds each interface's lower devices with the field that links them.
	type edge struct{ to, field string }
	up := map[string][]edge{}
	for i, v := range s.GetVlans() {
		if _, ok := ifaces[v.GetLink()]; ok {
			up[v.GetName()] = append(up[v.GetName()], edge{v.GetLink(), index("spec.vlans", i) + ".link"})
		}
	}
	for i, br := range s.GetBridges() {
		for j, p := range br.GetPorts() {
			if d := ifaces[p]; d != nil && d.masterName == br.GetName() {
				up[br.GetName()] = append(up[br.GetName()], edge{p, index(index("spec.bridges", i)+".ports", j)})
			}
		}
	}
	for i, b := range s.GetBonds() {
		for j, m := range b.GetMembers() {
			if d := ifaces[m]; d != nil && d.masterName == b.GetName() {
				up[b.GetName()] = append(up[b.GetName()], edge{m, index(index("spec.bonds", i)+".members", j)})
			}
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var visit func(n string)
	visit = func(n string) {
		color[n] = grey
		stack = append(stack, n)
		for _, ed := range up[n] {
			switch color[ed.to] {
			case white:
				visit(ed.to)
			case grey:
				start := slices.Index(stack, ed.to)
				cycle := append(slices.Clone(stack[start:]), ed.to)
				e.addf(ed.field, "an interface cannot be, through VLANs, bonds or bridges, its own parent: break the loop",
					"%s makes a cycle", strings.Join(cycle, " → "))
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
	}
	names := make([]string, 0, len(ifaces))
	for _, it := range Interfaces(s) {
		if d := ifaces[it.Name]; d != nil && d.Path == it.Path {
			names = append(names, it.Name)
		}
	}
	for _, n := range names {
		if color[n] == white {
			visit(n)
		}
	}
}

// checkMTUs: a child's MTU is at most its parent's (when both are set).
func checkMTUs(e *violations, s *roostv1.NetworkProfileSpec, ifaces map[string]*declared) {
	for i, v := range s.GetVlans() {
		p := ifaces[v.GetLink()]
		if p == nil || v.GetMtu() == 0 || p.MTU == 0 || v.GetMtu() <= p.MTU {
			continue
		}
		e.addf(index("spec.vlans", i)+".mtu", fmt.Sprintf("lower it to at most %d, or raise the MTU of %q", p.MTU, p.Name),
			"MTU %d is larger than the MTU %d of its link %q", v.GetMtu(), p.MTU, p.Name)
	}
	for i, b := range s.GetBonds() {
		for j, m := range b.GetMembers() {
			d := ifaces[m]
			if d == nil || d.masterName != b.GetName() || b.GetMtu() == 0 || d.MTU == 0 || d.MTU >= b.GetMtu() {
				continue
			}
			e.addf(index(index("spec.bonds", i)+".members", j), fmt.Sprintf("raise the MTU of %q to at least %d, or leave it out", m, b.GetMtu()),
				"member %q has MTU %d, smaller than the bond's MTU %d", m, d.MTU, b.GetMtu())
		}
	}
	for i, br := range s.GetBridges() {
		for j, p := range br.GetPorts() {
			d := ifaces[p]
			if d == nil || d.masterName != br.GetName() || br.GetMtu() == 0 || d.MTU == 0 || d.MTU >= br.GetMtu() {
				continue
			}
			e.addf(index(index("spec.bridges", i)+".ports", j), fmt.Sprintf("raise the MTU of %q to at least %d, or lower the bridge's", p, br.GetMtu()),
				"port %q has MTU %d, smaller than the bridge's MTU %d", p, d.MTU, br.GetMtu())
		}
	}
}

// checkAddressing: DHCP against static, gateways, duplicates and overlaps.
func checkAddressing(e *violations, good []*declared) {
	type owner struct {
		iface string
		field string
		pfx   netip.Prefix
	}
	var seen []owner
	for _, d := range good {
		var v4, v6 []netip.Prefix
		for i, a := range d.Addresses {
			p, err := netip.ParsePrefix(a)
			if err != nil {
				continue
			}
			f := index(d.Path+".addresses", i)
			if p.Addr().Is4() {
				v4 = append(v4, p)
				if d.DHCP4 {
					e.addf(f, "remove the static IPv4 addresses or set dhcp4: false; static IPv6 next to dhcp6 is fine",
						"static IPv4 address %s on an interface with dhcp4", a)
				}
			} else {
				v6 = append(v6, p)
			}
			for _, o := range seen {
				switch {
				case o.pfx.Addr() == p.Addr():
					e.addf(f, "each address belongs to one interface, once", "address %s is already given at %s", p.Addr(), o.field)
				case o.iface != d.Name && o.pfx.Overlaps(p):
					e.addf(f, "two interfaces cannot share a subnet: put both addresses on one interface, or fix the prefix length",
						"subnet %s overlaps %s on %q (%s)", p.Masked(), o.pfx.Masked(), o.iface, o.field)
				}
			}
			seen = append(seen, owner{d.Name, f, p})
		}
		for i, r := range d.Routes {
			f := index(d.Path+".routes", i)
			dst, gw, ok := ParseRoute(r)
			if !ok {
				continue
			}
			if r.GetDestination() != "default" && dst != dst.Masked() {
				e.addf(f+".destination", fmt.Sprintf("write %s", dst.Masked()), "destination %s has host bits set", r.GetDestination())
				continue
			}
			if !gw.IsValid() {
				if r.GetDestination() == "default" {
					e.add(f+".gateway", "a default route needs a gateway", `set gateway, or write "0.0.0.0/0" or "::/0" for a route through the interface alone`)
				}
				continue
			}
			if r.GetDestination() != "default" && dst.Addr().Is4() != gw.Is4() {
				e.addf(f+".gateway", "use a gateway of the same family as the destination", "gateway %s and destination %s are of different families", gw, dst)
				continue
			}
			own, dhcp, fam := v4, d.DHCP4, "IPv4"
			if gw.Is6() {
				own, dhcp, fam = v6, d.DHCP6, "IPv6"
				if gw.IsLinkLocalUnicast() {
					continue
				}
			}
			if dhcp || len(own) == 0 && d.master == "" && !dhcpAny(d) {
				// A lease brings the subnet; with no addresses at all the
				// kernel refuses the route, which the next rule says.
				if !dhcp {
					e.addf(f+".gateway", fmt.Sprintf("give %q a static %s address in the gateway's subnet, or enable DHCP for it", d.Name, fam),
						"gateway %s is unreachable: %q has no %s address", gw, d.Name, fam)
				}
				continue
			}
			if len(own) > 0 && !slices.ContainsFunc(own, func(p netip.Prefix) bool { return p.Contains(gw) }) {
				e.addf(f+".gateway", fmt.Sprintf("use a gateway inside %s", prefixList(own)),
					"gateway %s is outside the subnets of %q", gw, d.Name)
			}
		}
	}
}

func dhcpAny(d *declared) bool { return d.DHCP4 || d.DHCP6 }

func prefixList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.Masked().String()
	}
	return strings.Join(s, " or ")
}

// ParseRoute parses a route's destination and gateway; ok is false when
// either is malformed (checkL3 reported it). The default destination is
// 0.0.0.0/0 or ::/0 by the gateway's family.
func ParseRoute(r *roostv1.Route) (dst netip.Prefix, gw netip.Addr, ok bool) {
	if g := r.GetGateway(); g != "" {
		var err error
		if gw, err = netip.ParseAddr(g); err != nil {
			return dst, gw, false
		}
	}
	switch d := r.GetDestination(); d {
	case "":
		return dst, gw, false
	case "default":
		if gw.Is6() {
			return netip.PrefixFrom(netip.IPv6Unspecified(), 0), gw, true
		}
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0), gw, true
	default:
		p, err := netip.ParsePrefix(d)
		return p, gw, err == nil
	}
}

// checkDefaultRoutes: at most one default route per family and table.
func checkDefaultRoutes(e *violations, good []*declared) {
	type key struct {
		v6    bool
		table uint32
	}
	first := map[key]string{}
	for _, d := range good {
		for i, r := range d.Routes {
			dst, _, ok := ParseRoute(r)
			if !ok || dst.Bits() != 0 {
				continue
			}
			t := r.GetTable()
			if t == 0 {
				t = 254
			}
			k := key{dst.Addr().Is6(), t}
			f := index(d.Path+".routes", i)
			if prev, dup := first[k]; dup {
				fam := "IPv4"
				if k.v6 {
					fam = "IPv6"
				}
				e.addf(f+".destination", "keep one default route per family and table, or put this one in another table",
					"a second %s default route in table %d (the first is %s)", fam, t, prev)
				continue
			}
			first[k] = f
		}
	}
}

// checkMatchesUnique: two links cannot claim the same MAC or PCI address.
func checkMatchesUnique(e *violations, s *roostv1.NetworkProfileSpec) {
	macs, pcis := map[string]string{}, map[string]string{}
	for i, l := range s.GetLinks() {
		f := index("spec.links", i) + ".match"
		if hw, err := net.ParseMAC(l.GetMatch().GetMac()); err == nil {
			k := hw.String()
			if prev, dup := macs[k]; dup {
				e.addf(f+".mac", "each physical link is named once: remove one of the two links", "MAC %s is already matched by %s", k, prev)
			} else {
				macs[k] = index("spec.links", i)
			}
		}
		if p := l.GetMatch().GetPciPath(); pciPathRE.MatchString(p) {
			if prev, dup := pcis[p]; dup {
				e.addf(f+".pciPath", "each physical link is named once: remove one of the two links", "PCI address %s is already matched by %s", p, prev)
			} else {
				pcis[p] = index("spec.links", i)
			}
		}
	}
}

// CheckIfName reports whether name is a legal Linux interface name, and
// if not, why (with a hint).
func CheckIfName(name string) (msg, hint string, ok bool) {
	switch {
	case name == "":
		return "is required", `a Linux interface name such as "bond0"`, false
	case len(name) > MaxIfNameLen:
		return fmt.Sprintf("%q is %d bytes long", name, len(name)), "Linux interface names are at most 15 bytes", false
	case name == "." || name == ".." || strings.ContainsAny(name, "/: \t\r\n\v\f") || strings.ContainsRune(name, 0):
		return fmt.Sprintf("%q is not a legal interface name", name), `use letters, digits, '-', '_' and '.'`, false
	}
	return "", "", true
}

func checkIfName(e *violations, field, name string) bool {
	msg, hint, ok := CheckIfName(name)
	if !ok {
		e.add(field, msg, hint)
	}
	return ok
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
			e.addf(index(field+".addresses", i), `an address with its prefix length, e.g. "192.0.2.10/24"`, "invalid CIDR %q", a)
		}
	}
	for i, r := range routes {
		f := index(field+".routes", i)
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
