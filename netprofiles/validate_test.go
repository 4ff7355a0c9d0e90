package netprofiles_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/roostfleet/roost/netprofiles"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// TestValidateHints: every problem Validate finds in the bad profiles of
// resource/testdata/bad says how to fix it, and the good profiles (the
// example and the transition table) have none.
func TestValidateHints(t *testing.T) {
	files, _ := filepath.Glob("../resource/testdata/bad/*.yaml")
	n := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		ms, _ := resource.Decode(data, filepath.Base(file))
		for _, m := range ms {
			np := m.Object.GetNetworkProfile()
			if np == nil {
				continue
			}
			for _, v := range netprofiles.Validate(np.GetSpec()) {
				n++
				if v.Hint == "" || v.Message == "" || v.Field == "" {
					t.Errorf("%s: violation without field, message or hint: %+v", file, v)
				}
			}
		}
	}
	if n < 30 {
		t.Errorf("only %d violations in the bad profiles", n)
	}
	good, _ := filepath.Glob("testdata/profiles/*.yaml")
	for _, file := range append(good, "../examples/networkprofile.yaml") {
		if vs := netprofiles.Validate(profileSpec(t, file)); len(vs) > 0 {
			t.Errorf("%s: %v", file, vs)
		}
	}
}

func TestValidateRules(t *testing.T) {
	link := func(name string, mtu uint32, addrs ...string) *roostv1.Link {
		return &roostv1.Link{Name: name, Match: &roostv1.LinkMatch{Name: name}, Mtu: mtu, Addresses: addrs}
	}
	for _, tc := range []struct {
		name string
		spec *roostv1.NetworkProfileSpec
		want []string // fields
	}{
		{"static IPv6 with dhcp6 is fine", &roostv1.NetworkProfileSpec{Links: []*roostv1.Link{{Name: "e", Match: &roostv1.LinkMatch{Name: "e"}, Dhcp6: true, Addresses: []string{"2001:db8::1/64"}}}}, nil},
		{"secondary address in one subnet is fine", &roostv1.NetworkProfileSpec{Links: []*roostv1.Link{link("e", 0, "192.0.2.1/24", "192.0.2.2/24")}}, nil},
		{"default routes in two tables are fine", &roostv1.NetworkProfileSpec{Links: []*roostv1.Link{
			{Name: "a", Match: &roostv1.LinkMatch{Name: "a"}, Addresses: []string{"192.0.2.1/24"}, Routes: []*roostv1.Route{{Destination: "default", Gateway: "192.0.2.254"}}},
			{Name: "b", Match: &roostv1.LinkMatch{Name: "b"}, Addresses: []string{"198.51.100.1/24"}, Routes: []*roostv1.Route{{Destination: "default", Gateway: "198.51.100.254", Table: 100}}},
		}}, nil},
		{"one IPv4 and one IPv6 default are fine", &roostv1.NetworkProfileSpec{Links: []*roostv1.Link{
			{Name: "a", Match: &roostv1.LinkMatch{Name: "a"}, Addresses: []string{"192.0.2.1/24", "2001:db8::1/64"},
				Routes: []*roostv1.Route{{Destination: "default", Gateway: "192.0.2.254"}, {Destination: "default", Gateway: "fe80::1"}}},
		}}, nil},
		{"bond over bridge port cycle", &roostv1.NetworkProfileSpec{
			Links:   []*roostv1.Link{link("e", 0)},
			Bonds:   []*roostv1.Bond{{Name: "bond0", Mode: "active-backup", Members: []string{"e"}}},
			Vlans:   []*roostv1.Vlan{{Name: "br0.5", Id: 5, Link: "br0"}},
			Bridges: []*roostv1.Bridge{{Name: "br0", Ports: []string{"bond0", "br0.5"}}},
		}, []string{"spec.bridges[0].ports[1]"}},
		{"name of 16 bytes", &roostv1.NetworkProfileSpec{Links: []*roostv1.Link{link("abcdefghijklmnop", 0)}}, []string{"spec.links[0].name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := netprofiles.Validate(tc.spec)
			var got []string
			for _, v := range vs {
				got = append(got, v.Field)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want fields %v", vs, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("violation %d at %s, want %s: %v", i, got[i], tc.want[i], vs[i])
				}
			}
		})
	}
}

// profileSpec decodes the NetworkProfile manifest at path (for apply, as
// roostctl does) and returns its spec.
func profileSpec(t *testing.T, path string) *roostv1.NetworkProfileSpec {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := resource.Decode(data, filepath.Base(path), resource.ForApply())
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Object.GetNetworkProfile() == nil {
		t.Fatalf("%s: want one NetworkProfile, got %d objects", path, len(ms))
	}
	return ms[0].Object.GetNetworkProfile().GetSpec()
}
