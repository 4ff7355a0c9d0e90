package agent

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/roostfleet/roost/agent/boot"
	"github.com/roostfleet/roost/agent/fetch"
	"github.com/roostfleet/roost/agent/install"
	"github.com/roostfleet/roost/netprofiles"
	"github.com/roostfleet/roost/netprofiles/dhcp4"
	"github.com/roostfleet/roost/netprofiles/hostnet"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
	"github.com/roostfleet/roost/resource"
)

// Conditions the agent reports (AgentStatus.conditions) about installing
// and booting Revisions.
const (
	// CondNetworkVerified: the network profile was applied and the host
	// matches it (no drift).
	CondNetworkVerified = "NetworkVerified"
	// CondHealthy: the boot assessment of the booted Revision passed and
	// its boot entry is marked good.
	CondHealthy = "Healthy"
	// CondInstalled: the install disk holds Roost's ESP and STATE.
	CondInstalled = "Installed"
	// CondStaged: the desired Revision is staged as a boot entry.
	CondStaged = "Staged"
	// CondLeaseGranted: the hub allowed the reboot into it.
	CondLeaseGranted = "LeaseGranted"
)

var condOrder = []string{"InventoryCollected", CondNetworkVerified, CondHealthy, CondInstalled, CondStaged, CondLeaseGranted}

// hostState is what the host side shares with the stream: conditions and
// failed Revisions to report, and the newest desired state to act on.
type hostState struct {
	mu        sync.Mutex
	conds     map[string]*roostv1.Condition
	failed    []*roostv1.FailedRevision
	hasFailed bool
	// dirty wakes the stream to send a status.
	dirty chan struct{}
	// desired holds the newest desired state for the host loop.
	desired chan *roostv1.DesiredState

	// owned by the host loop
	espMounted bool
	stateRoot  string
	// dhcp names the interfaces with a running DHCPv4 client.
	dhcp map[string]bool
}

func newHostState() *hostState {
	return &hostState{conds: map[string]*roostv1.Condition{}, dirty: make(chan struct{}, 1), desired: make(chan *roostv1.DesiredState, 1)}
}

func (s *hostState) notify() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}

// set records a condition and wakes the stream when it changed.
func (s *hostState) set(typ, status, reason, msg string) {
	s.mu.Lock()
	old := s.conds[typ]
	c := &roostv1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
	s.conds[typ] = c
	s.mu.Unlock()
	if old == nil || old.GetStatus() != status || old.GetReason() != reason || old.GetMessage() != msg {
		s.notify()
	}
}

func (s *hostState) setFailed(f []*roostv1.FailedRevision) {
	s.mu.Lock()
	s.failed, s.hasFailed = f, true
	s.mu.Unlock()
	s.notify()
}

// report adds the host's conditions and failed Revisions to st.
func (s *hostState) report(st *roostv1.AgentStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range condOrder {
		if c := s.conds[t]; c != nil {
			st.Conditions = append(st.Conditions, c)
		}
	}
	st.FailedRevisions, st.HasFailedRevisions = s.failed, s.hasFailed
}

// offer hands d to the host loop, replacing an older one not yet taken.
func (s *hostState) offer(d *roostv1.DesiredState) {
	for {
		select {
		case s.desired <- d:
			return
		default:
		}
		select {
		case <-s.desired:
		default:
		}
	}
}

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

// pause waits d; false when ctx ended.
func (a *Agent) pause(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-a.o.Clock.After(d):
		return true
	}
}

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

