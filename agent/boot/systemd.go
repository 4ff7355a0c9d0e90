package boot

import (
	"context"
	"fmt"
	"strings"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// Rebooter reboots the machine.
type Rebooter interface {
	// Reboot asks the init system for an orderly reboot and returns once
	// the request is queued; the process keeps running until shutdown
	// stops it.
	Reboot(ctx context.Context) error
}

// Units reads the state of systemd units.
type Units interface {
	// ActiveState returns a unit's ActiveState property: "active",
	// "reloading", "inactive", "failed", "activating" or "deactivating"
	// (org.freedesktop.systemd1.Unit; systemd reports "inactive" for a
	// unit it does not know).
	ActiveState(ctx context.Context, name string) (string, error)
	// Stop stops a unit (job mode "replace", as systemctl stop) and waits
	// for the job; a unit systemd does not know is already stopped.
	Stop(ctx context.Context, name string) error
	// Reload reloads systemd's unit files (systemctl daemon-reload).
	Reload(ctx context.Context) error
}

// Systemd is the real Rebooter and Units: it talks to systemd (PID 1) over
// its private socket /run/systemd/private, which needs root but no
// dbus-daemon. Each call opens and closes its own connection.
type Systemd struct{}

var (
	_ Rebooter = Systemd{}
	_ Units    = Systemd{}
)

func connect(ctx context.Context) (*sddbus.Conn, error) {
	c, err := sddbus.NewSystemdConnectionContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to systemd: %w", err)
	}
	return c, nil
}

// Reboot starts reboot.target with job mode "replace-irreversibly", as
// systemctl reboot does, and returns once the job is queued.
func (Systemd) Reboot(ctx context.Context) error {
	c, err := connect(ctx)
	if err != nil {
		return fmt.Errorf("reboot: %w", err)
	}
	defer c.Close()
	if _, err := c.StartUnitContext(ctx, "reboot.target", "replace-irreversibly", nil); err != nil {
		return fmt.Errorf("reboot: start reboot.target: %w", err)
	}
	return nil
}

// ActiveState reads the unit's ActiveState property.
func (Systemd) ActiveState(ctx context.Context, name string) (string, error) {
	c, err := connect(ctx)
	if err != nil {
		return "", fmt.Errorf("unit %s: %w", name, err)
	}
	defer c.Close()
	p, err := c.GetUnitPropertyContext(ctx, name, "ActiveState")
	if err != nil {
		return "", fmt.Errorf("unit %s: %w", name, err)
	}
	s, ok := p.Value.Value().(string)
	if !ok {
		return "", fmt.Errorf("unit %s: ActiveState is %s, not a string", name, p.Value.Signature())
	}
	return s, nil
}

// Stop stops the unit and waits for the job to finish.
func (Systemd) Stop(ctx context.Context, name string) error {
	c, err := connect(ctx)
	if err != nil {
		return fmt.Errorf("stop %s: %w", name, err)
	}
	defer c.Close()
	done := make(chan string, 1)
	if _, err := c.StopUnitContext(ctx, name, "replace", done); err != nil {
		if strings.Contains(err.Error(), "not loaded") || strings.Contains(err.Error(), "NoSuchUnit") {
			return nil
		}
		return fmt.Errorf("stop %s: %w", name, err)
	}
	select {
	case r := <-done:
		if r != "done" {
			return fmt.Errorf("stop %s: job %s", name, r)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop %s: %w", name, ctx.Err())
	}
}

// Reload runs a daemon-reload and returns once it is done.
func (Systemd) Reload(ctx context.Context) error {
	c, err := connect(ctx)
	if err != nil {
		return fmt.Errorf("daemon-reload: %w", err)
	}
	defer c.Close()
	if err := c.ReloadContext(ctx); err != nil {
		return fmt.Errorf("daemon-reload: %w", err)
	}
	return nil
}
