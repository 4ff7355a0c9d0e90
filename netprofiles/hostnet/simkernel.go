package hostnet

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/roostfleet/roost/netprofiles"
)

// SimKernel is an in-memory Netlink, a simulation of the kernel's network
// stack: Plan runs every action on one at run time (and tests use one as
// the host). It keeps links, addresses and routes and enforces the kernel
// rules that decide whether an apply's order is right:
//
//   - names are unique and legal; a VLAN needs its parent, and its MTU is
//     at most the parent's; deleting a link deletes its VLANs and releases
//     its bond members or bridge ports;
//   - a link is renamed only while down;
//   - a bond enslaves a link only while the link is down (EPERM otherwise,
//     as bonding says "can not be enslaved while up"), then opens it and
//     gives it the bond's MTU; a released member gets its MTU back and goes
//     down; a bond's MTU is its members' MTU;
//   - a bridge without an MTU set by hand follows its smallest port;
//   - a VLAN comes up only when its parent is up, and goes down with it;
//   - addresses on an up link bring their prefix routes (proto kernel);
//     setting a link down drops every route through it;
//   - a route needs its link up and its gateway on a subnet of that link;
//     IPv6 routes get metric 1024 when none is given, as in the kernel.
//
// String renders the host as sorted text (see HostState.String).
type SimKernel struct {
	mu     sync.Mutex
	links  map[int]*simLink
	next   int
	addrs  []simAddr
	routes []simRoute
	// Calls counts the calls that changed something.
	Calls int
}

type simLink struct {
	idx              int
	name, typ, alias string
	mtu, origMTU     int
	up               bool
	master, parent   int
	mac              net.HardwareAddr
	driver, pci      string
	bond             *BondState
	primaryIdx       int
	vlanID           int
	vlanFiltering    bool
	stp              bool
	mtuByUser        bool
	peer             int
}

type simAddr struct {
	link    int
	prefix  netip.Prefix
	dynamic bool
}

type simRoute struct {
	link     int
	dst      netip.Prefix
	gw       netip.Addr
	metric   int
	table    int
	protocol int
}

// NewSimKernel returns an empty host.
func NewSimKernel() *SimKernel { return &SimKernel{links: map[int]*simLink{}, next: 1} }

// AddDevice adds a physical NIC (netlink type "device"), down, with the
// given MAC, driver and PCI address (either may be empty).
func (f *SimKernel) AddDevice(name, mac, driver, pci string, mtu int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	hw, _ := net.ParseMAC(mac)
	if mtu == 0 {
		mtu = 1500
	}
	f.add(&simLink{name: name, typ: "device", mtu: mtu, mac: hw, driver: driver, pci: pci})
}

// SimKernelFromState returns a SimKernel holding the given host state.
func SimKernelFromState(h HostState) *SimKernel {
	f := NewSimKernel()
	idx := map[string]int{}
	for _, l := range h.Links {
		hw, _ := net.ParseMAC(l.MAC)
		fl := &simLink{name: l.Name, typ: l.Type, alias: l.Alias, mtu: l.MTU, origMTU: l.MTU, up: l.Up, mac: hw,
			driver: l.Driver, pci: l.PCIPath, mtuByUser: true}
		if l.Bond != nil {
			b := *l.Bond
			fl.bond = &b
		}
		if l.Vlan != nil {
			fl.vlanID = l.Vlan.ID
		}
		if l.Bridge != nil {
			fl.vlanFiltering, fl.stp = l.Bridge.VlanFiltering, l.Bridge.STP
		}
		f.add(fl)
		idx[l.Name] = fl.idx
	}
	for _, l := range h.Links {
		fl := f.links[idx[l.Name]]
		fl.master = idx[l.Master]
		if l.Vlan != nil {
			fl.parent = idx[l.Vlan.Link]
		}
		if l.Bond != nil {
			fl.primaryIdx = idx[l.Bond.Primary]
		}
		for _, a := range l.Addrs {
			f.addrs = append(f.addrs, simAddr{link: fl.idx, prefix: a.Prefix, dynamic: a.Dynamic})
		}
	}
	for _, r := range h.Routes {
		if i, ok := idx[r.Dev]; ok {
			f.routes = append(f.routes, simRoute{link: i, dst: r.Dst, gw: r.Gw, metric: r.Metric, table: r.Table, protocol: r.Protocol})
		}
	}
	return f
}

