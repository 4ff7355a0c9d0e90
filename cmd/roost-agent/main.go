// Command roost-agent is the daemon on every Server: it enrolls with the
// hub once (with an enrollment token), then keeps a live stream to it with
// its own client certificate.
//
//	roost-agent [--config /etc/roost/agent.yaml] [--hub A,B,C] [--ca FILE] [--token SECRET] [--state-dir DIR]
//	roost-agent simulate --count N --hub A,B,C --ca FILE --token SECRET [--state-dir DIR] [--heartbeat 10s]
//	roost-agent --version
//
// Exit status: 0 on SIGTERM/SIGINT, 2 when the hub refuses enrollment
// (wrong, expired, revoked or used-up token), 1 on other errors.
package main

import (
	"context"
	"crypto/ed25519"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/roostfleet/roost/agent"
	"github.com/roostfleet/roost/agent/boot"
	"github.com/roostfleet/roost/agent/config"
	"github.com/roostfleet/roost/agent/sim"
	"github.com/roostfleet/roost/imagebuilder/ignition"
	"github.com/roostfleet/roost/internal/atomicfile"
	"github.com/roostfleet/roost/version"
)

// exitRefused is the exit status when the hub refuses enrollment.
const exitRefused = 2

type flags struct {
	manageHost                                bool
	config, caFile, token, stateDir, logLevel string
	hubs                                      []string
	sysRoot, procRoot                         string
}

func main() {
	var f flags
	root := &cobra.Command{
		Use:   "roost-agent",
		Short: "Run the Roost agent on this Server",
		Long: `roost-agent enrolls this Server with the Roost hub and keeps a live stream to it.

Its configuration is ` + config.DefaultPath + ` (written by the enrollment image):

  apiVersion: roost.io/v1
  kind: AgentConfig
  hubs: [10.0.0.1:7443, 10.0.0.2:7443, 10.0.0.3:7443]
  caBundle: |            # or caFile: /etc/roost/hub-ca.pem
    -----BEGIN CERTIFICATE-----
    ...
  token: abcdef.0123456789abcdef
  stateDir: /var/lib/roost

The flags override the file, so the agent can run by hand without one.
On first start it generates its key in the state dir and enrolls with the
token; from then on it authenticates with its certificate alone.`,
		Example: `  # as the enrollment image runs it
  roost-agent --config /etc/roost/agent.yaml

  # by hand, without a config file
  roost-agent --config "" --hub 10.0.0.1:7443 --ca hub-ca.pem --token abcdef.0123456789abcdef \
      --state-dir /var/lib/roost`,
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := logger(f.logLevel)
			if err != nil {
				return err
			}
			cfg, err := resolve(cmd, f)
			if err != nil {
				return err
			}
			ca, err := cfg.CA()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			var host *agent.Host
			if f.manageHost {
				if host, err = newHost(cfg, log); err != nil {
					return err
				}
			}
			a, err := agent.New(agent.Options{
				Host: host,
				Hubs: cfg.Hubs, CA: ca, Token: cfg.Token, Version: version.Version,
				Store:     agent.FileStore{Dir: cfg.StateDirOrDefault()},
				Identity:  agent.SysfsIdentity{Root: f.sysRoot, PermAddr: agent.DefaultPermAddr},
				Inventory: agent.HostInventory{SysRoot: f.sysRoot, ProcRoot: f.procRoot, Logger: log},
				Logger:    log,
				Journal:   agent.Journalctl{},
				Commands:  agent.ExecCommands{},
			})
			if err != nil {
				return err
			}
			log.Info("roost-agent starting", "version", version.Version, "state_dir", cfg.StateDirOrDefault(), "hubs", strings.Join(cfg.Hubs, ","))
			err = a.Run(ctx)
			if err == nil {
				log.Info("roost-agent stopped")
			}
			return err
		},
	}
	root.SetVersionTemplate("roost-agent {{.Version}}\n")
	fl := root.Flags()
	fl.StringVar(&f.config, "config", config.DefaultPath, "agent configuration file (missing is fine when the flags say enough)")
	addCommon(root, &f)
	fl.BoolVar(&f.manageHost, "manage-host", true, "install the disk, apply network profiles and reboot into Revisions\n(false: only enroll and report, e.g. when trying the agent on a workstation)")
	fl.StringVar(&f.sysRoot, "sys-root", "/sys", "where sysfs is mounted (tests)")
	fl.StringVar(&f.procRoot, "proc-root", "/proc", "where procfs is mounted (tests)")
	_ = fl.MarkHidden("sys-root")
	_ = fl.MarkHidden("proc-root")
	root.AddCommand(simulateCmd())

	if err := root.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "roost-agent: %v\n", err)
		var refused *agent.RefusedError
		if errors.As(err, &refused) {
			os.Exit(exitRefused)
		}
		os.Exit(1)
	}
}

