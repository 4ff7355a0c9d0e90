package nlkernel

import (
	"net"
	"net/netip"
	"reflect"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/roostfleet/roost/netprofiles/hostnet"
)

// The kernel CI runs on has no bonding or VLANs, so the netns tests never
// send a bond or a VLAN through the adapter: these tests pin what it sends
// and reads for them, and for addresses and routes.

func TestToLinkBond(t *testing.T) {
	got := toLink(&hostnet.Bond{LinkAttrs: hostnet.LinkAttrs{Name: "bond0", MTU: 9000}, Mode: "802.3ad", Miimon: 100,
		LacpRate: "fast", XmitHashPolicy: "layer3+4", Primary: 3}).(*netlink.Bond)
	want := netlink.NewLinkBond(netlink.LinkAttrs{Name: "bond0", MTU: 9000})
	want.Mode, want.Miimon, want.LacpRate = netlink.BOND_MODE_802_3AD, 100, netlink.BOND_LACP_RATE_FAST
	want.XmitHashPolicy, want.Primary = netlink.BOND_XMIT_HASH_POLICY_LAYER3_4, 3
	if !reflect.DeepEqual(got, want) {
		t.Errorf("bond with options:\n got %+v\nwant %+v", got, want)
	}
	// Options left empty are not sent: the kernel's defaults apply.
	got = toLink(&hostnet.Bond{LinkAttrs: hostnet.LinkAttrs{Name: "bond1"}, Mode: "active-backup"}).(*netlink.Bond)
	want = netlink.NewLinkBond(netlink.LinkAttrs{Name: "bond1"})
	want.Mode = netlink.BOND_MODE_ACTIVE_BACKUP
	if !reflect.DeepEqual(got, want) {
		t.Errorf("bond with defaults:\n got %+v\nwant %+v", got, want)
	}
}

func TestFromLinkBond(t *testing.T) {
	nb := netlink.NewLinkBond(netlink.LinkAttrs{Index: 7, Name: "bond0", MTU: 9000, Flags: net.FlagUp, Alias: "roost:p"})
	nb.Mode, nb.Miimon, nb.LacpRate = netlink.BOND_MODE_802_3AD, 100, netlink.BOND_LACP_RATE_SLOW
	nb.XmitHashPolicy, nb.Primary = netlink.BOND_XMIT_HASH_POLICY_LAYER2_3, 2
	want := &hostnet.Bond{LinkAttrs: hostnet.LinkAttrs{Index: 7, Name: "bond0", MTU: 9000, Up: true, Alias: "roost:p"},
		Mode: "802.3ad", Miimon: 100, LacpRate: "slow", XmitHashPolicy: "layer2+3", Primary: 2}
	if got := fromLink(nb); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	// Unreported options (-1) read as unknown.
	nb = netlink.NewLinkBond(netlink.LinkAttrs{Index: 8, Name: "bond1"})
	nb.Mode = netlink.BOND_MODE_BALANCE_RR
	want = &hostnet.Bond{LinkAttrs: hostnet.LinkAttrs{Index: 8, Name: "bond1"}, Mode: "balance-rr"}
	if got := fromLink(nb); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestLinkKinds(t *testing.T) {
	on := true
	for _, l := range []hostnet.Link{
		&hostnet.Vlan{LinkAttrs: hostnet.LinkAttrs{Name: "bond0.5", ParentIndex: 7, MTU: 1500}, VlanID: 5},
		&hostnet.Vlan{LinkAttrs: hostnet.LinkAttrs{Name: "qinq", ParentIndex: 7}, VlanID: 100, Protocol: 0x88a8},
		&hostnet.Bridge{LinkAttrs: hostnet.LinkAttrs{Name: "br0"}},
		&hostnet.Bridge{LinkAttrs: hostnet.LinkAttrs{Name: "br1"}, VlanFiltering: &on},
		&hostnet.Veth{LinkAttrs: hostnet.LinkAttrs{Name: "v0"}, PeerName: "v1"},
		&hostnet.Dummy{LinkAttrs: hostnet.LinkAttrs{Name: "d0"}},
		&hostnet.Device{LinkAttrs: hostnet.LinkAttrs{Index: 2, Name: "eth0", Up: true, MasterIndex: 7,
			HardwareAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}, PermHWAddr: net.HardwareAddr{2, 0, 0, 0, 0, 2}}},
		&hostnet.GenericLink{LinkAttrs: hostnet.LinkAttrs{Name: "tun0"}, LinkType: "tuntap"},
	} {
		n := toLink(l)
		if n.Type() != l.Type() {
			t.Errorf("%s: netlink type %q, want %q", l.Attrs().Name, n.Type(), l.Type())
		}
		if got := fromLink(n); !reflect.DeepEqual(got, l) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, l)
		}
	}
	v := toLink(&hostnet.Vlan{LinkAttrs: hostnet.LinkAttrs{Name: "v"}, VlanID: 5}).(*netlink.Vlan)
	if v.VlanId != 5 || v.VlanProtocol != netlink.VLAN_PROTOCOL_UNKNOWN {
		t.Errorf("VLAN sent as id %d protocol %v, want 5 and none (802.1Q)", v.VlanId, v.VlanProtocol)
	}
	if b := toLink(&hostnet.Bridge{LinkAttrs: hostnet.LinkAttrs{Name: "br0"}}).(*netlink.Bridge); b.VlanFiltering != nil {
		t.Error("a bridge without VLAN filtering asks for the attribute")
	}
}