// String renders the host as sorted text.
func (f *SimKernel) String() string {
	h, err := Observe(f)
	if err != nil {
		return "error: " + err.Error()
	}
	return h.String()
}

// DeviceInfo implements DeviceInfo.
func (f *SimKernel) DeviceInfo(name string) (driver, pciPath string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.byName(name); l != nil {
		return l.driver, l.pci
	}
	return "", ""
}

func (f *SimKernel) add(l *simLink) {
	l.idx = f.next
	f.next++
	if l.mac == nil && l.typ != "bond" && l.typ != "vlan" && l.typ != "bridge" {
		l.mac = net.HardwareAddr{0x02, 0, 0, 0, byte(l.idx >> 8), byte(l.idx)}
	}
	f.links[l.idx] = l
}

func (f *SimKernel) byName(name string) *simLink {
	for _, l := range f.links {
		if l.name == name {
			return l
		}
	}
	return nil
}

func errno(e unix.Errno, format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), e)
}

// find resolves a Link argument by index, else by name.
func (f *SimKernel) find(link Link) (*simLink, error) {
	if link == nil || link.Attrs() == nil {
		return nil, errno(unix.ENODEV, "no link")
	}
	a := link.Attrs()
	if l, ok := f.links[a.Index]; ok && a.Index != 0 {
		return l, nil
	}
	if l := f.byName(a.Name); l != nil && a.Index == 0 {
		return l, nil
	}
	return nil, errno(unix.ENODEV, "link %q (index %d) not found", a.Name, a.Index)
}

func (f *SimKernel) object(l *simLink) Link {
	a := LinkAttrs{Index: l.idx, Name: l.name, MTU: l.mtu, Up: l.up, MasterIndex: l.master, ParentIndex: l.parent,
		Alias: l.alias, HardwareAddr: l.mac}
	switch l.typ {
	case "device":
		a.PermHWAddr = l.mac
		return &Device{LinkAttrs: a}
	case "bond":
		// The kernel reports every option; lacp_rate is slow by default.
		return &Bond{LinkAttrs: a, Mode: l.bond.Mode, Miimon: l.bond.Miimon, Primary: l.primaryIdx,
			LacpRate: or(l.bond.LacpRate, "slow"), XmitHashPolicy: l.bond.XmitHashPolicy}
	case "vlan":
		return &Vlan{LinkAttrs: a, VlanID: l.vlanID}
	case "bridge":
		vf := l.vlanFiltering
		return &Bridge{LinkAttrs: a, VlanFiltering: &vf}
	case "veth":
		return &Veth{LinkAttrs: a}
	case "dummy":
		return &Dummy{LinkAttrs: a}
	}
	return &GenericLink{LinkAttrs: a, LinkType: l.typ}
}

func (f *SimKernel) sorted() []*simLink {
	ls := make([]*simLink, 0, len(f.links))
	for _, l := range f.links {
		ls = append(ls, l)
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].idx < ls[j].idx })
	return ls
}

// BridgeSTP implements BridgeSTP.
func (f *SimKernel) BridgeSTP(name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.byName(name)
	if l == nil || l.typ != "bridge" {
		return false, errno(unix.ENODEV, "no bridge %q", name)
	}
	return l.stp, nil
}

// SetBridgeSTP implements BridgeSTP.
func (f *SimKernel) SetBridgeSTP(name string, on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.byName(name)
	if l == nil || l.typ != "bridge" {
		return errno(unix.ENODEV, "no bridge %q", name)
	}
	f.Calls++
	l.stp = on
	return nil
}

// LinkList implements Netlink.
func (f *SimKernel) LinkList() ([]Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Link
	for _, l := range f.sorted() {
		out = append(out, f.object(l))
	}
	return out, nil
}

// LinkByName implements Netlink.
func (f *SimKernel) LinkByName(name string) (Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.byName(name); l != nil {
		return f.object(l), nil
	}
	return nil, fmt.Errorf("link %q: %w", name, ErrLinkNotFound)
}

