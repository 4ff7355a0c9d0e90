package resource

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/roostfleet/roost/netprofiles/hostnet"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// FuzzNetworkProfile feeds arbitrary bytes through what a NetworkProfile
// goes through, from the manifest to the host: Decode, ValidateManifests,
// then, for a profile that validates, Apply on a fake host with four NICs.
// Nothing may panic, an apply of a valid profile may only fail for what
// the plan reports (links the host lacks, steps the kernel refuses), and
// applying it again must do nothing. Plain `go test` runs the seeds (the
// example, the bad profiles, the transition profiles of netprofiles);
// `go test -fuzz FuzzNetworkProfile ./resource` explores further.
func FuzzNetworkProfile(f *testing.F) {
	for _, glob := range []string{"../examples/networkprofile.yaml", "testdata/bad/np-*.yaml", "testdata/bad/vlan-*.yaml",
		"testdata/bad/interface-*.yaml", "testdata/bad/bond-*.yaml", "../netprofiles/testdata/profiles/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("apiVersion: roost.io/v1\nkind: NetworkProfile\nmetadata: {name: x}\nspec: {bridges: [{name: br0, ports: [br0]}]}"))
	f.Add([]byte("apiVersion: roost.io/v1\nkind: NetworkProfile\nmetadata: {name: x}\nspec: {links: [{name: a, match: {name: '*'}}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, _ := Decode(data, "fuzz.yaml", ForApply())
		if len(ValidateManifests(ms)) > 0 {
			return
		}
		for _, m := range ms {
			np, ok := m.Object.GetKind().(*roostv1.Object_NetworkProfile)
			if !ok {
				continue
			}
			spec := np.NetworkProfile.GetSpec()
			host := hostnet.NewSimKernel()
			for i, mac := range []string{"52:54:00:12:34:56", "52:54:00:00:00:11", "52:54:00:00:00:12", "52:54:00:00:00:13"} {
				host.AddDevice("enp"+string(rune('1'+i))+"s0", mac, "virtio_net", "0000:3b:00."+string(rune('0'+i)), 1500)
			}
			_, err := hostnet.Apply(context.Background(), host, spec)
			if err != nil && !hostnet.IsPlanError(err) {
				t.Fatalf("apply of a valid profile failed: %v\n%s", err, data)
			}
			before := host.String()
			res, _ := hostnet.Apply(context.Background(), host, spec)
			if len(res.Actions) != 0 {
				t.Fatalf("second apply did %d actions: %v\nhost before:\n%s\nprofile:\n%s", len(res.Actions), res.Actions, before, data)
			}
		}
	})
}
