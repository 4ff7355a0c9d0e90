package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/roostfleet/roost/netprofiles"
	"github.com/roostfleet/roost/netprofiles/dhcp4"
	"github.com/roostfleet/roost/netprofiles/hostnet"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// applyNetwork applies the configured NetworkProfile files and reports
// NetworkVerified; the error says what does not match.
func (a *Agent) applyNetwork(ctx context.Context) error {
	h, hs := a.host, a.hs
	if h.Netlink == nil {
		return nil
	}
	var errs []error
	applied := 0
	for _, p := range h.NetworkProfiles {
		data, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil {
			err = a.applyProfile(ctx, p, data)
		}
		if err != nil {
			errs = append(errs, err)
		}
		applied++
	}
	if applied == 0 {
		return nil
	}
	if err := errors.Join(errs...); err != nil {
		hs.set(CondNetworkVerified, "False", "Drift", err.Error())
		return err
	}
	hs.set(CondNetworkVerified, "True", "Verified", "the host matches its network profile")
	return nil
}

func (a *Agent) applyProfile(ctx context.Context, path string, data []byte) error {
	ms, err := resource.Decode(data, path, resource.ForApply())
	if err != nil {
		return err
	}
	for _, m := range ms {
		np := m.Object.GetNetworkProfile()
		if np == nil {
			return fmt.Errorf("%s: %s is not a NetworkProfile", path, m.Kind.Name)
		}
		name := np.GetMetadata().GetName()
		res, err := hostnet.Apply(ctx, a.host.Netlink, np.GetSpec(), hostnet.WithProfile(name))
		for _, act := range res.Actions {
			a.log.Info("network", "profile", name, "action", act.String())
		}
		a.startDHCP(ctx, np.GetSpec())
		if err != nil {
			return fmt.Errorf("network profile %s: %w", name, err)
		}
		if len(res.Drift) > 0 {
			return fmt.Errorf("network profile %s: host differs: %s", name, strings.Join(res.Drift, "; "))
		}
	}
	return nil
}

// startDHCP runs a DHCPv4 client (lease, default route, renewal) on every
// dhcp4 interface of spec that has none yet, until ctx ends.
func (a *Agent) startDHCP(ctx context.Context, spec *roostv1.NetworkProfileSpec) {
	if a.host.NewNetlink == nil {
		return
	}
	for _, iface := range netprofiles.DHCP4Interfaces(spec) {
		if a.hs.dhcp[iface] {
			continue
		}
		nl, err := a.host.NewNetlink()
		if err != nil {
			a.log.Warn("dhcp4: no netlink", "interface", iface, "err", err)
			continue
		}
		if a.hs.dhcp == nil {
			a.hs.dhcp = map[string]bool{}
		}
		a.hs.dhcp[iface] = true
		c := &dhcp4.Client{Iface: iface, NL: nl, Logf: func(format string, args ...any) { a.log.Info(fmt.Sprintf(format, args...)) }}
		go func() {
			if err := c.Run(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("dhcp4 client stopped", "interface", iface, "err", err)
			}
		}()
	}
}