// LinkAdd implements Netlink for bonds, VLANs, bridges, veth pairs and
// dummies.
func (f *SimKernel) LinkAdd(link Link) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls++
	a := link.Attrs()
	if _, _, ok := netprofiles.CheckIfName(a.Name); !ok {
		return errno(unix.EINVAL, "invalid name %q", a.Name)
	}
	if f.byName(a.Name) != nil {
		return errno(unix.EEXIST, "link %q exists", a.Name)
	}
	if a.Alias != "" {
		return errno(unix.EOPNOTSUPP, "the kernel takes no alias when it creates a link")
	}
	l := &simLink{name: a.Name, typ: link.Type(), mtu: 1500}
	switch x := link.(type) {
	case *Bond:
		l.bond = &BondState{Mode: x.Mode, Miimon: max(x.Miimon, 0)}
		if x.Mode == "802.3ad" {
			l.bond.LacpRate = or(x.LacpRate, "slow")
		}
		l.bond.XmitHashPolicy = or(x.XmitHashPolicy, "layer2")
		if x.Primary > 0 {
			p, ok := f.links[x.Primary]
			if !ok {
				return errno(unix.ENODEV, "primary %d not found", x.Primary)
			}
			l.primaryIdx = p.idx
			l.bond.Primary = p.name
		}
	case *Vlan:
		p, ok := f.links[a.ParentIndex]
		if !ok {
			return errno(unix.ENODEV, "VLAN parent %d not found", a.ParentIndex)
		}
		if x.VlanID < 1 || x.VlanID > 4094 {
			return errno(unix.ERANGE, "VLAN id %d", x.VlanID)
		}
		for _, o := range f.links {
			if o.typ == "vlan" && o.parent == p.idx && o.vlanID == x.VlanID {
				return errno(unix.EEXIST, "VLAN %d on %s exists", x.VlanID, p.name)
			}
		}
		l.parent, l.vlanID, l.mtu = p.idx, x.VlanID, p.mtu
	case *Bridge:
		l.vlanFiltering = x.VlanFiltering != nil && *x.VlanFiltering
	case *Veth:
		if f.byName(x.PeerName) != nil || x.PeerName == a.Name {
			return errno(unix.EEXIST, "link %q exists", x.PeerName)
		}
	case *Dummy:
	default:
		return errno(unix.EOPNOTSUPP, "fake cannot create a %s", link.Type())
	}
	if a.MTU > 0 {
		if p := f.links[l.parent]; l.typ == "vlan" && a.MTU > p.mtu {
			return errno(unix.ERANGE, "VLAN MTU %d above its parent's %d", a.MTU, p.mtu)
		}
		l.mtu = a.MTU
		if l.typ == "bridge" {
			l.mtuByUser = false // rtnl_create_link sets dev->mtu directly
		}
	}
	f.add(l)
	if x, ok := link.(*Veth); ok {
		p := &simLink{name: x.PeerName, typ: "veth", mtu: l.mtu, peer: l.idx}
		f.add(p)
		l.peer = p.idx
	}
	return nil
}

// LinkDel implements Netlink.
func (f *SimKernel) LinkDel(link Link) error {
	return f.onLink(link, func(l *simLink) error {
		if l.typ == "device" {
			return errno(unix.EOPNOTSUPP, "cannot delete physical link %s", l.name)
		}
		f.del(l)
		return nil
	})
}

func (f *SimKernel) del(l *simLink) {
	for _, o := range f.sorted() {
		if o.typ == "vlan" && o.parent == l.idx {
			f.del(o)
		}
		if o.master == l.idx {
			f.release(o)
		}
	}
	f.dropRoutes(l.idx, func(simRoute) bool { return true })
	f.addrs = slices.DeleteFunc(f.addrs, func(a simAddr) bool { return a.link == l.idx })
	delete(f.links, l.idx)
	if p, ok := f.links[l.peer]; ok && l.peer != 0 {
		p.peer = 0
		f.del(p)
	}
	for _, o := range f.links {
		if o.primaryIdx == l.idx {
			o.primaryIdx, o.bond.Primary = 0, ""
		}
	}
}

func (f *SimKernel) release(l *simLink) {
	m := f.links[l.master]
	l.master = 0
	if m != nil && m.typ == "bond" {
		l.mtu = l.origMTU
		f.down(l)
	}
	if m != nil && m.typ == "bridge" {
		f.autoMTU(m)
	}
}

