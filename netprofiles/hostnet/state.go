package hostnet

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// RouteProtocol marks the routes Roost installs (rtm_protocol). Roost
// deletes only routes with this protocol; routes of the kernel, of DHCP or
// of an operator are never touched.
const RouteProtocol = 201

// AliasPrefix starts the alias (IFLA_IFALIAS) of every link Roost
// creates: "roost:<profile>". Only links with it are ever deleted.
const AliasPrefix = "roost:"

// mainTable is the main routing table (RT_TABLE_MAIN).
const mainTable = 254

// HostState is what a host's network looks like: links sorted by name,
// routes sorted by their text.
type HostState struct {
	Links  []LinkState
	Routes []RouteState
}

// LinkState is one observed link.
type LinkState struct {
	Index int
	Name  string
	// Type is the netlink link type: "device" (a physical NIC), "veth",
	// "bond", "vlan", "bridge", "dummy", …
	Type    string
	MAC     string // permanent MAC when the kernel knows it, else current
	Driver  string
	PCIPath string
	MTU     int
	Up      bool
	Master  string
	Alias   string
	Bond    *BondState
	Vlan    *VlanState
	Bridge  *BridgeState
	Addrs   []AddrState
}

// BondState holds a bond's options, in the profile's words.
type BondState struct {
	Mode           string
	Miimon         int
	LacpRate       string // "" unless 802.3ad
	XmitHashPolicy string
	Primary        string
}

// VlanState holds a VLAN's id and parent.
type VlanState struct {
	ID   int
	Link string
}

// BridgeState holds a bridge's options.
type BridgeState struct {
	VlanFiltering bool
	STP           bool
}

// AddrState is one address of a link.
type AddrState struct {
	Prefix netip.Prefix
	// Dynamic is true for addresses with a finite lifetime (DHCP, SLAAC).
	Dynamic bool
}

// RouteState is one unicast route.
type RouteState struct {
	Dst      netip.Prefix
	Gw       netip.Addr
	Dev      string
	Metric   int
	Table    int
	Protocol int
}

// Owned says whether Roost created the link.
func (l *LinkState) Owned() bool { return strings.HasPrefix(l.Alias, AliasPrefix) }

// Link returns the link named name, or nil.
func (h HostState) Link(name string) *LinkState {
	for i := range h.Links {
		if h.Links[i].Name == name {
			return &h.Links[i]
		}
	}
	return nil
}

func (r RouteState) key() string {
	return fmt.Sprintf("%s|%s|%s|%d|%d", r.Dst, r.Gw, r.Dev, r.Metric, r.Table)
}

func (r RouteState) String() string {
	dst := r.Dst.String()
	if r.Dst.Bits() == 0 && r.Dst.Addr().Is4() {
		dst = "default"
	}
	s := "route " + dst
	if r.Gw.IsValid() {
		s += " via " + r.Gw.String()
	}
	s += " dev " + r.Dev
	if r.Metric != 0 {
		s += fmt.Sprintf(" metric %d", r.Metric)
	}
	if r.Table != mainTable {
		s += fmt.Sprintf(" table %d", r.Table)
	}
	return s + " proto " + protoName(r.Protocol)
}

func protoName(p int) string {
	switch p {
	case RouteProtocol:
		return "roost"
	case unix.RTPROT_KERNEL:
		return "kernel"
	case unix.RTPROT_BOOT:
		return "boot"
	case unix.RTPROT_STATIC:
		return "static"
	case unix.RTPROT_DHCP:
		return "dhcp"
	case unix.RTPROT_RA:
		return "ra"
	}
	return fmt.Sprint(p)
}

// String renders the state as sorted text, one link per line with its
// addresses indented, then the routes: the form golden files hold.
func (h HostState) String() string {
	var b strings.Builder
	for _, l := range h.Links {
		fmt.Fprintf(&b, "link %s %s mtu %d", l.Name, l.Type, l.MTU)
		if l.Up {
			b.WriteString(" up")
		} else {
			b.WriteString(" down")
		}
		if l.Master != "" {
			fmt.Fprintf(&b, " master %s", l.Master)
		}
		if l.Alias != "" {
			fmt.Fprintf(&b, " alias %q", l.Alias)
		}
		if l.MAC != "" && l.Type != "bond" && l.Type != "vlan" && l.Type != "bridge" {
			fmt.Fprintf(&b, " mac %s", l.MAC)
		}
		if l.Driver != "" {
			fmt.Fprintf(&b, " driver %s", l.Driver)
		}
		if l.PCIPath != "" {
			fmt.Fprintf(&b, " pci %s", l.PCIPath)
		}
		b.WriteString("\n")
		if s := l.Bond; s != nil {
			fmt.Fprintf(&b, "  bond %s\n", bondDesc(s))
		}
		if v := l.Vlan; v != nil {
			fmt.Fprintf(&b, "  vlan %d on %s\n", v.ID, v.Link)
		}
		if br := l.Bridge; br != nil && (br.VlanFiltering || br.STP) {
			b.WriteString("  bridge")
			if br.STP {
				b.WriteString(" stp")
			}
			if br.VlanFiltering {
				b.WriteString(" vlan-filtering")
			}
			b.WriteString("\n")
		}
		for _, a := range l.Addrs {
			fmt.Fprintf(&b, "  addr %s", a.Prefix)
			if a.Dynamic {
				b.WriteString(" dynamic")
			}
			b.WriteString("\n")
		}
	}
	for _, r := range h.Routes {
		b.WriteString(r.String())
		b.WriteString("\n")
	}
	return b.String()
}

