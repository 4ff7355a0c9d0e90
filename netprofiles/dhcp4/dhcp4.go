// Package dhcp4 keeps DHCPv4 leases on a host's interfaces for the agent:
// Client runs github.com/insomniacslk/dhcp's nclient4 on one interface of
// a NetworkProfile (netprofiles.DHCP4Interfaces lists them), puts the
// leased address and default route on the link through netlink
// (hostnet.Netlink), and renews at T1. The agent runs one Client per dhcp4
// interface after hostnet.Apply; nothing else links this package, so the
// hub and roostctl do not link the DHCP client.
package dhcp4

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"golang.org/x/sys/unix"

	"github.com/roostfleet/roost/netprofiles/hostnet"
)

// Lease is a DHCPv4 lease as installed on an interface.
type Lease struct {
	Addr     netip.Prefix
	Router   netip.Addr // invalid when the server gave none
	DNS      []netip.Addr
	Server   netip.Addr
	Duration time.Duration // lease time
	Renew    time.Duration // T1
	Rebind   time.Duration // T2
	Acquired time.Time
}

// Client keeps a DHCPv4 lease on one interface, with
// github.com/insomniacslk/dhcp's nclient4: it asks for a lease (DORA), puts
// the address on the link with the lease's lifetime (so the kernel drops it
// when the lease runs out, and Plan keeps it as a dynamic address), adds
// the router as the default route (protocol dhcp, which Plan never
// touches), renews at T1, retries until T2 and asks anew after expiry.
// Run it in a goroutine per interface; it returns when ctx ends. Give it
// a Netlink of its own (an nlkernel.Kernel per Client) rather than sharing one with a
// concurrent Apply.
type Client struct {
	Iface string
	NL    hostnet.Netlink
	// Metric of the default route; 0 by default.
	Metric int
	// Timeout of one exchange (default 5s) and pause between failed
	// attempts (default 2s).
	Timeout, Retry time.Duration
	// Logf, when set, reports leases and failures.
	Logf func(format string, a ...any)

	mu    sync.Mutex
	lease *Lease
	// Renewals counts successful renewals (tests watch it).
	renewals int
}

// Lease returns the current lease, or nil.
func (d *Client) Lease() *Lease {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lease == nil {
		return nil
	}
	l := *d.lease
	return &l
}

// Renewals says how many times the lease was renewed.
func (d *Client) Renewals() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.renewals
}

func (d *Client) logf(format string, a ...any) {
	if d.Logf != nil {
		d.Logf("dhcp4 %s: "+format, append([]any{d.Iface}, a...)...)
	}
}

// Run keeps a lease until ctx ends. The client's packet socket is opened
// in the network namespace of the calling thread.
func (d *Client) Run(ctx context.Context) error {
	timeout, retry := d.Timeout, d.Retry
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	if retry == 0 {
		retry = 2 * time.Second
	}
	c, err := nclient4.New(d.Iface, nclient4.WithTimeout(timeout), nclient4.WithRetry(2))
	if err != nil {
		return fmt.Errorf("dhcp4 %s: %w", d.Iface, err)
	}
	defer c.Close()
	var cur *nclient4.Lease
	for {
		if cur == nil {
			l, err := c.Request(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				d.logf("no lease: %v", err)
				if !sleep(ctx, retry) {
					return nil
				}
				continue
			}
			cur = l
			if err := d.install(l); err != nil {
				d.logf("install lease: %v", err)
			}
		}
		lease := d.Lease()
		if lease == nil {
			cur = nil
			continue
		}
		// Renew at T1; on failure retry until T2, then until expiry.
		if !sleep(ctx, time.Until(lease.Acquired.Add(lease.Renew))) {
			return nil
		}
		for {
			l, err := c.Renew(ctx, cur)
			if err == nil {
				cur = l
				d.mu.Lock()
				d.renewals++
				d.mu.Unlock()
				if err := d.install(l); err != nil {
					d.logf("install renewed lease: %v", err)
				}
				break
			}
			if ctx.Err() != nil {
				return nil
			}
			var nak *nclient4.ErrNak
			if errors.As(err, &nak) || time.Now().After(lease.Acquired.Add(lease.Duration)) {
				d.logf("lease lost: %v", err)
				cur = nil
				d.mu.Lock()
				d.lease = nil
				d.mu.Unlock()
				break
			}
			d.logf("renew: %v", err)
			if !sleep(ctx, retry) {
				return nil
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// leaseOf reads what Roost needs from an ACK.
func leaseOf(ack *dhcpv4.DHCPv4, now time.Time) (*Lease, error) {
	ip, ok := netip.AddrFromSlice(ack.YourIPAddr.To4())
	if !ok || !ip.IsGlobalUnicast() {
		return nil, fmt.Errorf("lease without a usable address: %v", ack.YourIPAddr)
	}
	mask := ack.SubnetMask()
	if mask == nil {
		mask = ip4DefaultMask(ip)
	}
	ones, _ := mask.Size()
	l := &Lease{Addr: netip.PrefixFrom(ip, ones), Acquired: now}
	l.Duration = ack.IPAddressLeaseTime(time.Hour)
	l.Renew = ack.IPAddressRenewalTime(l.Duration / 2)
	l.Rebind = ack.IPAddressRebindingTime(l.Duration * 7 / 8)
	if rs := ack.Router(); len(rs) > 0 {
		l.Router, _ = netip.AddrFromSlice(rs[0].To4())
	}
	for _, s := range ack.DNS() {
		if a, ok := netip.AddrFromSlice(s.To4()); ok {
			l.DNS = append(l.DNS, a)
		}
	}
	l.Server, _ = netip.AddrFromSlice(ack.ServerIdentifier().To4())
	return l, nil
}

func ip4DefaultMask(ip netip.Addr) net.IPMask {
	return net.IP(ip.AsSlice()).DefaultMask()
}

// install puts the lease on the link: the address with the lease's
// lifetime, and the default route through the router.
func (d *Client) install(nl4 *nclient4.Lease) error {
	l, err := leaseOf(nl4.ACK, time.Now())
	if err != nil {
		return err
	}
	if err := InstallLease(d.NL, d.Iface, l, d.Metric); err != nil {
		return err
	}
	d.mu.Lock()
	prev := d.lease
	d.lease = l
	d.mu.Unlock()
	if prev == nil || prev.Addr != l.Addr {
		d.logf("lease %s router %s for %s", l.Addr, l.Router, l.Duration)
	}
	return nil
}

// InstallLease puts a DHCPv4 lease on a link: the address with the
// lease's lifetime (replacing an older lifetime) and, when the lease names
// a router, the default route through it with protocol dhcp.
func InstallLease(nl hostnet.Netlink, iface string, l *Lease, metric int) error {
	link, err := nl.LinkByName(iface)
	if err != nil {
		return err
	}
	secs := int(l.Duration / time.Second)
	addr := &hostnet.Addr{Prefix: l.Addr, ValidLft: secs, PreferedLft: secs}
	if err := nl.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("address %s: %w", l.Addr, err)
	}
	if !l.Router.IsValid() {
		return nil
	}
	r := &hostnet.Route{LinkIndex: link.Attrs().Index, Dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0),
		Gw: l.Router, Metric: metric, Protocol: unix.RTPROT_DHCP, Family: hostnet.FamilyV4}
	if err := nl.RouteAdd(r); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("default route via %s: %w", l.Router, err)
	}
	return nil
}
