package hostnet_test

import (
	"context"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/roostfleet/roost/netprofiles/hostnet"
	"github.com/roostfleet/roost/netprofiles/hostnet/nlkernel"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// These tests run Apply against the real kernel, each in a fresh network
// namespace. They need root (CAP_NET_ADMIN and CAP_SYS_ADMIN); `make
// test-root` runs them, and so does `make test-unit` when run as root, as
// CI does. The kernel of CI and developers has bridge and veth but not
// bond or VLAN links, so veth pairs stand in for physical NICs here and
// bonds and VLANs are covered by the fake (transitions_test.go) and the
// QEMU end-to-end tests.

// newNetns moves the test's goroutine, locked to its OS thread, into a new
// network namespace, and returns a Kernel bound to it. Cleanup goes back
// and closes the namespace (it vanishes with its last reference).
func newNetns(t *testing.T) (*nlkernel.Kernel, *netlink.Handle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: run make test-root as root")
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	ns, err := netns.New()
	if err != nil {
		orig.Close()
		runtime.UnlockOSThread()
		t.Fatalf("new network namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := netns.Set(orig); err != nil {
			t.Errorf("back to the original namespace: %v", err)
			return // leave the thread locked: Go ends it with the goroutine
		}
		ns.Close()
		orig.Close()
		runtime.UnlockOSThread()
	})
	k, err := nlkernel.New(ns)
	if err != nil {
		t.Fatal(err)
	}
	k.SysfsRoot = t.TempDir() // sysfs shows the host's namespace, not this one
	t.Cleanup(k.Close)
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return k, h
}

// mustCIDR parses an interface address ("10.0.0.5/24", host bits kept)
// for netlink.
func mustCIDR(s string) *net.IPNet {
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	n.IP = ip
	return n
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func link(t *testing.T, h *netlink.Handle, name string) netlink.Link {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	return l
}

// outside makes what another program would: veth pairs standing in for
// NICs (ve0–ve2, peers up), and a bridge ext0 with a port xv0, an
// address and a route, none of it Roost's.
func outside(t *testing.T, h *netlink.Handle) {
	t.Helper()
	for _, p := range [][2]string{{"ve0", "ve0p"}, {"ve1", "ve1p"}, {"ve2", "ve2p"}, {"xv0", "xv1"}} {
		must(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p[0]}, PeerName: p[1]}))
		must(t, h.LinkSetUp(link(t, h, p[1])))
	}
	must(t, h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "ext0", MTU: 1400}}))
	must(t, h.LinkSetMaster(link(t, h, "xv0"), link(t, h, "ext0")))
	must(t, h.LinkSetUp(link(t, h, "xv0")))
	must(t, h.LinkSetUp(link(t, h, "ext0")))
	must(t, h.AddrAdd(link(t, h, "ext0"), &netlink.Addr{IPNet: mustCIDR("172.17.0.1/16")}))
	_, dst, _ := net.ParseCIDR("172.18.0.0/16")
	must(t, h.RouteAdd(&netlink.Route{LinkIndex: link(t, h, "ext0").Attrs().Index, Dst: dst, Gw: net.ParseIP("172.17.0.2"), Protocol: 4}))
}