func bondDesc(s *BondState) string {
	d := s.Mode
	if s.Miimon != 0 {
		d += fmt.Sprintf(", miimon %d", s.Miimon)
	}
	if s.LacpRate != "" {
		d += ", lacp-rate " + s.LacpRate
	}
	if s.XmitHashPolicy != "" {
		d += ", xmit-hash-policy " + s.XmitHashPolicy
	}
	if s.Primary != "" {
		d += ", primary " + s.Primary
	}
	return d
}

// Observe reads the host's links, addresses and routes (all tables but
// the local one, unicast routes only).
func Observe(nl Netlink) (HostState, error) {
	links, err := nl.LinkList()
	if err != nil {
		return HostState{}, fmt.Errorf("list links: %w", err)
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	var h HostState
	byIndex := map[int]int{}
	for _, l := range links {
		a := l.Attrs()
		ls := LinkState{Index: a.Index, Name: a.Name, Type: l.Type(), MTU: a.MTU, Up: a.Up,
			Master: names[a.MasterIndex], Alias: a.Alias}
		if len(a.PermHWAddr) > 0 {
			ls.MAC = a.PermHWAddr.String()
		} else if len(a.HardwareAddr) > 0 {
			ls.MAC = a.HardwareAddr.String()
		}
		if di, ok := nl.(DeviceInfo); ok {
			ls.Driver, ls.PCIPath = di.DeviceInfo(a.Name)
		}
		switch x := l.(type) {
		case *Bond:
			bs := &BondState{Mode: x.Mode, Miimon: max(x.Miimon, 0), Primary: names[x.Primary], XmitHashPolicy: x.XmitHashPolicy}
			if x.Mode == "802.3ad" {
				bs.LacpRate = x.LacpRate
			}
			ls.Bond = bs
		case *Vlan:
			ls.Vlan = &VlanState{ID: x.VlanID, Link: names[a.ParentIndex]}
		case *Bridge:
			ls.Bridge = &BridgeState{VlanFiltering: x.VlanFiltering != nil && *x.VlanFiltering}
			if b, ok := nl.(BridgeSTP); ok {
				if ls.Bridge.STP, err = b.BridgeSTP(a.Name); err != nil {
					return HostState{}, fmt.Errorf("bridge %s: %w", a.Name, err)
				}
			}
		}
		byIndex[a.Index] = len(h.Links)
		h.Links = append(h.Links, ls)
	}
	addrs, err := nl.AddrList(nil, FamilyAll)
	if err != nil {
		return HostState{}, fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		i, ok := byIndex[a.LinkIndex]
		if !ok || !a.Prefix.IsValid() {
			continue
		}
		h.Links[i].Addrs = append(h.Links[i].Addrs, AddrState{Prefix: a.Prefix, Dynamic: a.Dynamic()})
	}
	routes, err := nl.RouteList(FamilyAll, unix.RT_TABLE_UNSPEC)
	if err != nil {
		return HostState{}, fmt.Errorf("list routes: %w", err)
	}
	for _, r := range routes {
		if r.Table == unix.RT_TABLE_LOCAL || (r.Type != 0 && r.Type != unix.RTN_UNICAST) || r.LinkIndex == 0 || !r.Dst.IsValid() {
			continue
		}
		rs := RouteState{Dst: r.Dst, Gw: r.Gw, Dev: names[r.LinkIndex], Metric: r.Metric, Table: r.Table, Protocol: r.Protocol}
		if rs.Dst.Addr().Is6() && rs.Dst.Addr().IsMulticast() {
			continue
		}
		h.Routes = append(h.Routes, rs)
	}
	h.sort()
	return h, nil
}

func (h *HostState) sort() {
	slices.SortFunc(h.Links, func(a, b LinkState) int { return strings.Compare(a.Name, b.Name) })
	for i := range h.Links {
		slices.SortFunc(h.Links[i].Addrs, func(a, b AddrState) int { return strings.Compare(a.Prefix.String(), b.Prefix.String()) })
	}
	slices.SortFunc(h.Routes, func(a, b RouteState) int { return strings.Compare(a.String(), b.String()) })
}
