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
	cmd := &cobra.Command{
		Use:   "simulate --count N --hub A,B,C --ca FILE --token SECRET",
		Short: "Run N simulated agents in this process against a real hub",
		Long: `simulate runs N agents in this process with fake OS adapters (a distinct
synthetic identity and inventory each; the same seed gives the same
Servers) against a real hub, reusing the agent's own code. It prints the
enrolled/connected counts once a second on standard output, until stopped
(SIGTERM/SIGINT) or --duration passes. Failed enrollments are counted; run
with --log-level info to see why.

Simulated agents have no host adapters: they enroll, connect, send Hello,
their inventory and heartbeats, receive desired state and acknowledge its
generation — and that is all. They never download, install or stage a
Revision, never take a reboot Lease and never report a boot. So the
Machines of simulated Servers stay Scheduled (never Provisioned, Joined or
Ready), and a rollout over a Pool of them never progresses: do not wait for
one. simulate measures enrollment and connection load on the hub; 'make
test-sim' simulates rollouts.`,
		Example: `  # 500 agents against a local hub, 50 started per second, for two minutes
  roostctl token create --ttl 1h -o json | jq -r .token > /tmp/token
  roost-agent simulate --count 500 --rate 50 --duration 2m \
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
			if o.CA, err = cfg.CA(); err != nil {
				return err
			}
			if o.CA == nil {
				return errors.New("simulate: --ca is required")
			}
			o.Hubs, o.Token, o.StateDir, o.Logger, o.Progress, o.Version = cfg.Hubs, cfg.Token, cfg.StateDir, log, os.Stdout, version.Version
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
	return cmd
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