// foreign renders what of a host belongs to links made outside Roost.
func foreign(t *testing.T, nl hostnet.Netlink) string {
	t.Helper()
	h, err := hostnet.Observe(nl)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, line := range strings.Split(h.String(), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 1 && f[0] == "link":
			if f[1] == "ext0" || f[1] == "xv0" || f[1] == "xv1" || strings.HasSuffix(f[1], "p") {
				keep = append(keep, line)
			}
		case len(f) > 1 && f[0] == "route" && strings.HasPrefix(f[1], "fe80:"):
			// The kernel adds IPv6 link-local routes on its own, a moment
			// after a link comes up.
		case len(f) > 1 && f[0] == "route" && (strings.Contains(line, "dev ext0") || strings.Contains(line, "dev xv")):
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

func kernelProfile() *roostv1.NetworkProfileSpec {
	return &roostv1.NetworkProfileSpec{
		Links: []*roostv1.Link{
			{Name: "nic0", Match: &roostv1.LinkMatch{Name: "ve0"}, Mtu: 9000,
				Addresses: []string{"192.0.2.10/24", "2001:db8::10/64"},
				Routes: []*roostv1.Route{
					{Destination: "default", Gateway: "192.0.2.1"},
					{Destination: "10.0.0.0/8", Gateway: "192.0.2.254", Metric: 50},
				}},
			{Name: "nic1", Match: &roostv1.LinkMatch{Name: "ve1"}},
			{Name: "nic2", Match: &roostv1.LinkMatch{Name: "ve2"}, Mtu: 1500},
		},
		Bridges: []*roostv1.Bridge{
			{Name: "br0", Ports: []string{"nic1", "nic2"}, Mtu: 1500, Addresses: []string{"198.51.100.1/24"},
				Routes: []*roostv1.Route{{Destination: "203.0.113.0/24", Gateway: "198.51.100.254", Table: 100}}},
			// No vlanFiltering: this kernel lacks bridge VLAN filtering
			// (it refuses the attribute); the fake covers it.
			{Name: "br-vm", Stp: true},
		},
	}
}

func applyKernel(t *testing.T, k *nlkernel.Kernel, spec *roostv1.NetworkProfileSpec) hostnet.Result {
	t.Helper()
	res, err := hostnet.Apply(context.Background(), k, spec, hostnet.WithProfile("test"), hostnet.WithPhysicalTypes("device", "veth"))
	if err != nil {
		t.Fatalf("apply: %v\nactions:\n%s\nhost:\n%s", err, actionsText(res.Actions), res.Observed)
	}
	if !res.Converged() {
		t.Fatalf("drift after apply:\n%s\nhost:\n%s", strings.Join(res.Drift, "\n"), res.Observed)
	}
	return res
}

// TestKernelApply: bridges, veth, addresses, routes and MTU on the real
// kernel; applying again does nothing; removing a bridge from the profile
// deletes it; links made outside Roost are never changed.
func TestKernelApply(t *testing.T) {
	k, h := newNetns(t)
	outside(t, h)
	before := foreign(t, k)

	res := applyKernel(t, k, kernelProfile())
	t.Logf("first apply:\n%s\nhost:\n%s", actionsText(res.Actions), res.Observed)
	obs := res.Observed
	nic0, br0, brvm := obs.Link("nic0"), obs.Link("br0"), obs.Link("br-vm")
	switch {
	case nic0 == nil || br0 == nil || brvm == nil:
		t.Fatalf("links missing:\n%s", obs)
	case nic0.MTU != 9000 || !nic0.Up || obs.Link("ve0") != nil:
		t.Errorf("nic0 = %+v, want ve0 renamed, up, MTU 9000", nic0)
	case br0.Type != "bridge" || br0.Alias != "roost:test" || !br0.Up || br0.MTU != 1500:
		t.Errorf("br0 = %+v", br0)
	case obs.Link("nic1").Master != "br0" || obs.Link("nic2").Master != "br0":
		t.Errorf("ports of br0 wrong:\n%s", obs)
	case brvm.Bridge == nil || !brvm.Bridge.STP || brvm.Alias != "roost:test":
		t.Errorf("br-vm = %+v", brvm)
	}
	if !slices.ContainsFunc(nic0.Addrs, func(a hostnet.AddrState) bool { return a.Prefix.String() == "192.0.2.10/24" }) ||
		!slices.ContainsFunc(nic0.Addrs, func(a hostnet.AddrState) bool { return a.Prefix.String() == "2001:db8::10/64" }) {
		t.Errorf("nic0 addresses = %v", nic0.Addrs)
	}
	for _, want := range []string{
		"route default via 192.0.2.1 dev nic0 proto roost",
		"route 10.0.0.0/8 via 192.0.2.254 dev nic0 metric 50 proto roost",
		"route 203.0.113.0/24 via 198.51.100.254 dev br0 table 100 proto roost",
	} {
		if !strings.Contains(obs.String(), want+"\n") {
			t.Errorf("missing %q in\n%s", want, obs)
		}
	}
	if got := foreign(t, k); got != before {
		t.Errorf("links made outside Roost changed:\n--- before\n%s\n--- after\n%s", before, got)
	}

	// Again: nothing to do.
	if res := applyKernel(t, k, kernelProfile()); len(res.Actions) != 0 {
		t.Errorf("re-apply did:\n%s", actionsText(res.Actions))
	}

	// Without br0: it goes, its ports stay; br-vm stays.
	spec := kernelProfile()
	spec.Bridges = spec.Bridges[1:]
	res = applyKernel(t, k, spec)
	t.Logf("second profile:\n%s", actionsText(res.Actions))
	if !slices.ContainsFunc(res.Actions, func(a hostnet.Action) bool { return a.String() == "- delete bridge br0" }) {
		t.Errorf("no deletion of br0 in\n%s", actionsText(res.Actions))
	}
	obs = res.Observed
	if obs.Link("br0") != nil || obs.Link("br-vm") == nil || obs.Link("nic1") == nil || obs.Link("nic1").Master != "" {
		t.Errorf("after removing br0:\n%s", obs)
	}
	if strings.Contains(obs.String(), "table 100") {
		t.Errorf("br0's route survived:\n%s", obs)
	}
	if got := foreign(t, k); got != before {
		t.Errorf("links made outside Roost changed:\n--- before\n%s\n--- after\n%s", before, got)
	}
	if res := applyKernel(t, k, spec); len(res.Actions) != 0 {
		t.Errorf("re-apply did:\n%s", actionsText(res.Actions))
	}
}

// TestKernelForeignLinks: a profile that names a link made outside Roost
// as one of its bridges, or lists no links at all, never changes or
// deletes what Roost did not make.
func TestKernelForeignLinks(t *testing.T) {
	k, h := newNetns(t)
	outside(t, h)
	before := foreign(t, k)

	spec := &roostv1.NetworkProfileSpec{Bridges: []*roostv1.Bridge{{Name: "ext0", Mtu: 9000, Addresses: []string{"10.1.0.1/24"}}}}
	res, err := hostnet.Apply(context.Background(), k, spec)
	if !hostnet.IsPlanError(err) || !strings.Contains(err.Error(), "ext0: the name is taken") {
		t.Errorf("apply err = %v, want a plan error about ext0", err)
	}
	if len(res.Actions) != 0 {
		t.Errorf("actions on a foreign bridge:\n%s", actionsText(res.Actions))
	}
	// An empty profile owns nothing, so it deletes nothing.
	if res := applyKernel(t, k, &roostv1.NetworkProfileSpec{}); len(res.Actions) != 0 {
		t.Errorf("empty profile did:\n%s", actionsText(res.Actions))
	}
	if got := foreign(t, k); got != before {
		t.Errorf("links made outside Roost changed:\n--- before\n%s\n--- after\n%s", before, got)
	}
}
