package hostnet_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/roostfleet/roost/netprofiles/hostnet"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// TestFakeKernelRules pins the kernel rules the fake enforces, on which
// the ordering of a plan is tested.
func TestFakeKernelRules(t *testing.T) {
	f := hostnet.NewSimKernel()
	f.AddDevice("eth0", "52:54:00:00:00:10", "", "", 1500)
	byName := func(n string) hostnet.Link {
		l, err := f.LinkByName(n)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	want := func(what string, err error, errno unix.Errno) {
		t.Helper()
		if !errors.Is(err, errno) {
			t.Errorf("%s: err = %v, want %v", what, err, errno)
		}
	}
	must(t, f.LinkSetUp(byName("eth0")))
	must(t, f.LinkAdd(&hostnet.Bond{LinkAttrs: hostnet.LinkAttrs{Name: "bond0"}, Mode: "802.3ad"}))
	want("enslave while up", f.LinkSetMaster(byName("eth0"), byName("bond0")), unix.EPERM)
	want("rename while up", f.LinkSetName(byName("eth0"), "uplink0"), unix.EBUSY)
	want("alias at creation", f.LinkAdd(&hostnet.Bridge{LinkAttrs: hostnet.LinkAttrs{Name: "br0", Alias: "x"}}), unix.EOPNOTSUPP)
	want("VLAN above its parent's MTU", f.LinkAdd(&hostnet.Vlan{LinkAttrs: hostnet.LinkAttrs{Name: "v", MTU: 9000,
		ParentIndex: byName("bond0").Attrs().Index}, VlanID: 5}), unix.ERANGE)
	must(t, f.LinkAdd(&hostnet.Vlan{LinkAttrs: hostnet.LinkAttrs{Name: "bond0.5", ParentIndex: byName("bond0").Attrs().Index}, VlanID: 5}))
	want("VLAN up before its parent", f.LinkSetUp(byName("bond0.5")), unix.ENETDOWN)
	dst := netip.MustParsePrefix("10.0.0.0/8")
	want("route on a down link", f.RouteAdd(&hostnet.Route{LinkIndex: byName("bond0").Attrs().Index, Dst: dst}), unix.ENETDOWN)
	must(t, f.LinkSetUp(byName("bond0")))
	want("gateway off-link", f.RouteAdd(&hostnet.Route{LinkIndex: byName("bond0").Attrs().Index, Dst: dst, Gw: netip.MustParseAddr("192.0.2.1")}), unix.ENETUNREACH)

	// Enslaving (down first) gives the member the bond's MTU and opens it;
	// deleting the bond gives the old MTU back and closes it.
	must(t, f.LinkSetMTU(byName("bond0"), 9000))
	must(t, f.LinkSetDown(byName("eth0")))
	must(t, f.LinkSetMaster(byName("eth0"), byName("bond0")))
	if l := byName("eth0").Attrs(); l.MTU != 9000 || !l.Up {
		t.Errorf("member after enslaving: mtu %d up %v", l.MTU, l.Up)
	}
	must(t, f.LinkDel(byName("bond0")))
	if l := byName("eth0").Attrs(); l.MTU != 1500 || l.Up || l.MasterIndex != 0 {
		t.Errorf("member after its bond went: mtu %d up %v master %d", l.MTU, l.Up, l.MasterIndex)
	}
	if _, err := f.LinkByName("bond0.5"); err == nil {
		t.Error("the VLAN outlived its parent")
	}
}

// TestUnnamedLinksUntouched: a physical link the profile does not name
// keeps its MTU, addresses and routes, and Roost's own links of an older
// profile go, dependents first.
func TestUnnamedLinksUntouched(t *testing.T) {
	f := baseHost(t)
	eth1, _ := f.LinkByName("eth1")
	must(t, f.LinkSetMTU(eth1, 9000))
	must(t, f.LinkSetUp(eth1))
	must(t, f.AddrAdd(eth1, &hostnet.Addr{Prefix: netip.MustParsePrefix("10.1.0.5/24")}))
	before := f.String()
	old := loadProfile(t, "../testdata/profiles/bridge-vlan-bond.yaml")
	spec := &roostv1.NetworkProfileSpec{Links: []*roostv1.Link{{Name: "eth0", Match: &roostv1.LinkMatch{Mac: "52:54:00:00:00:10"}, Addresses: []string{"192.0.2.9/24"}}}}
	res, err := hostnet.Apply(context.Background(), f, spec)
	if err != nil || !res.Converged() {
		t.Fatalf("apply: %v %v", err, res.Drift)
	}
	line := func(s, prefix string) string {
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		return ""
	}
	for _, p := range []string{"link eth1 ", "  addr 10.1.0.5/24", "link eth2 ", "link eth3 "} {
		if line(before, p) != line(f.String(), p) || line(before, p) == "" {
			t.Errorf("%q changed: %q → %q", p, line(before, p), line(f.String(), p))
		}
	}

	// An old profile's bond, VLAN, bridge and VLAN on the bridge go, top
	// of the stack first.
	f = baseHost(t)
	if _, err := hostnet.Apply(context.Background(), f, old.GetSpec()); err != nil {
		t.Fatal(err)
	}
	res, err = hostnet.Apply(context.Background(), f, spec)
	if err != nil {
		t.Fatal(err)
	}
	var dels []string
	for _, a := range res.Actions {
		if a.Op == hostnet.OpDelete && strings.HasPrefix(a.Text, "delete ") && !strings.Contains(a.Text, "address") && !strings.Contains(a.Text, "route") {
			dels = append(dels, a.Text)
		}
	}
	if got := strings.Join(dels, "; "); got != "delete vlan br0.20; delete bridge br0; delete vlan bond0.10; delete bond bond0" {
		t.Errorf("deletions = %s", got)
	}

	// A veth (a container's, say) is no NIC: a profile link never binds
	// to it, even when the match would fit.
	veth := &roostv1.NetworkProfileSpec{Links: []*roostv1.Link{{Name: "uplink", Match: &roostv1.LinkMatch{Name: "veth-a"}, Mtu: 9000}}}
	before = f.String()
	res, err = hostnet.Apply(context.Background(), f, veth)
	if !hostnet.IsPlanError(err) || len(res.Actions) != 0 || f.String() != before {
		t.Errorf("a veth was bound: err %v, actions %v", err, res.Actions)
	}
}
