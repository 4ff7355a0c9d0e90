package agent

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// FakeIdentity is an IdentitySource that returns fixed values (simulator,
// tests). String renders it as text.
type FakeIdentity struct {
	UUID string
	MACs []string
}

func (f FakeIdentity) Identity(context.Context) (*roostv1.ServerIdentity, error) {
	return &roostv1.ServerIdentity{SystemUuid: f.UUID, PermanentMacs: append([]string(nil), f.MACs...)}, nil
}

func (f FakeIdentity) String() string {
	return fmt.Sprintf("uuid=%s macs=%s", f.UUID, strings.Join(f.MACs, ","))
}

// FakeInventory is an InventorySource that returns a copy of Inv (and Err).
// String renders it as text.
type FakeInventory struct {
	Inv *roostv1.Inventory
	Err error
}

func (f *FakeInventory) Inventory(context.Context) (*roostv1.Inventory, error) {
	return proto.Clone(f.Inv).(*roostv1.Inventory), f.Err
}

func (f *FakeInventory) String() string { return FormatInventory(f.Inv) }

// SimulatedServer returns the identity and inventory of simulated Server
// number i of a run with the given seed: a distinct, valid, stable UUID
// and two distinct permanent MACs (QEMU's 52:54:00 prefix), 16 cores,
// 64 GiB, two disks and two NICs.
func SimulatedServer(seed int64, i int) (FakeIdentity, *FakeInventory) {
	h := sha256.Sum256([]byte(fmt.Sprintf("roost-sim/%d/%d", seed, i)))
	h[6] = h[6]&0x0f | 0x40 // version 4
	h[8] = h[8]&0x3f | 0x80 // RFC 4122 variant
	u := fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
	mac := func(n byte) string { return fmt.Sprintf("52:54:00:%02x:%02x:%02x", h[16], h[17], h[18]^n) }
	id := FakeIdentity{UUID: u, MACs: []string{mac(0), mac(1)}}
	inv := &roostv1.Inventory{
		Cpu:         &roostv1.CPUInfo{Model: "Simulated CPU @ 2.40GHz", Sockets: 1, Cores: 16, Threads: 32},
		MemoryBytes: 64 << 30,
		Disks: []*roostv1.DiskInfo{
			{Name: "nvme0n1", SizeBytes: 960 << 30, Serial: fmt.Sprintf("SIM%x", h[20:24]), Model: "Simulated NVMe"},
			{Name: "sda", SizeBytes: 4 << 40, Serial: fmt.Sprintf("SIMHDD%x", h[24:28]), Rotational: true, Model: "Simulated HDD"},
		},
		Nics: []*roostv1.NICInfo{
			{Name: "eno1", Mac: mac(0), Driver: "virtio_net", SpeedMbps: 25000, PciAddress: "0000:01:00.0", LinkUp: true},
			{Name: "eno2", Mac: mac(1), Driver: "virtio_net", SpeedMbps: 25000, PciAddress: "0000:01:00.1", LinkUp: true},
		},
		System:   &roostv1.SystemInfo{Vendor: "Roost", Product: "Simulated Server", Serial: fmt.Sprintf("SIM-%d-%05d", seed, i)},
		Firmware: "UEFI",
		Arch:     "amd64",
	}
	return id, &FakeInventory{Inv: inv}
}