// autoMTU makes a bridge without a hand-set MTU follow its smallest port.
func (f *SimKernel) autoMTU(br *simLink) {
	if br.mtuByUser {
		return
	}
	low := 0
	for _, o := range f.links {
		if o.master == br.idx && (low == 0 || o.mtu < low) {
			low = o.mtu
		}
	}
	if low != 0 {
		br.mtu = low
	}
}

// LinkSetMaster implements Netlink.
func (f *SimKernel) LinkSetMaster(link, master Link) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.find(link)
	if err != nil {
		return err
	}
	m, err := f.find(master)
	if err != nil {
		return err
	}
	f.Calls++
	switch {
	case m.typ != "bond" && m.typ != "bridge":
		return errno(unix.EOPNOTSUPP, "%s is a %s, not a bond or bridge", m.name, m.typ)
	case l.idx == m.idx || l.typ == "bridge":
		return errno(unix.ELOOP, "cannot enslave %s to %s", l.name, m.name)
	case l.master == m.idx:
		return nil
	}
	if l.master != 0 {
		f.release(l)
	}
	if m.typ == "bond" {
		if l.up {
			return errno(unix.EPERM, "%s: device can not be enslaved while up", l.name)
		}
		l.origMTU = l.mtu
		l.mtu = m.mtu
		l.master = m.idx
		f.setUp(l)
		return nil
	}
	l.master = m.idx
	f.autoMTU(m)
	return nil
}

// LinkSetNoMaster implements Netlink.
func (f *SimKernel) LinkSetNoMaster(link Link) error {
	return f.onLink(link, func(l *simLink) error {
		if l.master != 0 {
			f.release(l)
		}
		return nil
	})
}

// LinkSetUp implements Netlink.
func (f *SimKernel) LinkSetUp(link Link) error {
	return f.onLink(link, func(l *simLink) error {
		if p := f.links[l.parent]; l.typ == "vlan" && !p.up {
			return errno(unix.ENETDOWN, "%s: parent %s is down", l.name, p.name)
		}
		f.setUp(l)
		return nil
	})
}

func (f *SimKernel) setUp(l *simLink) {
	if l.up {
		return
	}
	l.up = true
	for _, a := range f.addrs {
		if a.link == l.idx {
			f.prefixRoute(a)
		}
	}
}

func (f *SimKernel) prefixRoute(a simAddr) {
	if (a.prefix.Addr().Is4() && a.prefix.Bits() == 32) || (a.prefix.Addr().Is6() && a.prefix.Bits() == 128) {
		return
	}
	r := simRoute{link: a.link, dst: a.prefix.Masked(), table: mainTable, protocol: unix.RTPROT_KERNEL}
	if a.prefix.Addr().Is6() {
		r.metric = 256
	}
	for _, o := range f.routes {
		if o == r {
			return
		}
	}
	f.routes = append(f.routes, r)
}

// LinkSetDown implements Netlink.
func (f *SimKernel) LinkSetDown(link Link) error {
	return f.onLink(link, func(l *simLink) error {
		f.down(l)
		return nil
	})
}

func (f *SimKernel) down(l *simLink) {
	if !l.up {
		return
	}
	l.up = false
	f.dropRoutes(l.idx, func(simRoute) bool { return true })
	for _, o := range f.links {
		if o.typ == "vlan" && o.parent == l.idx {
			f.down(o)
		}
	}
}

func (f *SimKernel) dropRoutes(link int, match func(simRoute) bool) {
	f.routes = slices.DeleteFunc(f.routes, func(r simRoute) bool { return r.link == link && match(r) })
}

// LinkSetMTU implements Netlink.
func (f *SimKernel) LinkSetMTU(link Link, mtu int) error {
	return f.onLink(link, func(l *simLink) error {
		if mtu < 68 || mtu > 65535 {
			return errno(unix.EINVAL, "MTU %d", mtu)
		}
		if p := f.links[l.parent]; l.typ == "vlan" && mtu > p.mtu {
			return errno(unix.ERANGE, "VLAN MTU %d above its parent's %d", mtu, p.mtu)
		}
		f.setMTU(l, mtu)
		if l.typ == "bridge" {
			l.mtuByUser = true
		}
		return nil
	})
}

