// Package nlkernel is hostnet.Netlink over the real kernel: Kernel
// speaks netlink (github.com/vishvananda/netlink) in one network
// namespace, converting hostnet's link, address and route types to and
// from the library's, and reads drivers and PCI addresses from sysfs. Only
// the agent links it (and so netlink); the planner, its simulated kernel
// and roostctl do not.
package nlkernel

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/roostfleet/roost/netprofiles/hostnet"
)

var (
	_ hostnet.DeviceInfo = (*Kernel)(nil)
	_ hostnet.BridgeSTP  = (*Kernel)(nil)
)

// Kernel is the real hostnet.Netlink: a netlink.Handle bound to one
// network namespace, plus sysfs look-ups of drivers and PCI addresses.
type Kernel struct {
	h *netlink.Handle
	// SysfsRoot is where /sys/class/net is read (driver, PCI address);
	// "/sys" by default. sysfs shows the namespace it was mounted in, so in
	// a test namespace the look-ups usually find nothing, which is right
	// for the veth and bridges tests use.
	SysfsRoot string

	// sock is a route socket in the namespace, for the requests
	// netlink.Handle does not offer (bridge STP); nil means the calling
	// thread's namespace.
	sock *nl.SocketHandle
}

// New opens a netlink handle in the namespace ns; pass
// netns.None() for the caller's own namespace. It speaks NETLINK_ROUTE
// only (links, addresses, routes): the library's default also opens XFRM
// and NETFILTER sockets, which fail on kernels without those modules.
func New(ns netns.NsHandle) (*Kernel, error) {
	var h *netlink.Handle
	var err error
	var sock *nl.NetlinkSocket
	if ns.IsOpen() {
		if h, err = netlink.NewHandleAt(ns, unix.NETLINK_ROUTE); err != nil {
			return nil, err
		}
		if sock, err = nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE); err != nil {
			h.Close()
			return nil, err
		}
	} else if h, err = netlink.NewHandle(unix.NETLINK_ROUTE); err != nil {
		return nil, err
	}
	k := &Kernel{h: h, SysfsRoot: "/sys"}
	if sock != nil {
		k.sock = &nl.SocketHandle{Socket: sock}
	}
	return k, nil
}

// Close closes the handle and the socket.
func (k *Kernel) Close() {
	k.h.Close()
	if k.sock != nil {
		k.sock.Close()
	}
}

func (k *Kernel) request(proto, flags int) *nl.NetlinkRequest {
	req := nl.NewNetlinkRequest(proto, flags)
	if k.sock != nil {
		req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: k.sock}
	}
	return req
}

// Handle returns the netlink handle, for requests Kernel does not make.
func (k *Kernel) Handle() *netlink.Handle { return k.h }

// SetBridgeSTP turns a bridge's spanning tree protocol on or off
// (IFLA_BR_STP_STATE).
func (k *Kernel) SetBridgeSTP(name string, on bool) error {
	l, err := k.h.LinkByName(name)
	if err != nil {
		return err
	}
	req := k.request(unix.RTM_NEWLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(l.Attrs().Index)
	req.AddData(msg)
	info := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
	info.AddRtAttr(nl.IFLA_INFO_KIND, nl.NonZeroTerminated("bridge"))
	data := info.AddRtAttr(nl.IFLA_INFO_DATA, nil)
	v := uint32(0)
	if on {
		v = 1
	}
	data.AddRtAttr(nl.IFLA_BR_STP_STATE, nl.Uint32Attr(v))
	req.AddData(info)
	_, err = req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// BridgeSTP reads whether a bridge runs the spanning tree protocol.
func (k *Kernel) BridgeSTP(name string) (bool, error) {
	l, err := k.h.LinkByName(name)
	if err != nil {
		return false, err
	}
	req := k.request(unix.RTM_GETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(l.Attrs().Index)
	req.AddData(msg)
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWLINK)
	if err != nil {
		return false, err
	}
	for _, m := range msgs {
		if len(m) < unix.SizeofIfInfomsg {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[unix.SizeofIfInfomsg:])
		if err != nil {
			return false, err
		}
		if v, ok := nested(attrs, unix.IFLA_LINKINFO, nl.IFLA_INFO_DATA, nl.IFLA_BR_STP_STATE); ok && len(v) >= 4 {
			return nl.NativeEndian().Uint32(v[:4]) != 0, nil
		}
	}
	return false, fmt.Errorf("%s: no bridge STP state in the kernel's answer", name)
}

// nested finds the value at a path of nested route attributes.
func nested(attrs []syscall.NetlinkRouteAttr, path ...int) ([]byte, bool) {
	for _, a := range attrs {
		if int(a.Attr.Type&^unix.NLA_F_NESTED) != path[0] {
			continue
		}
		if len(path) == 1 {
			return a.Value, true
		}
		inner, err := nl.ParseRouteAttr(a.Value)
		if err != nil {
			return nil, false
		}
		return nested(inner, path[1:]...)
	}
	return nil, false
}

// DeviceInfo reads the driver and PCI address of a link from sysfs.
func (k *Kernel) DeviceInfo(name string) (driver, pciPath string) {
	dev := filepath.Join(k.SysfsRoot, "class/net", name, "device")
	if t, err := os.Readlink(filepath.Join(dev, "driver")); err == nil {
		driver = filepath.Base(t)
	}
	// The PCI function is the device itself (e.g. ixgbe) or one of its
	// parents (virtio_net sits on a virtio bus below the PCI device).
	if t, err := filepath.EvalSymlinks(dev); err == nil {
		for range 3 {
			if sub, err := os.Readlink(filepath.Join(t, "subsystem")); err == nil && filepath.Base(sub) == "pci" {
				pciPath = strings.ToLower(filepath.Base(t))
				break
			}
			t = filepath.Dir(t)
		}
	}
	return driver, pciPath
}
