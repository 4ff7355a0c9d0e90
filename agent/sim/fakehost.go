package sim

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/roostfleet/roost/agent"
	"github.com/roostfleet/roost/agent/boot"
	"github.com/roostfleet/roost/agent/install"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Defaults of FakeHost.
const (
	// DefaultBootTime is how long a simulated Server is down in a reboot.
	DefaultBootTime = 5 * time.Second
	// DefaultAssessTimeout is a simulated boot assessment's timeout when
	// the Revision names none (the real agent's is 5 minutes).
	DefaultAssessTimeout = 30 * time.Second
	// DefaultRetry is the pause before a failed staging step is tried
	// again (the real agent's is 30 s).
	DefaultRetry = 10 * time.Second
	// FakeDiskSize is the size of a simulated Server's install disk: room
	// for the ESP and the smallest STATE (install.Prepare), and small, so
	// its ext4 file system takes few pages in memory.
	FakeDiskSize = 8 << 30
	// fakeDisk names the simulated install disk (a name no real host has:
	// the agent looks for its partitions' device nodes in /dev).
	fakeDisk = "simvda"
)

// FakeHost makes simulated Servers that install, stage and boot Revisions
// through the agent's own host loop (agent.Host) with in-memory and
// per-Server folder fakes of the operating system:
//
//   - the install disk is an install.MemDisks disk of FakeDiskSize, which
//     install.Prepare partitions and formats for real (FAT32 ESP, ext4
//     STATE), in memory;
//   - the mounted ESP and STATE are folders under Dir/agent-NNNNN (esp,
//     state); the enrollment image's state dir is Dir/agent-NNNNN/ram,
//     removed at every reboot, as RAM is;
//   - a reboot ends the agent (its streams drop), waits BootTime, lets
//     boot.ESP.FakeBoot choose the entry as systemd-boot does (counting
//     the try), and starts a new agent booted into that Revision, with
//     STATE as its state dir;
//   - the boot assessment checks the units the Revision requires
//     (boot.FakeUnits): they are active, or "failed" in every boot of a
//     Revision that the Server fails, which happens with probability
//     FailRate per Server and Revision, decided by Seed (so a run is
//     repeatable). The agent then reboots after the
//     assessment timeout, systemd-boot counts the tries down and falls
//     back to the previous entry, and the agent reports the Revision
//     failed — the real sequence, at simulated speed.
//
// Memory per simulated Server: its agent (a second gRPC connection while
// it rolls), about 13 memory-disk pages of its own (GPT, FAT32, the boot
// loader; the ext4 pages are shared between Servers) and, on disk, a few
// kilobytes of files per Revision.
type FakeHost struct {
	// Dir holds every simulated Server's folders (required).
	Dir string
	// BootTime is how long a reboot takes (0: none; the command's
	// default is DefaultBootTime).
	BootTime time.Duration
	// FailRate is the probability in [0, 1] that a Server fails the boot
	// assessment of a Revision (every try of it).
	FailRate float64
	// AssessTimeout bounds each boot assessment (Host.HealthTimeout;
	// default DefaultAssessTimeout); a Revision's own
	// bootAssessmentTimeout wins.
	AssessTimeout time.Duration
	// Retry is Host.Retry (default DefaultRetry).
	Retry time.Duration
	// TrustedKeys verify the releases' manifests (required to install
	// anything).
	TrustedKeys []ed25519.PublicKey
}

// server is one simulated Server's host: what survives its reboots.
type server struct {
	fh   *FakeHost
	c    *Counters
	i    int
	seed int64
	dir  string
	// disks holds the Server's install disk, /dev/simvda.
	disks *install.MemDisks
	log   *slog.Logger
}

// fakeDisks are the disks of simulated Server i with a fake host: its
// install disk alone (SimulatedServer's are too big to format in memory).
func fakeDisks(i int) []*roostv1.DiskInfo {
	return []*roostv1.DiskInfo{{Name: fakeDisk, SizeBytes: FakeDiskSize, Serial: fmt.Sprintf("SIMVDA%05d", i), Model: "Simulated virtio disk"}}
}

// withDefaults fills in the defaults.
func (fh *FakeHost) withDefaults() {
	if fh.AssessTimeout <= 0 {
		fh.AssessTimeout = DefaultAssessTimeout
	}
	if fh.Retry <= 0 {
		fh.Retry = DefaultRetry
	}
}