func addCommon(cmd *cobra.Command, f *flags) {
	fl := cmd.Flags()
	fl.StringSliceVar(&f.hubs, "hub", nil, "hub member API addresses host:port, comma-separated (overrides hubs:)")
	fl.StringVar(&f.caFile, "ca", "", "PEM file with the hub CA (overrides caBundle:/caFile:)")
	fl.StringVar(&f.token, "token", "", "enrollment token secret (overrides token:)")
	fl.StringVar(&f.stateDir, "state-dir", "", "state directory (overrides stateDir:; default "+config.DefaultStateDir+")")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
}

// resolve loads the configuration file (a missing default file is fine)
// and applies the flags over it.
func resolve(cmd *cobra.Command, f flags) (*config.AgentConfig, error) {
	cfg := &config.AgentConfig{APIVersion: config.APIVersion, Kind: config.Kind}
	if f.config != "" {
		c, err := config.Load(f.config)
		switch {
		case err == nil:
			cfg = c
		case errors.Is(err, fs.ErrNotExist) && !cmd.Flags().Changed("config"):
		default:
			return nil, err
		}
	}
	if len(f.hubs) > 0 {
		cfg.Hubs = f.hubs
	}
	if f.caFile != "" {
		cfg.CABundle, cfg.CAFile = "", f.caFile
	}
	if f.token != "" {
		cfg.Token = f.token
	}
	if f.stateDir != "" {
		cfg.StateDir = f.stateDir
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("flags: %w", err)
	}
	return cfg, nil
}

// logger returns a journald-friendly logger: text key=value lines on
// standard error, no colours.
func logger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

