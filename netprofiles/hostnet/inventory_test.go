package hostnet_test

import (
	"strings"
	"testing"

	"github.com/roostfleet/roost/netprofiles/hostnet"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func TestPlanForInventory(t *testing.T) {
	inv := &roostv1.Inventory{Nics: []*roostv1.NICInfo{
		{Name: "enp59s0f0", Mac: "52:54:00:00:00:10", Driver: "ice", PciAddress: "0000:3b:00.0", LinkUp: true},
		{Name: "enp59s0f1", Mac: "52:54:00:00:00:11", Driver: "ice", PciAddress: "0000:3b:00.1"},
		{Name: "docker0", Mac: "02:42:00:00:00:01", Virtual: true},
	}}
	p := loadProfile(t, "../../examples/networkprofile.yaml")
	actions, err := hostnet.PlanForInventory(p.GetSpec(), inv, hostnet.WithProfile(p.GetMetadata().GetName()))
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "testdata/plan-inventory.golden", actionsText(actions))

	// A profile naming a NIC the server lacks plans the rest and says so.
	inv.Nics = inv.Nics[:1]
	actions, err = hostnet.PlanForInventory(p.GetSpec(), inv)
	if !hostnet.IsPlanError(err) || !strings.Contains(err.Error(), "link uplink1: no host link matches (driver ice, pciPath 0000:3b:00.1)") {
		t.Errorf("err = %v", err)
	}
	if len(actions) == 0 || !strings.Contains(actionsText(actions), "+ create bond bond0") {
		t.Errorf("actions:\n%s", actionsText(actions))
	}
}
