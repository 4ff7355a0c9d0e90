package hostnet_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roostfleet/roost/netprofiles/hostnet"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (run go test -update to accept):\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

// loadProfile decodes a NetworkProfile manifest the way roostctl does.
func loadProfile(t testing.TB, path string) *roostv1.NetworkProfile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := resource.Decode(data, filepath.Base(path), resource.ForApply())
	if err != nil {
		t.Fatal(err)
	}
	if ds := resource.ValidateManifests(ms); len(ds) > 0 {
		t.Fatalf("%s is invalid:\n%s", path, resource.FormatViolations(ds))
	}
	r, _ := resource.Unwrap(ms[0].Object)
	return r.(*roostv1.NetworkProfile)
}

func loadProfiles(t testing.TB) []*roostv1.NetworkProfile {
	files, err := filepath.Glob("../testdata/profiles/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no profiles: %v", err)
	}
	var out []*roostv1.NetworkProfile
	for _, f := range files {
		out = append(out, loadProfile(t, f))
	}
	return out
}

// baseHost is a server with four NICs, one of them up with an address
// from the installer, plus a bridge and a veth pair made outside Roost
// (as a container runtime would) with an address and a route.
func baseHost(t testing.TB) *hostnet.SimKernel {
	f := hostnet.NewSimKernel()
	for i := range 4 {
		f.AddDevice(fmt.Sprintf("eth%d", i), fmt.Sprintf("52:54:00:00:00:1%d", i), "virtio_net", fmt.Sprintf("0000:00:0%d.0", i+3), 1500)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	byName := func(n string) hostnet.Link {
		l, err := f.LinkByName(n)
		must(err)
		return l
	}
	must(f.LinkSetUp(byName("eth0")))
	must(f.AddrAdd(byName("eth0"), &hostnet.Addr{Prefix: netip.MustParsePrefix("10.99.0.5/24"), ValidLft: 600}))
	must(f.LinkAdd(&hostnet.Bridge{LinkAttrs: hostnet.LinkAttrs{Name: "docker0"}}))
	must(f.LinkAdd(&hostnet.Veth{LinkAttrs: hostnet.LinkAttrs{Name: "veth-a"}, PeerName: "veth-b"}))
	must(f.LinkSetMaster(byName("veth-a"), byName("docker0")))
	for _, n := range []string{"docker0", "veth-a", "veth-b"} {
		must(f.LinkSetUp(byName(n)))
	}
	must(f.AddrAdd(byName("docker0"), &hostnet.Addr{Prefix: netip.MustParsePrefix("172.17.0.1/16")}))
	must(f.RouteAdd(&hostnet.Route{LinkIndex: byName("docker0").Attrs().Index, Dst: netip.MustParsePrefix("172.18.0.0/16"),
		Gw: netip.MustParseAddr("172.17.0.2"), Protocol: 3}))
	f.Calls = 0
	return f
}

// unowned returns the lines of a host rendering about the links made
// outside Roost.
func unowned(state string) string {
	var out []string
	keep := false
	for _, line := range strings.Split(state, "\n") {
		if strings.HasPrefix(line, "link ") {
			f := strings.Fields(line)
			keep = f[1] == "docker0" || strings.HasPrefix(f[1], "veth-")
		}
		if strings.HasPrefix(line, "route ") {
			keep = strings.Contains(line, "dev docker0") || strings.Contains(line, "dev veth-")
		}
		if keep && line != "" {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

func apply(t *testing.T, f *hostnet.SimKernel, p *roostv1.NetworkProfile) hostnet.Result {
	t.Helper()
	res, err := hostnet.Apply(context.Background(), f, p.GetSpec(), hostnet.WithProfile(p.GetMetadata().GetName()))
	if err != nil {
		t.Fatalf("apply %s: %v\nactions:\n%s\nhost:\n%s", p.GetMetadata().GetName(), err, actionsText(res.Actions), f)
	}
	if !res.Converged() {
		t.Fatalf("apply %s left drift:\n%s\nhost:\n%s", p.GetMetadata().GetName(), strings.Join(res.Drift, "\n"), f)
	}
	return res
}

func actionsText(as []hostnet.Action) string {
	var b strings.Builder
	for _, a := range as {
		b.WriteString(a.String())
		b.WriteString("\n")
	}
	return b.String()
}

// TestTransitions applies every profile of ../testdata/profiles (netprofiles) to the base
// host (golden: the plan and the host after), then again from several
// random histories of other profiles (seeded): the host must end the same,
// links made outside Roost must be untouched, and applying again must do
// nothing at all.
func TestTransitions(t *testing.T) {
	profiles := loadProfiles(t)
	base := baseHost(t).String()
	for i, target := range profiles {
		name := target.GetMetadata().GetName()
		t.Run(name, func(t *testing.T) {
			f := baseHost(t)
			res := apply(t, f, target)
			want := f.String()
			checkGolden(t, filepath.Join("testdata/transitions", name+".golden"),
				"## plan from the base host\n"+actionsText(res.Actions)+"## host after\n"+want)
			if got := unowned(want); got != unowned(base) {
				t.Errorf("links made outside Roost changed:\n--- before\n%s\n--- after\n%s", unowned(base), got)
			}
			again(t, f, target)
			for seed := uint64(1); seed <= 6; seed++ {
				rng := rand.New(rand.NewPCG(seed, uint64(i)))
				f := baseHost(t)
				var history []string
				for range rng.IntN(4) + 1 {
					p := profiles[rng.IntN(len(profiles))]
					history = append(history, p.GetMetadata().GetName())
					apply(t, f, p)
				}
				apply(t, f, target)
				if got := f.String(); got != want {
					t.Errorf("after %v then %s the host differs:\n--- want\n%s\n--- got\n%s", history, name, want, got)
				}
				again(t, f, target)
			}
		})
	}
}

// again checks that re-applying a profile plans and does nothing.
func again(t *testing.T, f *hostnet.SimKernel, p *roostv1.NetworkProfile) {
	t.Helper()
	calls := f.Calls
	res := apply(t, f, p)
	if len(res.Actions) != 0 || f.Calls != calls {
		t.Errorf("re-applying %s did %d actions (%d calls):\n%s", p.GetMetadata().GetName(), len(res.Actions), f.Calls-calls, actionsText(res.Actions))
	}
}