func (f *SimKernel) setMTU(l *simLink, mtu int) {
	l.mtu = mtu
	for _, o := range f.sorted() {
		if o.typ == "vlan" && o.parent == l.idx && o.mtu > mtu {
			f.setMTU(o, mtu)
		}
		if l.typ == "bond" && o.master == l.idx {
			f.setMTU(o, mtu)
		}
	}
	if m := f.links[l.master]; m != nil && m.typ == "bridge" {
		f.autoMTU(m)
	}
}

// LinkSetName implements Netlink.
func (f *SimKernel) LinkSetName(link Link, name string) error {
	return f.onLink(link, func(l *simLink) error {
		if l.up {
			return errno(unix.EBUSY, "%s is up", l.name)
		}
		if _, _, ok := netprofiles.CheckIfName(name); !ok {
			return errno(unix.EINVAL, "invalid name %q", name)
		}
		if o := f.byName(name); o != nil && o != l {
			return errno(unix.EEXIST, "link %q exists", name)
		}
		l.name = name
		return nil
	})
}

// LinkSetAlias implements Netlink.
func (f *SimKernel) LinkSetAlias(link Link, alias string) error {
	return f.onLink(link, func(l *simLink) error {
		l.alias = alias
		return nil
	})
}

// AddrList implements Netlink.
func (f *SimKernel) AddrList(link Link, family Family) ([]Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	idx := 0
	if link != nil {
		l, err := f.find(link)
		if err != nil {
			return nil, err
		}
		idx = l.idx
	}
	var out []Addr
	for _, a := range f.addrs {
		if (idx != 0 && a.link != idx) || !familyOK(family, a.prefix.Addr()) {
			continue
		}
		na := Addr{Prefix: a.prefix, LinkIndex: a.link, ValidLft: InfiniteLifetime, PreferedLft: InfiniteLifetime}
		if a.dynamic {
			na.ValidLft, na.PreferedLft = 3600, 3600
		}
		out = append(out, na)
	}
	return out, nil
}

func familyOK(family Family, a netip.Addr) bool {
	return family == FamilyAll || (family == FamilyV4) == a.Is4()
}

// AddrAdd implements Netlink.
func (f *SimKernel) AddrAdd(link Link, addr *Addr) error {
	return f.onLink(link, func(l *simLink) error {
		p, ok := addrPrefix(addr)
		if !ok {
			return errno(unix.EINVAL, "bad address")
		}
		for _, a := range f.addrs {
			if a.link == l.idx && a.prefix == p {
				return errno(unix.EEXIST, "address %s exists on %s", p, l.name)
			}
		}
		a := simAddr{link: l.idx, prefix: p, dynamic: addr.Dynamic()}
		f.addrs = append(f.addrs, a)
		if l.up {
			f.prefixRoute(a)
		}
		return nil
	})
}

// AddrReplace implements Netlink: it adds the address, or updates its
// lifetime when the link has it.
func (f *SimKernel) AddrReplace(link Link, addr *Addr) error {
	f.mu.Lock()
	l, err := f.find(link)
	if err != nil {
		f.mu.Unlock()
		return err
	}
	p, ok := addrPrefix(addr)
	if !ok {
		f.mu.Unlock()
		return errno(unix.EINVAL, "bad address")
	}
	for i, a := range f.addrs {
		if a.link == l.idx && a.prefix == p {
			f.Calls++
			f.addrs[i].dynamic = addr.Dynamic()
			f.mu.Unlock()
			return nil
		}
	}
	f.mu.Unlock()
	return f.AddrAdd(link, addr)
}

// AddrDel implements Netlink.
func (f *SimKernel) AddrDel(link Link, addr *Addr) error {
	return f.onLink(link, func(l *simLink) error {
		p, ok := addrPrefix(addr)
		if !ok {
			return errno(unix.EINVAL, "bad address")
		}
		n := len(f.addrs)
		f.addrs = slices.DeleteFunc(f.addrs, func(a simAddr) bool { return a.link == l.idx && a.prefix == p })
		if len(f.addrs) == n {
			return errno(unix.EADDRNOTAVAIL, "address %s not on %s", p, l.name)
		}
		still := slices.ContainsFunc(f.addrs, func(a simAddr) bool { return a.link == l.idx && a.prefix.Masked() == p.Masked() })
		if !still {
			f.dropRoutes(l.idx, func(r simRoute) bool { return r.protocol == unix.RTPROT_KERNEL && r.dst == p.Masked() })
		}
		return nil
	})
}