// roll moves the Server toward desired state d: install disk, artifacts,
// boot entry, Lease, reboot. It returns how long to wait before trying
// again (Lease refused), or an error (the step is retried after
// Host.Retry), or neither when there is nothing (more) to do.
func (a *Agent) roll(ctx context.Context, d *roostv1.DesiredState) (time.Duration, error) {
	h, hs := a.host, a.hs
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
		Ignition: spec.GetIgnition(), KernelArgs: spec.GetKernelArgs(), Extensions: exts,
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
	hs.set(CondStaged, "True", "Staged", fmt.Sprintf("revision %d is boot entry %s", n, boot.EntryName(n, boot.DefaultTries)))

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

// installDisk makes sure the install disk is prepared, the boot loader
// installed, STATE holds the agent's identity and the ESP is mounted. An
// installed Server (booted from disk) only mounts its ESP: its STATE is
// mounted at the state dir, and the disk is in use.
func (a *Agent) installDisk(ctx context.Context, client roostv1.AgentServiceClient, spec *roostv1.RevisionSpec, inv *roostv1.Inventory) error {
	h, hs := a.host, a.hs
	if hs.espMounted {
		return nil
	}
	fail := func(reason string, err error) error {
		hs.set(CondInstalled, "False", reason, err.Error())
		return err
	}
	if h.BootedRevision > 0 {
		hs.stateRoot = h.StateDir
		if err := a.mountESP(""); err != nil {
			return fail("NoESP", err)
		}
		hs.set(CondInstalled, "True", "Installed", "booted from the install disk")
		return nil
	}
	disk, err := install.Choose(inv.GetDisks(), spec.GetInstallDisk())
	if err != nil {
		return fail("NoInstallDisk", err)
	}
	dev := install.DevicePath(disk)
	// The raw disk is written with no partition of it mounted: an earlier
	// attempt may have left STATE mounted.
	if hs.stateRoot == h.StateMountDir {
		if err := h.Mounter.Unmount(h.StateMountDir); err != nil {
			return fail("PrepareFailed", err)
		}
		hs.stateRoot = ""
	}
	res, err := install.Prepare(ctx, h.Disks, dev, install.Options{AllowWipe: spec.GetWipeForeignDisks()})
	if err != nil {
		reason := "PrepareFailed"
		if errors.Is(err, install.ErrForeignDisk) {
			reason = "ForeignDisk"
		}
		return fail(reason, err)
	}
	for _, act := range res.Actions {
		a.log.Info("install disk", "device", dev, "action", act)
	}
	if spec.GetBootLoader().GetSha256() == "" {
		return fail("NoBootLoader", errors.New("the image release has no boot loader artifact"))
	}
	// systemd-boot is small: fetched to RAM, so the disk stays unmounted
	// until the boot loader is on it
	path, err := fetch.Fetch(ctx, client, spec.GetBootLoader(), filepath.Join(filepath.Dir(h.StateMountDir), "bootloader"), nil)
	if err != nil {
		return fail("ArtifactsUnavailable", err)
	}
	efi, err := os.ReadFile(path)
	if err != nil {
		return fail("BootLoaderFailed", err)
	}
	if err := install.InstallBootLoader(ctx, h.Disks, dev, efi); err != nil {
		return fail("BootLoaderFailed", err)
	}
	statePart, espPart := partitionDevice(dev, install.StatePartition), partitionDevice(dev, install.ESPPartition)
	if err := waitForDevice(ctx, a.o.Clock, dev, espPart, statePart); err != nil {
		return fail("PrepareFailed", err)
	}
	// The boot loader went to the disk through dev; the mounts read
	// through the partition devices.
	if err := h.Disks.Sync(ctx, dev, espPart, statePart); err != nil {
		return fail("PrepareFailed", err)
	}
	if err := h.Mounter.Mount(statePart, h.StateMountDir, "ext4"); err != nil {
		return fail("PrepareFailed", err)
	}
	hs.stateRoot = h.StateMountDir
	if err := a.persistIdentity(); err != nil {
		return fail("PrepareFailed", err)
	}
	if err := a.mountESP(espPart); err != nil {
		return fail("PrepareFailed", err)
	}
	hs.set(CondInstalled, "True", "Installed", fmt.Sprintf("install disk %s (%s): %s and %s, systemd-boot", dev, install.FormatSize(disk.GetSizeBytes()), install.ESPName, install.StateName))
	return nil
}

// mountESP mounts the ESP (dev, or the partition named install.ESPName).
func (a *Agent) mountESP(dev string) error {
	h, hs := a.host, a.hs
	if hs.espMounted {
		return nil
	}
	if dev == "" {
		var err error
		if dev, err = h.FindPartition(install.ESPName); err != nil {
			return err
		}
	}
	if err := h.Mounter.Mount(dev, h.ESPDir, "vfat"); err != nil {
		return err
	}
	hs.espMounted = true
	return nil
}

// fetchVerified checks the release manifest's signature with the trusted
// keys and that it lists the Revision's kernel and initrd, and each
// extension's signed manifest; then it downloads them all (resumable,
// sha256-checked) into STATE's cache.
func (a *Agent) fetchVerified(ctx context.Context, client roostv1.AgentServiceClient, spec *roostv1.RevisionSpec) (kernel, initrd string, exts []boot.Extension, err error) {
	if err := VerifyRelease(spec, a.host.TrustedKeys); err != nil {
		return "", "", nil, err
	}
	for _, x := range spec.GetExtensions() {
		if err := VerifyExtension(x, a.host.TrustedKeys); err != nil {
			return "", "", nil, err
		}
	}
	dir := filepath.Join(a.hs.stateRoot, CacheDir)
	fctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	if kernel, err = fetch.Fetch(fctx, client, spec.GetKernel(), dir, nil); err != nil {
		return "", "", nil, fmt.Errorf("kernel: %w", err)
	}
	if initrd, err = fetch.Fetch(fctx, client, spec.GetInitrd(), dir, nil); err != nil {
		return "", "", nil, fmt.Errorf("initrd: %w", err)
	}
	for _, x := range spec.GetExtensions() {
		p, err := fetch.Fetch(fctx, client, x.GetImage(), dir, nil)
		if err != nil {
			return "", "", nil, fmt.Errorf("extension %s %s: %w", x.GetName(), x.GetVersion(), err)
		}
		exts = append(exts, boot.Extension{Name: x.GetName(), Path: p, SHA256: x.GetImage().GetSha256()})
	}
	return kernel, initrd, exts, nil
}

// VerifyRelease checks that spec's release manifest is signed by one of
// keys (ed25519 over the manifest bytes, signature base64) and lists the
// kernel, initrd and boot loader digests spec names; the check is
// releasesig.Verify, the same the hub runs on trusted keys. Errors say
// which check failed.
func VerifyRelease(spec *roostv1.RevisionSpec, keys []ed25519.PublicKey) error {
	if len(keys) == 0 {
		return errors.New("no trusted release keys: add releaseKeys to the agent config (roost-image enroll --release-key)")
	}
	_, err := releasesig.Verify(releasesig.FromRevision(spec), keys)
	return err
}

// VerifyExtension checks that x's manifest is signed by one of keys and
// names x's image (digest, size), name and version: releasesig's check,
// the same the hub runs when an Extension is pushed.
func VerifyExtension(x *roostv1.RevisionExtension, keys []ed25519.PublicKey) error {
	if len(keys) == 0 {
		return errors.New("no trusted release keys: add releaseKeys to the agent config (roost-image enroll --release-key)")
	}
	return releasesig.VerifyExtension(releasesig.FromRevisionExtension(x), keys)
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

// persistIdentity copies the agent's state files to STATE when the state
// dir is elsewhere (the enrollment image runs from RAM), so the installed
// Server keeps its identity.
func (a *Agent) persistIdentity() error {
	h, hs := a.host, a.hs
	if hs.stateRoot == "" || filepath.Clean(hs.stateRoot) == filepath.Clean(h.StateDir) {
		return nil
	}
	for _, name := range []string{KeyFile, CertFile, CAFile, StateFile, ReleaseKeysFile} {
		if err := copyFile(filepath.Join(h.StateDir, name), filepath.Join(hs.stateRoot, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("keep the agent identity on %s: %w", install.StateName, err)
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// saveRevision records spec in STATE (RevisionsDir/N.json).
func saveRevision(root string, spec *roostv1.RevisionSpec) error {
	dir := filepath.Join(root, RevisionsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	data, err := protojson.Marshal(spec)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".%d.json.tmp", spec.GetNumber()))
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, fmt.Sprintf("%d.json", spec.GetNumber())))
}

func loadRevision(root string, n int64) (*roostv1.RevisionSpec, error) {
	data, err := os.ReadFile(filepath.Join(root, RevisionsDir, fmt.Sprintf("%d.json", n)))
	if err != nil {
		return nil, err
	}
	spec := &roostv1.RevisionSpec{}
	return spec, protojson.Unmarshal(data, spec)
}

// partitionDevice names partition n of disk dev: /dev/sda → /dev/sda2,
// /dev/nvme0n1 → /dev/nvme0n1p2 (a "p" when the disk name ends in a digit).
func partitionDevice(dev string, n int) string {
	if dev != "" && dev[len(dev)-1] >= '0' && dev[len(dev)-1] <= '9' {
		return fmt.Sprintf("%sp%d", dev, n)
	}
	return fmt.Sprintf("%s%d", dev, n)
}

// waitForDevice waits up to 10 s for the partition device nodes devs of
// disk to appear (the kernel re-reads the partition table after Prepare).
// When disk is no device node (fake disks in tests are image files named
// /dev/NAME only to Disks) nothing is waited for, and so are paths that
// are not under /dev.
func waitForDevice(ctx context.Context, clock Clock, disk string, devs ...string) error {
	if st, err := os.Stat(disk); err != nil || st.Mode()&os.ModeDevice == 0 {
		return nil
	}
	for _, d := range devs {
		if !strings.HasPrefix(d, "/dev/") {
			continue
		}
		deadline := clock.Now().Add(10 * time.Second)
		for {
			if _, err := os.Stat(d); err == nil {
				break
			}
			if !clock.Now().Before(deadline) {
				return fmt.Errorf("%s did not appear after the partition table was written", d)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-clock.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

func toProtoFailed(fs []boot.FailedRevision) []*roostv1.FailedRevision {
	out := make([]*roostv1.FailedRevision, 0, len(fs))
	for _, f := range fs {
		out = append(out, &roostv1.FailedRevision{Number: f.Number, Reason: f.Reason})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number > out[j].Number })
	return out
}
