package hostnet

import (
	"net"
	"net/netip"
)

// Netlink is what hostnet asks of a host's network stack: the netlink
// requests on links, addresses and routes that Observe and the actions of
// a plan make, in hostnet's own types (Link, Addr, Route) so that the
// planner links no netlink library. Package hostnet/nlkernel implements it
// over the real kernel (github.com/vishvananda/netlink); SimKernel
// implements it in memory, with the kernel rules that matter for ordering
// (see SimKernel). Errors are the kernel's: they wrap a syscall.Errno
// (ErrLinkNotFound for a missing link).
type Netlink interface {
	// LinkList lists every link of the namespace.
	LinkList() ([]Link, error)
	// LinkByName returns the link named name, or an error wrapping
	// ErrLinkNotFound.
	LinkByName(name string) (Link, error)
	// LinkAdd creates a link: a *Bond, *Vlan, *Bridge, *Veth or *Dummy.
	LinkAdd(link Link) error
	LinkDel(link Link) error
	LinkSetMaster(link, master Link) error
	LinkSetNoMaster(link Link) error
	LinkSetUp(link Link) error
	LinkSetDown(link Link) error
	// LinkSetMTU sets the MTU, in bytes.
	LinkSetMTU(link Link, mtu int) error
	LinkSetName(link Link, name string) error
	// LinkSetAlias sets IFLA_IFALIAS.
	LinkSetAlias(link Link, alias string) error
	// AddrList lists the addresses of link (every link when nil) of a
	// family.
	AddrList(link Link, family Family) ([]Addr, error)
	AddrAdd(link Link, addr *Addr) error
	AddrDel(link Link, addr *Addr) error
	// AddrReplace adds the address, or updates it (its lifetimes) when the
	// link has it.
	AddrReplace(link Link, addr *Addr) error
	// RouteList lists the routes of a family in one routing table, or in
	// every table when table is 0 (RT_TABLE_UNSPEC).
	RouteList(family Family, table int) ([]Route, error)
	RouteAdd(route *Route) error
	RouteDel(route *Route) error
}

// DeviceInfo is implemented by a Netlink that can tell a link's kernel
// driver and PCI address (nlkernel reads them from sysfs; SimKernel keeps
// them).
type DeviceInfo interface {
	DeviceInfo(name string) (driver, pciPath string)
}

// BridgeSTP is implemented by a Netlink that reads and sets a bridge's
// spanning tree protocol (IFLA_BR_STP_STATE). nlkernel and SimKernel
// implement it.
type BridgeSTP interface {
	BridgeSTP(name string) (bool, error)
	SetBridgeSTP(name string, on bool) error
}

// LinkNotFoundError is the error of a look-up of a link that does not
// exist; ErrLinkNotFound is its value.
type LinkNotFoundError struct{}

func (LinkNotFoundError) Error() string { return "link not found" }

// ErrLinkNotFound is what LinkByName's error wraps when there is no such
// link.
var ErrLinkNotFound error = LinkNotFoundError{}

// Family is an address family (AF_*).
type Family int

// The families Netlink lists by.
const (
	FamilyAll Family = 0  // AF_UNSPEC
	FamilyV4  Family = 2  // AF_INET
	FamilyV6  Family = 10 // AF_INET6
)

// Link is a network interface: a *Device, *Bond, *Vlan, *Bridge, *Veth,
// *Dummy or *GenericLink.
type Link interface {
	Attrs() *LinkAttrs
	// Type is the kernel's link kind: "device" (a physical NIC), "bond",
	// "vlan", "bridge", "veth", "dummy", …
	Type() string
}

// LinkAttrs are the attributes every link has. A Link passed to a Netlink
// request is found by Index, or by Name when Index is 0.
type LinkAttrs struct {
	Index int
	Name  string
	MTU   int // bytes; 0 in LinkAdd means the kernel's default
	Up    bool
	// MasterIndex is the index of the bond or bridge the link is in (0:
	// none); ParentIndex that of a VLAN's parent link.
	MasterIndex, ParentIndex int
	Alias                    string // IFLA_IFALIAS
	HardwareAddr             net.HardwareAddr
	PermHWAddr               net.HardwareAddr // the permanent MAC, when the kernel knows it
}