// RouteList implements Netlink.
func (f *SimKernel) RouteList(family Family, table int) ([]Route, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Route
	for _, r := range f.routes {
		if !familyOK(family, r.dst.Addr()) || (table != unix.RT_TABLE_UNSPEC && table != r.table) {
			continue
		}
		nr := Route{LinkIndex: r.link, Dst: r.dst, Gw: r.gw, Metric: r.metric, Table: r.table, Protocol: r.protocol,
			Type: unix.RTN_UNICAST, Family: FamilyV4}
		if r.dst.Addr().Is6() {
			nr.Family = FamilyV6
		}
		out = append(out, nr)
	}
	return out, nil
}

// addrPrefix returns an address's prefix when it is a valid one.
func addrPrefix(a *Addr) (netip.Prefix, bool) {
	if a == nil || !a.Prefix.IsValid() {
		return netip.Prefix{}, false
	}
	p := netip.PrefixFrom(a.Prefix.Addr().Unmap(), a.Prefix.Bits())
	return p, p.IsValid()
}

func (f *SimKernel) routeOf(r *Route) (simRoute, error) {
	fr := simRoute{link: r.LinkIndex, metric: r.Metric, table: r.Table, protocol: r.Protocol}
	if fr.table == 0 {
		fr.table = mainTable
	}
	fr.gw = r.Gw.Unmap()
	switch {
	case r.Dst.IsValid():
		fr.dst = r.Dst
	case fr.gw.Is6() || r.Family == FamilyV6:
		fr.dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	default:
		fr.dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	if fr.dst.Addr().Is6() && fr.metric == 0 {
		fr.metric = 1024
	}
	return fr, nil
}

// RouteAdd implements Netlink.
func (f *SimKernel) RouteAdd(r *Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls++
	fr, err := f.routeOf(r)
	if err != nil {
		return err
	}
	l, ok := f.links[fr.link]
	if !ok {
		return errno(unix.ENODEV, "route device %d", fr.link)
	}
	if !l.up {
		return errno(unix.ENETDOWN, "nexthop device %s is not up", l.name)
	}
	if fr.dst != fr.dst.Masked() {
		return errno(unix.EINVAL, "invalid prefix %s", fr.dst)
	}
	if fr.gw.IsValid() && !fr.gw.IsLinkLocalUnicast() {
		onLink := slices.ContainsFunc(f.routes, func(o simRoute) bool {
			return o.link == l.idx && o.dst.Bits() > 0 && !o.gw.IsValid() && o.dst.Contains(fr.gw)
		})
		if !onLink {
			return errno(unix.ENETUNREACH, "gateway %s is not on a subnet of %s", fr.gw, l.name)
		}
	}
	for _, o := range f.routes {
		if o.dst == fr.dst && o.table == fr.table && o.metric == fr.metric {
			return errno(unix.EEXIST, "route %s table %d metric %d exists", fr.dst, fr.table, fr.metric)
		}
	}
	f.routes = append(f.routes, fr)
	return nil
}

// RouteDel implements Netlink.
func (f *SimKernel) RouteDel(r *Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls++
	fr, err := f.routeOf(r)
	if err != nil {
		return err
	}
	n := len(f.routes)
	f.routes = slices.DeleteFunc(f.routes, func(o simRoute) bool {
		return o.dst == fr.dst && o.table == fr.table && o.metric == fr.metric &&
			(fr.link == 0 || o.link == fr.link) && (!fr.gw.IsValid() || o.gw == fr.gw)
	})
	if len(f.routes) == n {
		return errno(unix.ESRCH, "no route %s", fr.dst)
	}
	return nil
}

var _ Netlink = (*SimKernel)(nil)

// onLink runs fn on the fake link matching link, under the lock, counting
// one call; it fails as the kernel would when the link does not exist.
func (f *SimKernel) onLink(link Link, fn func(l *simLink) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.find(link)
	if err != nil {
		return err
	}
	f.Calls++
	return fn(l)
}
