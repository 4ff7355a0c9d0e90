package cli

import (
	"strings"
	"testing"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

const npManifest = `apiVersion: roost.io/v1
kind: NetworkProfile
metadata:
  name: lacp
spec:
  links:
    - {name: uplink0, match: {pciPath: "0000:3b:00.0"}}
    - {name: uplink1, match: {pciPath: "0000:3b:00.1"}}
  bonds:
    - {name: bond0, mode: 802.3ad, members: [uplink0, uplink1], mtu: 9000}
  vlans:
    - name: bond0.100
      id: 100
      link: bond0
      addresses: [192.0.2.10/24]
      routes: [{destination: default, gateway: 192.0.2.1}]
`

func npHub(t *testing.T, nics ...*roostv1.NICInfo) string {
	t.Helper()
	f := newFakeHub()
	for _, o := range mustDecode(t, npManifest) {
		f.put(o)
	}
	f.put(&roostv1.Object{Kind: &roostv1.Object_Server{Server: &roostv1.Server{
		Metadata: &roostv1.ObjectMeta{Name: "srv1"},
		Status:   &roostv1.ServerStatus{Inventory: &roostv1.Inventory{Nics: nics}},
	}}})
	cfg, _ := startFakeHub(t, f)
	return cfg
}

func TestNetprofilePlan(t *testing.T) {
	cfg := npHub(t,
		&roostv1.NICInfo{Name: "enp59s0f0", Mac: "52:54:00:00:00:10", Driver: "ice", PciAddress: "0000:3b:00.0"},
		&roostv1.NICInfo{Name: "enp59s0f1", Mac: "52:54:00:00:00:11", Driver: "ice", PciAddress: "0000:3b:00.1"})
	r := runCLI(t, "", "--config", cfg, "netprofile", "plan", "lacp", "--server", "srv1")
	want := `NetworkProfile "lacp" on Server "srv1" (from its reported inventory):
  ~ rename enp59s0f0 to uplink0
  ~ rename enp59s0f1 to uplink1
  + create bond bond0 (802.3ad, mtu 9000)
  ~ enslave uplink0 to bond0
  ~ enslave uplink1 to bond0
  + create vlan bond0.100 (id 100 on bond0)
  ~ set bond0 up
  ~ set bond0.100 up
  + add address 192.0.2.10/24 to bond0.100
  + add route default via 192.0.2.1 dev bond0.100
Plan: 4 to add, 6 to change, 0 to delete.
`
	if r.code != 0 || r.out != want {
		t.Errorf("exit %d, stderr %q, stdout:\n%s\nwant:\n%s", r.code, r.err, r.out, want)
	}

	// From a manifest, the same plan; problems exit 1 after the plan.
	dir := t.TempDir()
	file := writeFile(t, dir, "np.yaml", strings.Replace(npManifest, "0000:3b:00.1", "0000:3b:00.7", 1))
	r = runCLI(t, "", "--config", cfg, "np", "plan", "lacp", "-f", file, "--server", "srv1")
	if r.code != ExitFailed || !strings.Contains(r.err, "link uplink1: no host link matches (pciPath 0000:3b:00.7)") ||
		!strings.Contains(r.out, "+ create bond bond0") {
		t.Errorf("missing NIC: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.err)
	}

	// An invalid manifest is refused before any call, with its line.
	file = writeFile(t, dir, "bad.yaml", strings.Replace(npManifest, "id: 100", "id: 5000", 1))
	r = runCLI(t, "", "--config", cfg, "np", "plan", "lacp", "-f", file, "--server", "srv1")
	if r.code != ExitUsage || !strings.Contains(r.err, "bad.yaml:13:7") || !strings.Contains(r.err, "spec.vlans[0].id") {
		t.Errorf("invalid manifest: exit %d\nstderr:\n%s", r.code, r.err)
	}

	// Unknown server or profile: the hub's NotFound.
	r = runCLI(t, "", "--config", cfg, "np", "plan", "nope", "--server", "srv1")
	if r.code != ExitFailed {
		t.Errorf("unknown profile: exit %d, stderr %s", r.code, r.err)
	}
}

func TestNetprofilePlanWithoutInventory(t *testing.T) {
	cfg := npHub(t)
	r := runCLI(t, "", "--config", cfg, "np", "plan", "lacp", "--server", "srv1")
	if r.code != ExitFailed || !strings.Contains(r.err, "has not reported an inventory") {
		t.Errorf("exit %d, stderr %s", r.code, r.err)
	}
}