func simulateCmd() *cobra.Command {
	var f flags
	var o sim.Options
	var h sim.FakeHost
	var hostMode, hostDir string
	var keyFiles []string
	cmd := &cobra.Command{
		Use:   "simulate --count N --hub A,B,C --ca FILE --token SECRET",
		Short: "Run N simulated agents in this process against a real hub",
		Long: `simulate runs N agents in this process with fake OS adapters (a distinct
synthetic identity and inventory each; the same seed gives the same
Servers) against a real hub, reusing the agent's own code. It prints the
enrolled/connected counts once a second on standard output, until stopped
(SIGTERM/SIGINT) or --duration passes. Failed enrollments are counted; run
with --log-level info to see why.

--host none (the default): the agents enroll, connect, send Hello, their
inventory and heartbeats, receive desired state and acknowledge its
generation — and that is all. They never install or stage a Revision, never
take a reboot Lease and never report a boot, so their Machines stay
Scheduled and a rollout over them never progresses. This measures
enrollment and connection load on the hub.

--host fake: every simulated Server also runs the agent's host loop over
fake operating-system adapters, so a real hub can roll it:
  - its install disk (simvda, 8 GiB, the only disk in its inventory) lives
    in memory: the agent partitions and formats it for real (GPT, FAT32
    ESP, and STATE laid down from one real mkfs.ext4 shared by all
    Servers; mkfs.ext4 must be installed);
  - the mounted ESP and STATE are folders under --host-dir/agent-NNNNN;
    the agent downloads the Revision's artifacts over mTLS, checks them
    against the release signature (--release-key) and stages the boot
    entry with boot counting, exactly as on a real Server;
  - it asks the hub for a Lease; when granted it "reboots": its stream
    drops, it is down for --boot-time, the simulated firmware picks the
    entry the way systemd-boot does (counting the try), and a new agent
    starts booted into that Revision with its identity from STATE;
  - the boot assessment passes, or fails for every boot of a Revision on a
    Server with probability --fail-rate (a stable draw per Server and
    Revision from --seed): the agent then reboots after
    --assess-timeout, the entry runs out of its 3 tries, the firmware
    falls back to the previous Revision and the agent reports the failure,
    which halts the Pool's rollout.
The progress line then also counts reboots and failed boots. Memory per
simulated Server: its agent and TLS connections, about 60 KB of disk pages
and a few KB of files; measure it with 'make scale'.`,
		Example: `  # 500 agents against a local hub, 50 started per second, for two minutes
  roostctl token create --ttl 1h -o json | jq -r .token > /tmp/token
  roost-agent simulate --count 500 --rate 50 --duration 2m \
      --hub 127.0.0.1:7443 --ca /var/lib/roost-hub/tls/ca.crt --token "$(cat /tmp/token)"

  # 2,000 Servers that install and roll, 5 s reboots, 1% failing each release
  roost-agent simulate --host fake --count 2000 --boot-time 5s --fail-rate 0.01 \
      --release-key release.pub --host-dir /var/tmp/sim \
      --hub 127.0.0.1:7443 --ca /var/lib/roost-hub/tls/ca.crt --token "$(cat /tmp/token)"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := logger(f.logLevel)
			if err != nil {
				return err
			}
			f.config = ""
			cfg, err := resolve(cmd, f)
			if err != nil {
				return err
			}
			if len(cfg.Hubs) == 0 {
				return errors.New("simulate: --hub is required")
			}
			dur, _ := cmd.Flags().GetDuration("duration")
			if err := checkSimulateFlags(o, dur); err != nil {
				return err
			}
			if err := checkFakeHostFlags(cmd, hostMode, h); err != nil {
				return err
			}
			if o.CA, err = cfg.CA(); err != nil {
				return err
			}
			if o.CA == nil {
				return errors.New("simulate: --ca is required")
			}
			o.Hubs, o.Token, o.StateDir, o.Logger, o.Progress, o.Version = cfg.Hubs, cfg.Token, cfg.StateDir, log, os.Stdout, version.Version
			if hostMode == "fake" {
				cleanup, err := fakeHost(&h, hostDir, keyFiles)
				if err != nil {
					return err
				}
				defer cleanup()
				o.Host = &h
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if dur > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, dur)
				defer cancel()
			}
			start := time.Now()
			c, err := sim.Run(ctx, o)
			if err != nil {
				return err
			}
			fmt.Printf("simulate: done after %.1fs %s\n", time.Since(start).Seconds(), c)
			return nil
		},
	}
	addCommon(cmd, &f)
	cmd.Flags().Lookup("log-level").DefValue = "error"
	_ = cmd.Flags().Set("log-level", "error")
	cmd.Flags().Lookup("state-dir").Usage = "keep agent i's state in DIR/agent-NNNNN, so a second run resumes as the same Servers (default: in memory)"
	fl := cmd.Flags()
	fl.IntVar(&o.Count, "count", 1, "number of simulated agents (1 to 100000)")
	fl.DurationVar(&o.Heartbeat, "heartbeat", 0, "heartbeat interval (default: as the hub says)")
	fl.DurationVar(&o.RebalanceInterval, "rebalance-interval", 0, "shortest wait on a hub member that is not an agent's first choice before checking the first choice and moving there if it serves (0: 2m, or 12 heartbeats if longer; negative: never)")
	fl.Int64Var(&o.Seed, "seed", 1, "seed of the simulated identities (same seed, same Servers)")
	fl.Float64Var(&o.Rate, "rate", 0, "agents started per second (0: all at once)")
	fl.IntVar(&o.EnrollParallel, "enroll-parallel", 64, "concurrent Enroll calls at most")
	fl.Duration("duration", 0, "stop after this long (0: run until stopped)")
	fl.DurationVar(&o.ProgressEvery, "progress", time.Second, "how often to print the progress line")
	fl.StringVar(&hostMode, "host", "none", "none: agents only enroll, connect and report; fake: each simulated Server also installs, stages, leases and reboots into Revisions on a fake host")
	fl.StringVar(&hostDir, "host-dir", "", "with --host fake: folder for each Server's ESP and STATE folders, DIR/agent-NNNNN (default: a temporary folder removed at the end)")
	fl.StringSliceVar(&keyFiles, "release-key", nil, "with --host fake: PEM file of a release public key the Servers trust (repeatable; required to install anything)")
	fl.DurationVar(&h.BootTime, "boot-time", sim.DefaultBootTime, "with --host fake: how long a simulated reboot keeps the Server down")
	fl.Float64Var(&h.FailRate, "fail-rate", 0, "with --host fake: probability from 0 to 1 that a Server fails the boot assessment of a Revision (every try of it)")
	fl.DurationVar(&h.AssessTimeout, "assess-timeout", sim.DefaultAssessTimeout, "with --host fake: how long a failing boot assessment lasts before the agent reboots (a Revision's bootAssessmentTimeout wins)")
	_ = cmd.RegisterFlagCompletionFunc("host", cobra.FixedCompletions([]string{"none", "fake"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// checkFakeHostFlags refuses --host other than none or fake, the fake
// host's flags without --host fake, and their values out of range:
// --boot-time ≥ 0, --fail-rate in [0, 1], --assess-timeout ≥ 1s.
func checkFakeHostFlags(cmd *cobra.Command, mode string, h sim.FakeHost) error {
	switch mode {
	case "none":
		for _, name := range []string{"host-dir", "release-key", "boot-time", "fail-rate", "assess-timeout"} {
			if cmd.Flags().Changed(name) {
				return fmt.Errorf("simulate: --%s needs --host fake", name)
			}
		}
		return nil
	case "fake":
		if cmd.Flags().Changed("state-dir") {
			return errors.New("simulate: --state-dir does not go with --host fake: each Server keeps its state on its STATE folder under --host-dir")
		}
	default:
		return fmt.Errorf("simulate: --host %q: must be none or fake", mode)
	}
	switch {
	case h.BootTime < 0:
		return fmt.Errorf("simulate: --boot-time %s: must be ≥ 0", h.BootTime)
	case math.IsNaN(h.FailRate) || h.FailRate < 0 || h.FailRate > 1:
		return fmt.Errorf("simulate: --fail-rate %g: must be from 0 (no Server fails) to 1 (every Server fails every Revision)", h.FailRate)
	case h.AssessTimeout < time.Second:
		return fmt.Errorf("simulate: --assess-timeout %s: must be at least 1s", h.AssessTimeout)
	}
	return nil
}

// fakeHost completes h for simulate --host fake: its folder (dir, or a
// temporary one that cleanup removes) and the trusted release keys read
// from keyFiles.
func fakeHost(h *sim.FakeHost, dir string, keyFiles []string) (cleanup func(), err error) {
	if len(keyFiles) == 0 {
		return nil, errors.New("simulate: --host fake needs --release-key (the Servers install only signed releases)")
	}
	for _, p := range keyFiles {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("simulate: --release-key: %w", err)
		}
		pub, err := config.ParseReleaseKey(string(data))
		if err != nil {
			return nil, fmt.Errorf("simulate: --release-key %s: %w", p, err)
		}
		h.TrustedKeys = append(h.TrustedKeys, pub)
	}
	cleanup = func() {}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "roost-simulate-"); err != nil {
			return nil, err
		}
		cleanup = func() { os.RemoveAll(dir) }
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("simulate: --host-dir: %w", err)
	}
	h.Dir = dir
	return cleanup, nil
}

// newHost sets up the agent's OS side: the booted Revision from the kernel
// command line, the network profiles to apply, and the trusted release
// keys (from the config, kept in the state dir for later boots whose
// config has none).
func newHost(cfg *config.AgentConfig, log *slog.Logger) (*agent.Host, error) {
	booted, err := boot.ReadBootedRevision()
	if err != nil {
		return nil, err
	}
	stateDir := cfg.StateDirOrDefault()
	keysPath := filepath.Join(stateDir, agent.ReleaseKeysFile)
	var pemKeys []string
	if len(cfg.ReleaseKeys) > 0 {
		pemKeys = cfg.ReleaseKeys
		if err := os.MkdirAll(stateDir, 0o700); err != nil {
			return nil, err
		}
		if err := atomicfile.WriteFile(keysPath, []byte(strings.Join(pemKeys, "\n")), 0o644); err != nil {
			return nil, fmt.Errorf("keep the release keys: %w", err)
		}
	} else if data, err := os.ReadFile(keysPath); err == nil {
		for rest := data; ; {
			var blk *pem.Block
			if blk, rest = pem.Decode(rest); blk == nil {
				break
			}
			pemKeys = append(pemKeys, string(pem.EncodeToMemory(blk)))
		}
	}
	var keys []ed25519.PublicKey
	for i, k := range pemKeys {
		pub, err := config.ParseReleaseKey(k)
		if err != nil {
			return nil, fmt.Errorf("release key %d: %w", i, err)
		}
		keys = append(keys, pub)
	}
	if len(keys) == 0 {
		log.Warn("no trusted release keys (releaseKeys in the config): this Server will enroll but install no Revision")
	}
	return agent.NewHost(stateDir, booted, []string{ignition.EnrollNetworkPath, config.NetworkProfilePath}, keys)
}

// checkSimulateFlags refuses simulate flags out of range, naming the flag:
// --count ≥ 1, --rate 0 or ≥ 0.001, --enroll-parallel ≥ 1, --duration ≥ 0,
// --progress > 0, --heartbeat 0 (as the hub says) or ≥ 1s, and
// --rebalance-interval 0 (default), negative (never) or ≥ 1s.
// maxSimulatedAgents bounds simulate --count: each simulated agent holds a
// TLS connection, a gRPC stream and their goroutines in this one process,
// so a count far beyond it exhausts memory instead of simulating a fleet.
const maxSimulatedAgents = 100_000

func checkSimulateFlags(o sim.Options, duration time.Duration) error {
	switch {
	case o.Count < 1 || o.Count > maxSimulatedAgents:
		return fmt.Errorf("simulate: --count %d: must be from 1 to %d (run more processes for more agents)", o.Count, maxSimulatedAgents)
	case math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0) || o.Rate < 0 || o.Rate > 0 && o.Rate < 0.001:
		return fmt.Errorf("simulate: --rate %g: must be 0 (start all agents at once) or from 0.001 (agents per second)", o.Rate)
	case o.EnrollParallel < 1:
		return fmt.Errorf("simulate: --enroll-parallel %d: must be at least 1", o.EnrollParallel)
	case duration < 0:
		return fmt.Errorf("simulate: --duration %s: must be ≥ 0 (0: run until stopped)", duration)
	case o.ProgressEvery <= 0:
		return fmt.Errorf("simulate: --progress %s: must be positive", o.ProgressEvery)
	case o.Heartbeat < 0 || o.Heartbeat > 0 && o.Heartbeat < time.Second:
		return fmt.Errorf("simulate: --heartbeat %s: must be 0 (as the hub says) or at least 1s", o.Heartbeat)
	case o.RebalanceInterval > 0 && o.RebalanceInterval < time.Second:
		return fmt.Errorf("simulate: --rebalance-interval %s: must be 0 (the default), negative (never) or at least 1s", o.RebalanceInterval)
	}
	return nil
}
