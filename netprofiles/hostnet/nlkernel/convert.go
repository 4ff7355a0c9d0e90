package nlkernel

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/roostfleet/roost/netprofiles/hostnet"
)

// toLink converts a hostnet link to netlink's. Options a hostnet link
// leaves empty (bond options, VLAN protocol, bridge VLAN filtering) stay
// unset, so the kernel's defaults apply.
func toLink(l hostnet.Link) netlink.Link {
	h := l.Attrs()
	a := netlink.LinkAttrs{Index: h.Index, Name: h.Name, MTU: h.MTU, MasterIndex: h.MasterIndex, ParentIndex: h.ParentIndex,
		Alias: h.Alias, HardwareAddr: h.HardwareAddr, PermHWAddr: h.PermHWAddr}
	if h.Up {
		a.Flags |= net.FlagUp
	}
	switch x := l.(type) {
	case *hostnet.Device:
		return &netlink.Device{LinkAttrs: a}
	case *hostnet.Bond:
		b := netlink.NewLinkBond(a)
		if x.Mode != "" {
			b.Mode = netlink.StringToBondMode(x.Mode)
		}
		if x.Miimon != 0 {
			b.Miimon = x.Miimon
		}
		if x.LacpRate != "" {
			b.LacpRate = netlink.StringToBondLacpRate(x.LacpRate)
		}
		if x.XmitHashPolicy != "" {
			b.XmitHashPolicy = netlink.StringToBondXmitHashPolicy(x.XmitHashPolicy)
		}
		if x.Primary > 0 {
			b.Primary = x.Primary
		}
		return b
	case *hostnet.Vlan:
		return &netlink.Vlan{LinkAttrs: a, VlanId: x.VlanID, VlanProtocol: netlink.VlanProtocol(x.Protocol)}
	case *hostnet.Bridge:
		return &netlink.Bridge{LinkAttrs: a, VlanFiltering: x.VlanFiltering}
	case *hostnet.Veth:
		return &netlink.Veth{LinkAttrs: a, PeerName: x.PeerName}
	case *hostnet.Dummy:
		return &netlink.Dummy{LinkAttrs: a}
	}
	return &netlink.GenericLink{LinkAttrs: a, LinkType: l.Type()}
}

// fromLink converts a link the kernel listed to hostnet's. Bond options
// the kernel did not report, or that netlink cannot name, are left empty.
func fromLink(l netlink.Link) hostnet.Link {
	n := l.Attrs()
	a := hostnet.LinkAttrs{Index: n.Index, Name: n.Name, MTU: n.MTU, Up: n.Flags&net.FlagUp != 0,
		MasterIndex: n.MasterIndex, ParentIndex: n.ParentIndex, Alias: n.Alias,
		HardwareAddr: n.HardwareAddr, PermHWAddr: n.PermHWAddr}
	switch x := l.(type) {
	case *netlink.Device:
		return &hostnet.Device{LinkAttrs: a}
	case *netlink.Bond:
		b := &hostnet.Bond{LinkAttrs: a, Mode: x.Mode.String(), Miimon: max(x.Miimon, 0), Primary: max(x.Primary, 0)}
		if x.LacpRate >= 0 && x.LacpRate < netlink.BOND_LACP_RATE_UNKNOWN {
			b.LacpRate = x.LacpRate.String()
		}
		if x.XmitHashPolicy >= 0 && x.XmitHashPolicy < netlink.BOND_XMIT_HASH_POLICY_UNKNOWN {
			b.XmitHashPolicy = x.XmitHashPolicy.String()
		}
		return b
	case *netlink.Vlan:
		return &hostnet.Vlan{LinkAttrs: a, VlanID: x.VlanId, Protocol: int(x.VlanProtocol)}
	case *netlink.Bridge:
		return &hostnet.Bridge{LinkAttrs: a, VlanFiltering: x.VlanFiltering}
	case *netlink.Veth:
		return &hostnet.Veth{LinkAttrs: a, PeerName: x.PeerName}
	case *netlink.Dummy:
		return &hostnet.Dummy{LinkAttrs: a}
	}
	return &hostnet.GenericLink{LinkAttrs: a, LinkType: l.Type()}
}

// toAddr converts an address to netlink's.
func toAddr(a *hostnet.Addr) *netlink.Addr {
	na := &netlink.Addr{LinkIndex: a.LinkIndex, Flags: a.Flags, ValidLft: a.ValidLft, PreferedLft: a.PreferedLft}
	if a.Prefix.IsValid() {
		na.IPNet = ipNet(a.Prefix)
	}
	return na
}

// fromAddr converts an address the kernel listed; its Prefix is invalid
// when the kernel's cannot be read.
func fromAddr(a netlink.Addr) hostnet.Addr {
	ha := hostnet.Addr{LinkIndex: a.LinkIndex, Flags: a.Flags, ValidLft: a.ValidLft, PreferedLft: a.PreferedLft}
	if a.IPNet != nil {
		ha.Prefix, _ = prefixOf(a.IPNet)
	}
	return ha
}

// toRoute converts a route to netlink's: a /0 Dst is sent as such
// (RTA_DST 0.0.0.0 or ::), the zero Prefix not at all.
func toRoute(r *hostnet.Route) *netlink.Route {
	nr := &netlink.Route{LinkIndex: r.LinkIndex, Priority: r.Metric, Table: r.Table, Protocol: netlink.RouteProtocol(r.Protocol),
		Scope: netlink.Scope(r.Scope), Type: r.Type, Family: int(r.Family)}
	if r.Dst.IsValid() {
		nr.Dst = ipNet(r.Dst)
	}
	if r.Gw.IsValid() {
		nr.Gw = net.IP(r.Gw.AsSlice())
	}
	return nr
}

// fromRoute converts a route the kernel listed; a route without RTA_DST
// is a default route of its family. ok is false when the destination
// cannot be read.
func fromRoute(r netlink.Route) (hostnet.Route, bool) {
	hr := hostnet.Route{LinkIndex: r.LinkIndex, Metric: r.Priority, Table: r.Table, Protocol: int(r.Protocol),
		Scope: int(r.Scope), Type: r.Type, Family: hostnet.Family(r.Family)}
	switch {
	case r.Dst != nil:
		p, ok := prefixOf(r.Dst)
		if !ok {
			return hr, false
		}
		hr.Dst = p
	case r.Family == netlink.FAMILY_V6:
		hr.Dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	default:
		hr.Dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	if r.Gw != nil {
		hr.Gw, _ = netip.AddrFromSlice(r.Gw)
		hr.Gw = hr.Gw.Unmap()
	}
	return hr, true
}

// prefixOf turns a *net.IPNet into a prefix, keeping the host bits (an
// interface address); IPv4 in 16-byte form becomes an IPv4 prefix.
func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	ip, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ip = ip.Unmap()
	ones, bits := n.Mask.Size()
	if bits == 0 {
		return netip.Prefix{}, false
	}
	if ip.Is4() && bits == 128 {
		ones -= 96
	}
	return netip.PrefixFrom(ip, ones), true
}

// ipNet turns a prefix into the *net.IPNet netlink wants, keeping the
// host bits.
func ipNet(p netip.Prefix) *net.IPNet {
	bits := 32
	if p.Addr().Is6() {
		bits = 128
	}
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), bits)}
}
