package hostnet

import (
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// InventoryMTU is the MTU InventoryState assumes for every NIC: the
// inventory does not report MTUs, so a plan from it may set an MTU the NIC
// already has.
const InventoryMTU = 1500

// InventoryState builds the host state a server's reported inventory
// describes: its physical NICs (virtual ones are left out) with name, MAC,
// driver, PCI address and link state, MTU InventoryMTU, and no addresses,
// routes or links of Roost's. It is what the agent finds at first boot.
func InventoryState(inv *roostv1.Inventory) HostState {
	var h HostState
	for i, n := range inv.GetNics() {
		if n.GetVirtual() || n.GetName() == "" || n.GetName() == "lo" {
			continue
		}
		h.Links = append(h.Links, LinkState{Index: i + 1, Name: n.GetName(), Type: "device", MAC: n.GetMac(),
			Driver: n.GetDriver(), PCIPath: n.GetPciAddress(), MTU: InventoryMTU, Up: n.GetLinkUp()})
	}
	h.sort()
	return h
}

// PlanForInventory plans the profile against a server's reported
// inventory (see InventoryState), as `roostctl netprofile plan` shows it:
// the actions the agent would take at first boot, without touching the
// server.
func PlanForInventory(spec *roostv1.NetworkProfileSpec, inv *roostv1.Inventory, opts ...Option) ([]Action, error) {
	return Plan(spec, InventoryState(inv), opts...)
}
