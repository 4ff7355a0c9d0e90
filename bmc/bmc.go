package bmc

import "context"

// PowerState is a server's power state as the BMC reports it.
type PowerState string

// Power states (the Redfish PowerState values).
const (
	PowerOn          PowerState = "On"
	PowerOff         PowerState = "Off"
	PowerPoweringOn  PowerState = "PoweringOn"
	PowerPoweringOff PowerState = "PoweringOff"
	// PowerUnknown is a BMC that reports no power state.
	PowerUnknown PowerState = "Unknown"
)

// PowerAction is what SetPower does.
type PowerAction string

// Power actions.
const (
	// PowerActionOn powers the server on; nothing happens when it is on.
	PowerActionOn PowerAction = "on"
	// PowerActionOff cuts the power at once (no graceful shutdown).
	PowerActionOff PowerAction = "off"
	// PowerActionCycle turns the power off and on again (a hard reset).
	PowerActionCycle PowerAction = "cycle"
)

// BootDevice is a device the server boots from once, at its next boot.
type BootDevice string

// Boot devices.
const (
	BootCD   BootDevice = "cd"   // the virtual (or a physical) CD/DVD
	BootPXE  BootDevice = "pxe"  // network boot: PXE
	BootDisk BootDevice = "disk" // the first hard disk
	BootHTTP BootDevice = "http" // network boot: UEFI HTTP boot
)

// BMC controls one server through its management controller. Every method
// is one request round (or a few) to the BMC, bounded by ctx; an error
// wraps one of this package's sentinels (ErrUnauthorized, ErrTimeout, …)
// and never carries the BMC's credentials.
type BMC interface {
	// PowerState returns the server's power state.
	PowerState(ctx context.Context) (PowerState, error)
	// SetPower powers the server on, off or cycles its power.
	SetPower(ctx context.Context, action PowerAction) error
	// SetBootOnce makes the server boot from dev at its next boot only.
	SetBootOnce(ctx context.Context, dev BootDevice) error
	// InsertMedia inserts the image at url (http or https; the BMC fetches
	// it) in the virtual CD drive, write-protected, replacing what it held.
	InsertMedia(ctx context.Context, url string) error
	// EjectMedia empties the virtual CD drive; an empty drive is no error.
	EjectMedia(ctx context.Context) error
}