func TestAddrs(t *testing.T) {
	a := toAddr(&hostnet.Addr{Prefix: netip.MustParsePrefix("10.0.0.5/24"), ValidLft: 600, PreferedLft: 300})
	if a.IPNet.String() != "10.0.0.5/24" || len(a.IPNet.IP) != 4 || a.ValidLft != 600 || a.PreferedLft != 300 {
		t.Errorf("sent %+v", a)
	}
	for _, s := range []string{"10.0.0.5/24", "2001:db8::5/64"} {
		h := hostnet.Addr{Prefix: netip.MustParsePrefix(s), LinkIndex: 3, Flags: unix.IFA_F_PERMANENT,
			ValidLft: hostnet.InfiniteLifetime, PreferedLft: hostnet.InfiniteLifetime}
		n := toAddr(&h)
		n.LinkIndex = 3
		if got := fromAddr(*n); !reflect.DeepEqual(got, h) {
			t.Errorf("round trip: got %+v, want %+v", got, h)
		}
	}
	// IPv4 in 16-byte form, as the kernel may list it.
	ip, n, _ := net.ParseCIDR("192.0.2.9/24")
	n.IP = ip.To16()
	n.Mask = net.CIDRMask(120, 128)
	if got := fromAddr(netlink.Addr{IPNet: n}).Prefix; got != netip.MustParsePrefix("192.0.2.9/24") {
		t.Errorf("16-byte IPv4 read as %s", got)
	}
}

func TestRoutes(t *testing.T) {
	r := toRoute(&hostnet.Route{LinkIndex: 4, Dst: netip.MustParsePrefix("0.0.0.0/0"), Gw: netip.MustParseAddr("10.0.0.1"),
		Metric: 100, Table: 200, Protocol: hostnet.RouteProtocol, Scope: unix.RT_SCOPE_UNIVERSE, Family: hostnet.FamilyV4})
	if r.Dst == nil || r.Dst.String() != "0.0.0.0/0" || len(r.Dst.IP) != 4 || !r.Gw.Equal(net.IPv4(10, 0, 0, 1)) ||
		r.Priority != 100 || r.Table != 200 || r.Protocol != hostnet.RouteProtocol || r.Family != netlink.FAMILY_V4 || r.LinkIndex != 4 {
		t.Errorf("default route sent as %+v", r)
	}
	if r := toRoute(&hostnet.Route{LinkIndex: 4, Family: hostnet.FamilyV6}); r.Dst != nil || r.Gw != nil {
		t.Errorf("a route without destination sent as %+v", r)
	}
	r6 := toRoute(&hostnet.Route{LinkIndex: 4, Dst: netip.MustParsePrefix("2001:db8::/32"), Gw: netip.MustParseAddr("fe80::1"),
		Metric: 1024, Table: 254, Protocol: hostnet.RouteProtocol, Type: unix.RTN_UNICAST, Family: hostnet.FamilyV6})
	got, ok := fromRoute(*r6)
	want := hostnet.Route{LinkIndex: 4, Dst: netip.MustParsePrefix("2001:db8::/32"), Gw: netip.MustParseAddr("fe80::1"),
		Metric: 1024, Table: 254, Protocol: hostnet.RouteProtocol, Type: unix.RTN_UNICAST, Family: hostnet.FamilyV6}
	if !ok || got != want {
		t.Errorf("round trip: got %+v, want %+v", got, want)
	}
	// The kernel lists default routes without RTA_DST.
	for fam, dst := range map[int]string{netlink.FAMILY_V4: "0.0.0.0/0", netlink.FAMILY_V6: "::/0"} {
		got, ok := fromRoute(netlink.Route{LinkIndex: 2, Family: fam, Gw: net.ParseIP("10.0.0.1")})
		if !ok || got.Dst != netip.MustParsePrefix(dst) {
			t.Errorf("family %d default route read as %s", fam, got.Dst)
		}
	}
	if got, _ := fromRoute(netlink.Route{Family: netlink.FAMILY_V4, Gw: net.ParseIP("10.0.0.1")}); !got.Gw.Is4() {
		t.Errorf("16-byte IPv4 gateway read as %s", got.Gw)
	}
}
