package hostnet_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"github.com/vishvananda/netlink"

	"github.com/roostfleet/roost/netprofiles"
	"github.com/roostfleet/roost/netprofiles/dhcp4"
	"github.com/roostfleet/roost/netprofiles/hostnet"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// TestKernelDHCP4 runs the DHCPv4 client against a DHCP server
// (insomniacslk/dhcp's server4) on the other end of a veth pair, in a
// fresh network namespace: the lease's address and default route land on
// the link, the lease is renewed at T1, and applying a profile with dhcp4
// keeps the leased address.
func TestKernelDHCP4(t *testing.T) {
	k, h := newNetns(t)
	must(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "dh0"}, PeerName: "dh0p"}))
	must(t, h.AddrAdd(link(t, h, "dh0p"), &netlink.Addr{IPNet: mustCIDR("10.55.0.1/24")}))
	must(t, h.LinkSetUp(link(t, h, "dh0p")))
	must(t, h.LinkSetUp(link(t, h, "dh0")))

	var requests atomic.Int32
	handler := func(conn net.PacketConn, _ net.Addr, m *dhcpv4.DHCPv4) {
		var mt dhcpv4.MessageType
		switch m.MessageType() {
		case dhcpv4.MessageTypeDiscover:
			mt = dhcpv4.MessageTypeOffer
		case dhcpv4.MessageTypeRequest:
			mt = dhcpv4.MessageTypeAck
			requests.Add(1)
		default:
			return
		}
		server := net.IPv4(10, 55, 0, 1).To4()
		reply, err := dhcpv4.NewReplyFromRequest(m, dhcpv4.WithMessageType(mt), dhcpv4.WithYourIP(net.IPv4(10, 55, 0, 10)),
			dhcpv4.WithServerIP(server), dhcpv4.WithNetmask(net.CIDRMask(24, 32)), dhcpv4.WithRouter(server),
			dhcpv4.WithDNS(net.IPv4(10, 55, 0, 53)), dhcpv4.WithOption(dhcpv4.OptServerIdentifier(server)),
			dhcpv4.WithOption(dhcpv4.OptIPAddressLeaseTime(6*time.Second)), dhcpv4.WithOption(dhcpv4.OptRenewTimeValue(time.Second)))
		if err != nil {
			t.Errorf("reply: %v", err)
			return
		}
		if _, err := conn.WriteTo(reply.ToBytes(), &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}); err != nil {
			t.Errorf("send reply: %v", err)
		}
	}
	srv, err := server4.NewServer("dh0p", &net.UDPAddr{IP: net.IPv4zero, Port: dhcpv4.ServerPort}, handler)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	defer srv.Close()

	d := &dhcp4.Client{Iface: "dh0", NL: k, Metric: 100, Timeout: 2 * time.Second, Retry: 200 * time.Millisecond, Logf: t.Logf}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if d.Lease() != nil && d.Renewals() >= 1 {
				cancel()
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	// Run in this goroutine: it is the one locked into the namespace, where
	// the client must open its packet socket.
	if err := d.Run(ctx); err != nil {
		t.Fatal(err)
	}
	l := d.Lease()
	if l == nil || d.Renewals() < 1 {
		t.Fatalf("lease %+v after %d renewals, %d requests", l, d.Renewals(), requests.Load())
	}
	if l.Addr.String() != "10.55.0.10/24" || l.Router.String() != "10.55.0.1" || len(l.DNS) != 1 || l.Duration != 6*time.Second {
		t.Errorf("lease = %+v", l)
	}
	obs, err := hostnet.Observe(k)
	if err != nil {
		t.Fatal(err)
	}
	dh0 := obs.Link("dh0")
	if len(dh0.Addrs) == 0 || !strings.Contains(obs.String(), "addr 10.55.0.10/24 dynamic") {
		t.Errorf("no leased address:\n%s", obs)
	}
	if !strings.Contains(obs.String(), "route default via 10.55.0.1 dev dh0 metric 100 proto dhcp") {
		t.Errorf("no default route from the lease:\n%s", obs)
	}

	// A profile with dhcp4 on the link keeps the lease's address and route.
	spec := &roostv1.NetworkProfileSpec{Links: []*roostv1.Link{{Name: "dh0", Match: &roostv1.LinkMatch{Name: "dh0"}, Dhcp4: true}}}
	res := applyKernel(t, k, spec)
	if len(res.Actions) != 0 {
		t.Errorf("apply with dhcp4 did:\n%s", actionsText(res.Actions))
	}
	if got := netprofiles.DHCP4Interfaces(spec); len(got) != 1 || got[0] != "dh0" {
		t.Errorf("DHCP4Interfaces = %v", got)
	}
}
