package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/roostfleet/roost/agent/boot"
	"github.com/roostfleet/roost/agent/install"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// hostLoop assesses this boot, then installs, stages and reboots into
// each desired Revision the hub sends, until ctx ends.
func (a *Agent) hostLoop(ctx context.Context) {
	h, hs := a.host, a.hs
	a.assess(ctx)
	var cur *roostv1.DesiredState
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-hs.desired:
			cur = d
		case <-retry:
		}
		retry = nil
		if cur == nil {
			continue
		}
		wait, err := a.roll(ctx, cur)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			a.log.Warn("revision rollout step failed; retrying", "revision", cur.GetRevision(), "err", err, "after", h.Retry)
			retry = a.o.Clock.After(h.Retry)
		case wait > 0:
			retry = a.o.Clock.After(wait)
		default:
			cur = nil
		}
	}
}

// pause waits d; false when ctx ended.
func (a *Agent) pause(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-a.o.Clock.After(d):
		return true
	}
}

// roll moves the Server toward desired state d: a cleaning (clean.go)
// when the hub asks for one; else install disk, artifacts, boot entry,
// Lease, reboot. It returns how long to wait before trying
// again (Lease refused), or an error (the step is retried after
// Host.Retry), or neither when there is nothing (more) to do.
func (a *Agent) roll(ctx context.Context, d *roostv1.DesiredState) (time.Duration, error) {
	h, hs := a.host, a.hs
	if c := d.GetCleaning(); c != nil {
		if hs.cleanedIndex() == c.GetIndex() {
			hs.resendCleaning() // asked again on a new stream: the result may be lost
			return 0, nil
		}
		hs.setCleaning(a.clean(ctx, c))
		return 0, nil
	}
	n, spec := d.GetRevision(), d.GetSpec()
	switch {
	case n == 0 || n == h.BootedRevision:
		return 0, nil
	case d.GetFailed():
		a.log.Info("desired revision failed; waiting for a new one", "revision", n)
		return 0, nil
	case spec == nil || spec.GetNumber() != n:
		return 0, fmt.Errorf("desired state names revision %d but carries spec for %d", n, spec.GetNumber())
	}
	inv := a.sentInventory()
	if err := install.CheckFirmware(inv); err != nil {
		hs.set(CondInstalled, "False", "UnsupportedFirmware", err.Error())
		return 0, err
	}
	client, closeConn, err := a.workerClient()
	if err != nil {
		return 0, err
	}
	defer closeConn()
	if err := a.installDisk(ctx, client, spec, inv); err != nil {
		return 0, err
	}
	esp := boot.ESP{Dir: h.ESPDir}
	if failed, err := esp.Failed(h.BootedRevision); err == nil {
		for _, f := range failed {
			if f.Number == n {
				hs.setFailed(toProtoFailed(failed))
				return 0, nil // the hub marks it failed and sends a new desired state
			}
		}
	}
	kernel, initrd, exts, err := a.fetchVerified(ctx, client, spec)
	if err != nil {
		hs.set(CondStaged, "False", "ArtifactsUnavailable", err.Error())
		return 0, err
	}
	if err := esp.Stage(boot.StageSpec{
		Revision: n, Title: fmt.Sprintf("Roost revision %d (%s, image %s)", n, spec.GetHostname(), spec.GetImageVersion()),
		KernelPath: kernel, InitrdPath: initrd, KernelSHA256: spec.GetKernel().GetSha256(), InitrdSHA256: spec.GetInitrd().GetSha256(),
		Ignition: spec.GetIgnition(), KernelArgs: spec.GetKernelArgs(), Extensions: exts, Tries: int(spec.GetBootTries()),
	}); err != nil {
		hs.set(CondStaged, "False", "StagingFailed", err.Error())
		return 0, err
	}
	keep := []int64{n}
	if h.BootedRevision > 0 {
		keep = append(keep, h.BootedRevision)
	}
	if err := esp.Prune(keep...); err != nil {
		a.log.Warn("pruning old boot entries", "err", err)
	}
	if err := saveRevision(hs.stateRoot, spec); err != nil {
		hs.set(CondStaged, "False", "StagingFailed", err.Error())
		return 0, err
	}
	hs.set(CondStaged, "True", "Staged", fmt.Sprintf("revision %d is boot entry %s", n, boot.EntryName(n, cmp.Or(int(spec.GetBootTries()), boot.DefaultTries))))

	lctx, cancel := context.WithTimeout(ctx, CallTimeout)
	resp, err := client.AcquireLease(lctx, &roostv1.AcquireLeaseRequest{Revision: n})
	cancel()
	if err != nil {
		hs.set(CondLeaseGranted, "False", "LeaseError", err.Error())
		return 0, err
	}
	if !resp.GetGranted() {
		wait := time.Duration(max(resp.GetRetryAfterSeconds(), 5)) * time.Second
		hs.set(CondLeaseGranted, "False", "WaitingForLease", resp.GetReason())
		a.log.Info("lease refused; waiting", "revision", n, "reason", resp.GetReason(), "retry", wait)
		return wait, nil
	}
	hs.set(CondLeaseGranted, "True", "Granted", fmt.Sprintf("reboot into revision %d (fencing token %d)", n, resp.GetFencingToken()))
	if err := a.persistIdentity(); err != nil {
		return 0, err
	}
	a.log.Info("rebooting into the new revision", "revision", n, "fencing", resp.GetFencingToken())
	a.pause(ctx, 2*time.Second) // let the status reach the hub
	if err := h.Rebooter.Reboot(ctx); err != nil {
		return 0, fmt.Errorf("reboot: %w", err)
	}
	// systemd stops the agent; should it not, wait rather than roll again
	a.pause(ctx, 10*time.Minute)
	return 0, nil
}

// workerClient dials the first reachable hub for the host loop's calls
// (downloads, Leases) on a connection of its own.
func (a *Agent) workerClient() (roostv1.AgentServiceClient, func(), error) {
	hubs := a.hubList()
	if len(hubs) == 0 {
		return nil, nil, errors.New("no hub addresses")
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(a.mtls)),
		grpc.WithUserAgent("roost-agent/" + a.o.Version),
		grpc.WithDisableServiceConfig(),
	}
	opts = append(opts, a.o.DialOptions...)
	conn, err := grpc.NewClient("passthrough:///"+hubs[0], opts...)
	if err != nil {
		return nil, nil, err
	}
	return roostv1.NewAgentServiceClient(conn), func() { conn.Close() }, nil
}
