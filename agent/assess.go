package agent

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/roostfleet/roost/agent/boot"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// assess applies the network profile and, on a Server booted from disk,
// checks the booted Revision's health; then it marks the boot entry good
// and reports Revisions whose entries ran out of tries. A boot that stays
// unhealthy for HealthTimeout is rebooted, so that the boot loader counts
// the try and, after the last one, falls back to the previous entry.
func (a *Agent) assess(ctx context.Context) {
	h, hs := a.host, a.hs
	netErr := a.applyNetwork(ctx)
	n := h.BootedRevision
	if n == 0 {
		return
	}
	hs.stateRoot = h.StateDir
	if err := a.mountESP(""); err != nil {
		hs.set(CondHealthy, "False", "NoESP", err.Error())
		return
	}
	esp := boot.ESP{Dir: h.ESPDir}
	units, urls, timeout := DefaultRequiredUnits, []string(nil), h.HealthTimeout
	if spec, err := loadRevision(hs.stateRoot, n); err == nil {
		if len(spec.GetRequiredUnits()) > 0 {
			units = spec.GetRequiredUnits()
		}
		urls = spec.GetHealthUrls()
		if t := spec.GetBootAssessmentTimeout(); t.IsValid() && t.AsDuration() > 0 {
			timeout = t.AsDuration()
		}
	} else {
		a.log.Warn("no record of the booted revision; checking the default units", "revision", n, "err", err)
	}
	checked := fmt.Sprintf("units active (%s)", strings.Join(units, ", "))
	if len(urls) > 0 {
		checked += fmt.Sprintf(", healthy (%s)", strings.Join(urls, ", "))
	}
	deadline := a.o.Clock.Now().Add(timeout)
	for {
		err := netErr
		if err == nil {
			err = boot.CheckUnits(ctx, h.Units, units)
		}
		if err == nil {
			err = checkHealthURLs(ctx, h.HTTPClient, urls)
		}
		if err == nil {
			if berr := esp.Bless(n); berr != nil {
				err = fmt.Errorf("mark the boot entry good: %w", berr)
			}
		}
		if err == nil {
			hs.set(CondHealthy, "True", "BootAssessed", fmt.Sprintf("revision %d: network profile verified, %s; boot entry marked good", n, checked))
			failed, ferr := esp.Failed(n)
			if ferr != nil {
				a.log.Warn("reading boot entries", "err", ferr)
			}
			for _, f := range failed {
				a.log.Warn("revision failed", "revision", f.Number, "reason", f.Reason)
			}
			hs.setFailed(toProtoFailed(failed))
			a.log.Info("boot assessed healthy", "revision", n)
			return
		}
		if !a.o.Clock.Now().Before(deadline) {
			msg := fmt.Sprintf("revision %d unhealthy after %s: %v; rebooting so the boot loader counts this try", n, timeout, err)
			hs.set(CondHealthy, "False", "AssessmentFailed", msg)
			a.log.Error(msg)
			a.pause(ctx, 5*time.Second) // let the status reach the hub
			if rerr := h.Rebooter.Reboot(ctx); rerr != nil {
				a.log.Error("reboot failed", "err", rerr)
			}
			return
		}
		hs.set(CondHealthy, "False", "Assessing", fmt.Sprintf("revision %d: %v", n, err))
		if !a.pause(ctx, 5*time.Second) {
			return
		}
		if netErr != nil {
			netErr = a.applyNetwork(ctx)
		}
	}
}

// DefaultRequiredUnits are checked when the booted Revision's record does
// not name any.
var DefaultRequiredUnits = []string{"roost-agent.service"}

func toProtoFailed(fs []boot.FailedRevision) []*roostv1.FailedRevision {
	out := make([]*roostv1.FailedRevision, 0, len(fs))
	for _, f := range fs {
		out = append(out, &roostv1.FailedRevision{Number: f.Number, Reason: f.Reason})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number > out[j].Number })
	return out
}