// Attrs returns the link's attributes.
func (a *LinkAttrs) Attrs() *LinkAttrs { return a }

// Device is a physical NIC.
type Device struct{ LinkAttrs }

// Type returns "device".
func (*Device) Type() string { return "device" }

// Bond is a bonding device. Its options are in the words of the profile
// and of the kernel's sysfs ("802.3ad", "fast", "layer3+4"); an empty or
// zero option is the kernel's default (not sent when creating, unknown
// when listed).
type Bond struct {
	LinkAttrs
	Mode           string // "balance-rr", "active-backup", "802.3ad", …
	Miimon         int    // MII monitoring interval, in milliseconds
	LacpRate       string // "slow" or "fast"
	XmitHashPolicy string // "layer2", "layer3+4", …
	Primary        int    // index of the primary member; 0: none
}

// Type returns "bond".
func (*Bond) Type() string { return "bond" }

// Vlan is an 802.1Q (or 802.1ad) VLAN on its parent link (ParentIndex).
type Vlan struct {
	LinkAttrs
	VlanID int // 1–4094
	// Protocol is the tag's EtherType, 0x8100 (802.1Q) or 0x88a8
	// (802.1ad); 0 means the kernel's default, 802.1Q.
	Protocol int
}

// Type returns "vlan".
func (*Vlan) Type() string { return "vlan" }

// Bridge is a software bridge.
type Bridge struct {
	LinkAttrs
	// VlanFiltering is nil for the kernel's default: a kernel without VLAN
	// filtering refuses the attribute even when it says "off".
	VlanFiltering *bool
}

// Type returns "bridge".
func (*Bridge) Type() string { return "bridge" }

// Veth is one end of a veth pair; LinkAdd creates both ends.
type Veth struct {
	LinkAttrs
	PeerName string
}

// Type returns "veth".
func (*Veth) Type() string { return "veth" }

// Dummy is a dummy link.
type Dummy struct{ LinkAttrs }

// Type returns "dummy".
func (*Dummy) Type() string { return "dummy" }

// GenericLink is a link of any other kind, which Netlink lists but does
// not create.
type GenericLink struct {
	LinkAttrs
	LinkType string
}

// Type returns the link's kind.
func (g *GenericLink) Type() string { return g.LinkType }

// InfiniteLifetime is the lifetime of an address that does not expire, in
// Addr's ValidLft and PreferedLft.
const InfiniteLifetime = 0xffffffff

// Addr is an address of a link (RTM_NEWADDR).
type Addr struct {
	// Prefix is the address with its prefix length, host bits kept
	// (10.0.0.5/24).
	Prefix    netip.Prefix
	LinkIndex int
	// Flags are the IFA_F_* flags.
	Flags int
	// ValidLft and PreferedLft are the lifetimes, in seconds;
	// InfiniteLifetime for a static address. 0 and 0 in AddrAdd mean
	// static too.
	ValidLft, PreferedLft int
}

// Dynamic says whether the address has a finite lifetime (DHCP, SLAAC).
func (a *Addr) Dynamic() bool { return a.ValidLft > 0 && uint32(a.ValidLft) != InfiniteLifetime }

// Route is a route (RTM_NEWROUTE).
type Route struct {
	LinkIndex int
	// Dst is the destination; a /0 prefix is a default route. Listed
	// routes always have one (of their family); the zero Prefix in a
	// request means no RTA_DST.
	Dst    netip.Prefix
	Gw     netip.Addr // invalid: none
	Metric int        // RTA_PRIORITY
	Table  int        // 0 in a request means the main table
	// Protocol is rtm_protocol (RTPROT_*, or RouteProtocol for Roost's).
	Protocol int
	// Scope is rtm_scope (RT_SCOPE_*; 0 universe), Type rtm_type (RTN_*;
	// RTN_UNICAST is 1, 0 unspecified).
	Scope, Type int
	Family      Family
}