func (fh *FakeHost) newServer(c *Counters, i int, seed int64, log *slog.Logger) (*server, error) {
	s := &server{fh: fh, c: c, i: i, seed: seed, log: log, dir: filepath.Join(fh.Dir, fmt.Sprintf("agent-%05d", i)), disks: &install.MemDisks{TempDir: fh.Dir}}
	for _, d := range []string{filepath.Join(s.dir, "esp", filepath.FromSlash(install.EntriesDir)), filepath.Join(s.dir, "state")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	if err := s.disks.Add(fakeDisk, FakeDiskSize); err != nil {
		return nil, err
	}
	return s, nil
}

// fails reports whether this Server fails the boot assessment of
// Revision n: a stable draw from (seed, server, revision).
func (s *server) fails(n int64) bool {
	if s.fh.FailRate <= 0 || n == 0 {
		return false
	}
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(s.seed))
	binary.LittleEndian.PutUint64(b[8:], uint64(s.i))
	binary.LittleEndian.PutUint64(b[16:], uint64(n))
	h := sha256.Sum256(b[:])
	return float64(binary.LittleEndian.Uint64(h[:8]))/math.MaxUint64 < s.fh.FailRate
}

// rebooter ends the running agent: the simulated power cycle.
type rebooter struct {
	mu       sync.Mutex
	cancel   context.CancelFunc
	rebooted bool
}

func (r *rebooter) Reboot(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rebooted = true
	r.cancel()
	return nil
}

func (r *rebooter) done() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rebooted
}

// run boots the Server again and again until ctx ends: the enrollment
// image while no Revision is staged, then the entry FakeBoot picks. newAgent
// makes the agent of one boot.
func (s *server) run(ctx context.Context, newAgent func(store agent.Store, host *agent.Host) (*agent.Agent, error)) error {
	esp := boot.ESP{Dir: filepath.Join(s.dir, "esp")}
	ram, state := filepath.Join(s.dir, "ram"), filepath.Join(s.dir, "state")
	for {
		booted, err := esp.FakeBoot()
		if err != nil {
			return fmt.Errorf("simulated firmware: %w", err)
		}
		// The agent runs until it reboots the Server; an agent that stops
		// with an error is started again after AgentRestartDelay, in the
		// same boot, as systemd's Restart=always does on a real Server.
		failing := s.fails(booted)
		if failing {
			s.c.FailedBoots.Add(1)
		}
		for {
			rb, err := s.boot(ctx, booted, failing, ram, state, esp, newAgent)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return err
			}
			if rb.done() {
				break
			}
		}
		s.c.Reboots.Add(1)
		// Power cycle: RAM is gone, the Server is down for the boot time.
		if err := os.RemoveAll(ram); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.fh.BootTime):
		}
	}
}

// AgentRestartDelay is how long a simulated Server's agent that stopped
// with an error stays down before it runs again (RestartSec of
// roost-agent.service).
const AgentRestartDelay = 5 * time.Second

// boot runs the agent of boot booted once (failing: every unit of the
// boot fails): until it asks for a reboot (the returned rebooter is done)
// or ctx ends; or it stops with an error, which is counted and logged, and
// after AgentRestartDelay the caller runs it again. An error returned
// means the simulated host itself failed.
func (s *server) boot(ctx context.Context, booted int64, failing bool, ram, state string, esp boot.ESP,
	newAgent func(store agent.Store, host *agent.Host) (*agent.Agent, error)) (*rebooter, error) {
	stateDir := state // an installed Server mounts STATE at its state dir
	if booted == 0 {
		stateDir = ram // the enrollment image runs from RAM
	}
	// Every unit the Revision requires runs, or fails on a failing boot.
	units := &boot.FakeUnits{Default: "active"}
	if failing {
		units.Default = "failed"
	}
	bootCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	rb := &rebooter{cancel: cancel}
	host := &agent.Host{
		Disks: s.disks, Mounter: &boot.FakeMounter{}, Units: units, Rebooter: rb,
		FindPartition: func(name string) (string, error) {
			if name != install.ESPName {
				return "", fmt.Errorf("no partition named %s", name)
			}
			return "/dev/" + fakeDisk + "1", nil
		},
		BootedRevision: booted, StateDir: stateDir, ESPDir: esp.Dir, StateMountDir: state,
		TrustedKeys: s.fh.TrustedKeys, HealthTimeout: s.fh.AssessTimeout, Retry: s.fh.Retry,
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	a, err := newAgent(agent.FileStore{Dir: stateDir}, host)
	if err != nil {
		return nil, err
	}
	err = a.Run(bootCtx)
	if ctx.Err() != nil || rb.done() {
		return rb, nil
	}
	if err == nil {
		err = errors.New("the agent stopped without a reboot")
	}
	var refused *agent.RefusedError
	if errors.As(err, &refused) {
		return nil, err // enrollment refused: a restart would not help
	}
	s.c.Failed.Add(1)
	s.c.Restarts.Add(1)
	s.log.Error("agent stopped; restarting it", "agent", s.i, "err", err, "after", AgentRestartDelay)
	select {
	case <-ctx.Done():
	case <-time.After(AgentRestartDelay):
	}
	return rb, nil
}
