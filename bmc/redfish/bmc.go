package redfish

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/roostfleet/roost/bmc"
)

// PowerState returns the system's power state (bmc.PowerUnknown when the
// BMC reports none; Paused reads as On).
func (c *Client) PowerState(ctx context.Context) (bmc.PowerState, error) {
	sys, err := c.System(ctx)
	if err != nil {
		return "", err
	}
	return powerState(sys.PowerState), nil
}

func powerState(p PowerState) bmc.PowerState {
	switch p {
	case PowerStateOn, PowerStatePaused:
		return bmc.PowerOn
	case PowerStateOff:
		return bmc.PowerOff
	case PowerStatePoweringOn:
		return bmc.PowerPoweringOn
	case PowerStatePoweringOff:
		return bmc.PowerPoweringOff
	}
	return bmc.PowerUnknown
}

// SetPower powers the system on (ResetType On, nothing when it is on), off
// (ForceOff, nothing when it is off) or cycles it (PowerCycle, or
// ForceRestart when the BMC lacks PowerCycle; On when it is off).
func (c *Client) SetPower(ctx context.Context, action bmc.PowerAction) error {
	sys, err := c.System(ctx)
	if err != nil {
		return err
	}
	state := powerState(sys.PowerState)
	switch action {
	case bmc.PowerActionOn:
		if state == bmc.PowerOn {
			return nil
		}
		return c.reset(ctx, sys, ResetOn)
	case bmc.PowerActionOff:
		if state == bmc.PowerOff {
			return nil
		}
		return c.reset(ctx, sys, ResetForceOff)
	case bmc.PowerActionCycle:
		if state == bmc.PowerOff {
			return c.reset(ctx, sys, ResetOn)
		}
		rt := ResetPowerCycle
		if act := sys.Actions.Reset; act != nil && len(act.AllowableResetTypes) > 0 && !slices.Contains(act.AllowableResetTypes, ResetPowerCycle) {
			rt = ResetForceRestart
		}
		return c.reset(ctx, sys, rt)
	}
	return fmt.Errorf("redfish: power action %q: want on, off or cycle", action)
}

// bootSources maps boot devices to BootSourceOverrideTarget values.
var bootSources = map[bmc.BootDevice]BootSource{
	bmc.BootCD:   BootSourceCd,
	bmc.BootPXE:  BootSourcePxe,
	bmc.BootDisk: BootSourceHdd,
	bmc.BootHTTP: BootSourceUefiHTTP,
}

// SetBootOnce sets the boot override to dev, Once.
func (c *Client) SetBootOnce(ctx context.Context, dev bmc.BootDevice) error {
	target, ok := bootSources[dev]
	if !ok {
		return fmt.Errorf("redfish: boot device %q: want cd, pxe, disk or http", dev)
	}
	return c.SetBootOverride(ctx, target, BootOverrideOnce)
}

// cdDrive finds the system's virtual CD (or DVD) drive.
func (c *Client) cdDrive(ctx context.Context) (*VirtualMedia, error) {
	vms, err := c.VirtualMedia(ctx)
	if err != nil {
		return nil, err
	}
	for i := range vms {
		if vms[i].HasMediaType(MediaTypeCD) || vms[i].HasMediaType(MediaTypeDVD) {
			return &vms[i], nil
		}
	}
	return nil, &Error{Op: "VirtualMedia", Kind: bmc.ErrUnsupported, Detail: fmt.Sprintf("none of the %d virtual drives of %s takes a CD", len(vms), c.addr.SystemPath)}
}

// InsertMedia inserts the image at imageURL (http or https) in the virtual
// CD drive, write-protected, ejecting what the drive held first (many BMCs
// refuse to insert over inserted media); should the insert then fail, the
// drive is left empty.
func (c *Client) InsertMedia(ctx context.Context, imageURL string) error {
	u, err := url.Parse(imageURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("redfish: media image address: want an http or https URL")
	}
	if u.User != nil {
		return fmt.Errorf("redfish: media image address holds user information")
	}
	vm, err := c.cdDrive(ctx)
	if err != nil {
		return err
	}
	if vm.Inserted {
		if err := c.EjectVirtualMedia(ctx, vm); err != nil {
			return err
		}
	}
	yes := true
	return c.InsertVirtualMedia(ctx, vm, InsertMediaRequest{Image: imageURL, Inserted: &yes, WriteProtected: &yes})
}

// EjectMedia empties the virtual CD drive; an empty drive is left alone.
func (c *Client) EjectMedia(ctx context.Context) error {
	vm, err := c.cdDrive(ctx)
	if err != nil {
		return err
	}
	if !vm.Inserted {
		return nil
	}
	return c.EjectVirtualMedia(ctx, vm)
}

// SystemUUID returns the ComputerSystem's UUID in lower case ("" when the
// BMC reports none): the SMBIOS system UUID the server's OS sees.
func (c *Client) SystemUUID(ctx context.Context) (string, error) {
	sys, err := c.System(ctx)
	if err != nil {
		return "", err
	}
	return strings.ToLower(sys.UUID), nil
}
