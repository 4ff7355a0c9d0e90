package nlkernel

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/roostfleet/roost/netprofiles/hostnet"
)

var _ hostnet.Netlink = (*Kernel)(nil)

// LinkList implements hostnet.Netlink.
func (k *Kernel) LinkList() ([]hostnet.Link, error) {
	ls, err := k.h.LinkList()
	if err != nil {
		return nil, err
	}
	out := make([]hostnet.Link, len(ls))
	for i, l := range ls {
		out[i] = fromLink(l)
	}
	return out, nil
}

// LinkByName implements hostnet.Netlink; a missing link's error wraps
// hostnet.ErrLinkNotFound.
func (k *Kernel) LinkByName(name string) (hostnet.Link, error) {
	l, err := k.h.LinkByName(name)
	if err != nil {
		if errors.As(err, new(netlink.LinkNotFoundError)) {
			err = fmt.Errorf("%w: %w", hostnet.ErrLinkNotFound, err)
		}
		return nil, err
	}
	return fromLink(l), nil
}

// LinkAdd implements hostnet.Netlink.
func (k *Kernel) LinkAdd(link hostnet.Link) error { return k.h.LinkAdd(toLink(link)) }

// LinkDel implements hostnet.Netlink.
func (k *Kernel) LinkDel(link hostnet.Link) error { return k.h.LinkDel(toLink(link)) }

// LinkSetMaster implements hostnet.Netlink.
func (k *Kernel) LinkSetMaster(link, master hostnet.Link) error {
	return k.h.LinkSetMaster(toLink(link), toLink(master))
}

// LinkSetNoMaster implements hostnet.Netlink.
func (k *Kernel) LinkSetNoMaster(link hostnet.Link) error { return k.h.LinkSetNoMaster(toLink(link)) }

// LinkSetUp implements hostnet.Netlink.
func (k *Kernel) LinkSetUp(link hostnet.Link) error { return k.h.LinkSetUp(toLink(link)) }

// LinkSetDown implements hostnet.Netlink.
func (k *Kernel) LinkSetDown(link hostnet.Link) error { return k.h.LinkSetDown(toLink(link)) }

// LinkSetMTU implements hostnet.Netlink.
func (k *Kernel) LinkSetMTU(link hostnet.Link, mtu int) error {
	return k.h.LinkSetMTU(toLink(link), mtu)
}

// LinkSetName implements hostnet.Netlink.
func (k *Kernel) LinkSetName(link hostnet.Link, name string) error {
	return k.h.LinkSetName(toLink(link), name)
}

// LinkSetAlias implements hostnet.Netlink.
func (k *Kernel) LinkSetAlias(link hostnet.Link, alias string) error {
	return k.h.LinkSetAlias(toLink(link), alias)
}

// AddrList implements hostnet.Netlink.
func (k *Kernel) AddrList(link hostnet.Link, family hostnet.Family) ([]hostnet.Addr, error) {
	var nl netlink.Link
	if link != nil {
		nl = toLink(link)
	}
	as, err := k.h.AddrList(nl, int(family))
	if err != nil {
		return nil, err
	}
	out := make([]hostnet.Addr, len(as))
	for i, a := range as {
		out[i] = fromAddr(a)
	}
	return out, nil
}

// AddrAdd implements hostnet.Netlink.
func (k *Kernel) AddrAdd(link hostnet.Link, addr *hostnet.Addr) error {
	return k.h.AddrAdd(toLink(link), toAddr(addr))
}

// AddrDel implements hostnet.Netlink.
func (k *Kernel) AddrDel(link hostnet.Link, addr *hostnet.Addr) error {
	return k.h.AddrDel(toLink(link), toAddr(addr))
}

// AddrReplace implements hostnet.Netlink.
func (k *Kernel) AddrReplace(link hostnet.Link, addr *hostnet.Addr) error {
	return k.h.AddrReplace(toLink(link), toAddr(addr))
}

// RouteList implements hostnet.Netlink.
func (k *Kernel) RouteList(family hostnet.Family, table int) ([]hostnet.Route, error) {
	rs, err := k.h.RouteListFiltered(int(family), &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, err
	}
	out := make([]hostnet.Route, 0, len(rs))
	for _, r := range rs {
		if hr, ok := fromRoute(r); ok {
			out = append(out, hr)
		}
	}
	return out, nil
}

// RouteAdd implements hostnet.Netlink.
func (k *Kernel) RouteAdd(route *hostnet.Route) error { return k.h.RouteAdd(toRoute(route)) }

// RouteDel implements hostnet.Netlink.
func (k *Kernel) RouteDel(route *hostnet.Route) error { return k.h.RouteDel(toRoute(route)) }
