package netprofiles_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/roostfleet/roost/netprofiles"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func TestPlanForInventory(t *testing.T) {
	inv := &roostv1.Inventory{Nics: []*roostv1.NICInfo{
		{Name: "enp59s0f0", Mac: "52:54:00:00:00:10", Driver: "ice", PciAddress: "0000:3b:00.0", LinkUp: true},
		{Name: "enp59s0f1", Mac: "52:54:00:00:00:11", Driver: "ice", PciAddress: "0000:3b:00.1"},
		{Name: "docker0", Mac: "02:42:00:00:00:01", Virtual: true},
	}}
	p := loadProfile(t, "../examples/networkprofile.yaml")
	actions, err := netprofiles.PlanForInventory(p.GetSpec(), inv, netprofiles.WithProfile(p.GetMetadata().GetName()))
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "testdata/plan-inventory.golden", actionsText(actions))

	// A profile naming a NIC the server lacks plans the rest and says so.
	inv.Nics = inv.Nics[:1]
	actions, err = netprofiles.PlanForInventory(p.GetSpec(), inv)
	if !netprofiles.IsPlanError(err) || !strings.Contains(err.Error(), "link uplink1: no host link matches (driver ice, pciPath 0000:3b:00.1)") {
		t.Errorf("err = %v", err)
	}
	if len(actions) == 0 || !strings.Contains(actionsText(actions), "+ create bond bond0") {
		t.Errorf("actions:\n%s", actionsText(actions))
	}
}

func TestResolvConf(t *testing.T) {
	p := loadProfile(t, "../examples/networkprofile.yaml")
	got := netprofiles.ResolvConf(p.GetSpec(), netip.MustParseAddr("10.0.0.53"), netip.MustParseAddr("192.0.2.53"))
	want := "# Written by Roost from the NetworkProfile.\nnameserver 192.0.2.53\nnameserver 2001:db8::53\nnameserver 10.0.0.53\nsearch example.com\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
