package netprofiles

import (
	"net/netip"
	"slices"
	"strings"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// ResolvConf renders /etc/resolv.conf for a profile: its DNS servers,
// then extra ones (e.g. from DHCP leases) not already listed, and its
// search domains. The resolver reads at most three name servers.
func ResolvConf(spec *roostv1.NetworkProfileSpec, extra ...netip.Addr) string {
	var b strings.Builder
	b.WriteString("# Written by Roost from the NetworkProfile.\n")
	var seen []netip.Addr
	add := func(a netip.Addr) {
		if a.IsValid() && !slices.Contains(seen, a) {
			seen = append(seen, a)
			b.WriteString("nameserver " + a.String() + "\n")
		}
	}
	for _, s := range spec.GetDns().GetServers() {
		if a, err := netip.ParseAddr(s); err == nil {
			add(a)
		}
	}
	for _, a := range extra {
		add(a)
	}
	if s := spec.GetDns().GetSearch(); len(s) > 0 {
		b.WriteString("search " + strings.Join(s, " ") + "\n")
	}
	return b.String()
}
