package redfish

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/roostfleet/roost/bmc"
)

// get reads the resource at path into out.
func (c *Client) get(ctx context.Context, path string, out any) (*response, error) {
	return c.do(ctx, http.MethodGet, path, nil, out, "")
}

// ServiceRoot reads /redfish/v1.
func (c *Client) ServiceRoot(ctx context.Context) (*ServiceRoot, error) {
	var root ServiceRoot
	if _, err := c.get(ctx, "/redfish/v1", &root); err != nil {
		return nil, err
	}
	return &root, nil
}

// System reads the client's ComputerSystem; its ETag is set from the
// response's ETag header, or else from @odata.etag.
func (c *Client) System(ctx context.Context) (*ComputerSystem, error) {
	var sys ComputerSystem
	resp, err := c.get(ctx, c.addr.SystemPath, &sys)
	if err != nil {
		return nil, err
	}
	sys.ETag = resp.header.Get("ETag")
	if sys.ETag == "" {
		sys.ETag = sys.ODataEtag
	}
	return &sys, nil
}

// Reset runs the ComputerSystem.Reset action with rt. When the BMC lists
// the allowable ResetType values and rt is not one, the error wraps
// bmc.ErrUnsupported and nothing is sent.
func (c *Client) Reset(ctx context.Context, rt ResetType) error {
	sys, err := c.System(ctx)
	if err != nil {
		return err
	}
	return c.reset(ctx, sys, rt)
}

func (c *Client) reset(ctx context.Context, sys *ComputerSystem, rt ResetType) error {
	act := sys.Actions.Reset
	if act == nil || act.Target == "" {
		return &Error{Op: "ComputerSystem.Reset", Kind: bmc.ErrUnsupported, Detail: "the system has no Reset action"}
	}
	if len(act.AllowableResetTypes) > 0 && !slices.Contains(act.AllowableResetTypes, rt) {
		return &Error{Op: "POST " + act.Target, Kind: bmc.ErrUnsupported, Detail: fmt.Sprintf("ResetType %s is not one of %v", rt, act.AllowableResetTypes)}
	}
	_, err := c.do(ctx, http.MethodPost, act.Target, ResetRequest{ResetType: rt}, nil, "")
	return err
}

// SetBootOverride PATCHes the system's Boot with target and enabled, with
// If-Match set to the system's ETag when it has one; if the resource
// changed in between (HTTP 412) it reads it again and retries once. When
// the BMC lists the allowable targets and target is not one, the error
// wraps bmc.ErrUnsupported and nothing is sent.
func (c *Client) SetBootOverride(ctx context.Context, target BootSource, enabled BootSourceOverrideEnabled) error {
	for attempt := 0; ; attempt++ {
		sys, err := c.System(ctx)
		if err != nil {
			return err
		}
		if allowed := sys.Boot.AllowableTargets; len(allowed) > 0 && !slices.Contains(allowed, target) {
			return &Error{Op: "PATCH " + sys.ODataID, Kind: bmc.ErrUnsupported, Detail: fmt.Sprintf("BootSourceOverrideTarget %s is not one of %v", target, allowed)}
		}
		patch := struct {
			Boot Boot `json:"Boot"`
		}{Boot{BootSourceOverrideTarget: target, BootSourceOverrideEnabled: enabled}}
		_, err = c.do(ctx, http.MethodPatch, c.addr.SystemPath, patch, nil, sys.ETag)
		var rerr *Error
		if attempt == 0 && errors.As(err, &rerr) && rerr.StatusCode == http.StatusPreconditionFailed {
			continue
		}
		return err
	}
}

// Managers reads the managers of the system (its Links.ManagedBy).
func (c *Client) Managers(ctx context.Context) ([]Manager, error) {
	sys, err := c.System(ctx)
	if err != nil {
		return nil, err
	}
	return c.managers(ctx, sys)
}

func (c *Client) managers(ctx context.Context, sys *ComputerSystem) ([]Manager, error) {
	var out []Manager
	for _, ref := range sys.Links.ManagedBy {
		var m Manager
		if _, err := c.get(ctx, ref.ODataID, &m); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// VirtualMedia reads the virtual drives of the system: those of its
// managers (Links.ManagedBy → Manager.VirtualMedia) and, on services that
// have them, the system's own (ComputerSystem.VirtualMedia), without
// duplicates.
func (c *Client) VirtualMedia(ctx context.Context) ([]VirtualMedia, error) {
	sys, err := c.System(ctx)
	if err != nil {
		return nil, err
	}
	mgrs, err := c.managers(ctx, sys)
	if err != nil {
		return nil, err
	}
	var collections []string
	for _, m := range mgrs {
		if m.VirtualMedia != nil && m.VirtualMedia.ODataID != "" {
			collections = append(collections, m.VirtualMedia.ODataID)
		}
	}
	if sys.VirtualMedia != nil && sys.VirtualMedia.ODataID != "" {
		collections = append(collections, sys.VirtualMedia.ODataID)
	}
	var out []VirtualMedia
	seen := map[string]bool{}
	for _, path := range collections {
		var coll Collection
		if _, err := c.get(ctx, path, &coll); err != nil {
			return nil, err
		}
		for _, ref := range coll.Members {
			if seen[ref.ODataID] {
				continue
			}
			seen[ref.ODataID] = true
			var vm VirtualMedia
			if _, err := c.get(ctx, ref.ODataID, &vm); err != nil {
				return nil, err
			}
			out = append(out, vm)
		}
	}
	return out, nil
}

// InsertVirtualMedia runs VirtualMedia.InsertMedia on vm with req.
func (c *Client) InsertVirtualMedia(ctx context.Context, vm *VirtualMedia, req InsertMediaRequest) error {
	act := vm.Actions.InsertMedia
	if act == nil || act.Target == "" {
		return &Error{Op: "VirtualMedia.InsertMedia", Kind: bmc.ErrUnsupported, Detail: "virtual media " + vm.ODataID + " has no InsertMedia action"}
	}
	_, err := c.do(ctx, http.MethodPost, act.Target, req, nil, "")
	return err
}

// EjectVirtualMedia runs VirtualMedia.EjectMedia on vm.
func (c *Client) EjectVirtualMedia(ctx context.Context, vm *VirtualMedia) error {
	act := vm.Actions.EjectMedia
	if act == nil || act.Target == "" {
		return &Error{Op: "VirtualMedia.EjectMedia", Kind: bmc.ErrUnsupported, Detail: "virtual media " + vm.ODataID + " has no EjectMedia action"}
	}
	_, err := c.do(ctx, http.MethodPost, act.Target, struct{}{}, nil, "")
	return err
}
