// Command roost-hub runs one member of the Roost hub.
//
// An empty --data-dir without --join bootstraps a new single-member cluster
// and writes DIR/admin.conf for roostctl. With --join ADDR --join-token T
// (from `roostctl hub join`) it joins an existing cluster. A data dir with
// state restarts the member. SIGTERM or SIGINT stop it gracefully.
//
// Exit codes: 0 after a graceful stop, 1 when the hub fails, 2 for a
// command line it refuses (an unknown flag, a value out of its range; see
// checkFlags), before anything touches the data dir, 65
// (hub.ExitDamagedStorage) when the member's Raft log or newest snapshot
// is damaged, 78 (hub.ExitRulesTooNew) when its log needs a newer
// roost-hub.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
	metricsprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/api"
	"github.com/roostfleet/roost/hub/liveness"
	"github.com/roostfleet/roost/hub/raftnode"
	"github.com/roostfleet/roost/version"
	"github.com/roostfleet/roost/window"
)

func main() {
	hub.TuneGC()
	os.Exit(run(os.Args[1:], os.Stderr))
}

// Exit codes of run.
const (
	exitFailed = 1 // the hub failed to start or stopped with an error
	exitUsage  = 2 // the command line is refused
)

// usageError is a command line roost-hub refuses: run exits with
// exitUsage.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// Ranges of the numeric and duration flags (checkFlags).
const (
	// Agent certificates: at least an hour (agents renew at two thirds of
	// the lifetime, so shorter ones make a fleet renew constantly), at
	// most a year.
	minAgentCertLifetime = time.Hour
	maxAgentCertLifetime = 365 * 24 * time.Hour
	// The smallest heartbeat TTL: at least 3s (agents beat every third of
	// the TTL, at least every second), at most 1h (a Server that stopped
	// answering stays Reachable that long).
	minHeartbeatMinTTL = 3 * time.Second
	maxHeartbeatMinTTL = time.Hour
	// The fleet heartbeat rate the TTL is scaled for, per second.
	minHeartbeatsPerSecond = 1
	maxHeartbeatsPerSecond = 100_000
	// Calls without a client certificate (Enroll, Join, health), per
	// second and in a burst, per source address and in all.
	minUnauthRate, maxUnauthRate   = 0.01, 1_000_000
	minUnauthBurst, maxUnauthBurst = 1, 1_000_000
	// The TLS handshake deadline of the API and Raft ports: long enough
	// for a slow link, short enough that silent connections do not pile up.
	minHandshakeTimeout = time.Second
	maxHandshakeTimeout = 5 * time.Minute
	// Raft connections in their TLS handshake at once.
	minPendingHandshakes, maxPendingHandshakes = 1, 65_536
	// --raft-multiplier: Raft's timeouts (1 s heartbeat and election,
	// 500 ms leader lease) times 1 to 10, as Consul's raft_multiplier.
	minRaftMultiplier, maxRaftMultiplier = 1, 10
	// --feed-poll-interval, when set (0: each ReleaseFeed's own).
	minFeedPollInterval, maxFeedPollInterval = time.Second, 24 * time.Hour
)

// run runs roost-hub with the command line args (without the program
// name), writing errors to stderr, and returns the exit code.
func run(args []string, stderr io.Writer) int {
	cmd, _ := newCommand()
	cmd.SetArgs(args)
	cmd.SetOut(os.Stdout)
	cmd.SetErr(stderr)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(stderr, "roost-hub:", err)
		if errors.As(err, new(usageError)) {
			return exitUsage
		}
		if errors.As(err, new(*raftnode.DamagedError)) {
			return hub.ExitDamagedStorage
		}
		return exitFailed
	}
	return 0
}

// newCommand returns the roost-hub command and the options its flags
// set.
func newCommand() (*cobra.Command, *hub.Options) {
	var opts hub.Options
	var logLevel string
	cmd := &cobra.Command{
		Use:   "roost-hub",
		Short: "Run a member of the Roost hub",
		Long: `roost-hub runs one member of the Roost hub: the Raft-replicated record of
servers, pools, clusters, network profiles, maintenance windows and images.

A new cluster:      roost-hub --data-dir /var/lib/roost-hub
Join a cluster:     roost-hub --data-dir D --join 10.0.0.1:7443 --join-token R1…
                    (the token comes from 'roostctl hub join')
Restart a member:   roost-hub --data-dir D   (same flags as before)

The first member writes DIR/admin.conf: point roostctl at it with
--config or ROOST_CONFIG.`,
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError{fmt.Errorf("--log-level: %w", err)}
			}
			if err := checkFlags(opts); err != nil {
				return usageError{err}
			}
			// --join and --join-token against the data dir (a token
			// without --join would bootstrap a separate hub).
			if err := hub.CheckJoinFlags(opts.DataDir, opts.Join, opts.JoinToken); err != nil {
				return usageError{err}
			}
			// --force-new-cluster against the data dir (nothing to
			// recover; used there before) and --join.
			if err := hub.CheckForceNewCluster(opts.DataDir, opts.Join, opts.ForceNewCluster); err != nil {
				return usageError{err}
			}
			// --raft-log-store against the log the data dir holds.
			if err := hub.CheckLogStore(opts.DataDir, opts.LogStore); err != nil {
				return usageError{err}
			}
			opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			sink, err := metricsprom.NewPrometheusSinkFrom(metricsprom.PrometheusOpts{Registerer: reg})
			if err != nil {
				return err
			}
			cfg := metrics.DefaultConfig("roost")
			cfg.EnableHostname = false
			cfg.EnableRuntimeMetrics = false
			if _, err := metrics.NewGlobal(cfg, sink); err != nil {
				return err
			}
			opts.Registry = reg

			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			h, err := hub.Start(ctx, opts)
			if err != nil {
				return err
			}
			<-ctx.Done()
			opts.Logger.Info("shutting down")
			start := time.Now()
			if err := h.Close(); err != nil {
				return err
			}
			opts.Logger.Info("stopped", "took", time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	f := cmd.Flags()
	f.StringVar(&opts.DataDir, "data-dir", "/var/lib/roost-hub", "directory holding the member's Raft log, snapshots, TLS material and admin.conf")
	f.StringVar(&opts.APIAddr, "api-addr", "127.0.0.1:7443", "host:port of the gRPC API (TLS); clients and members dial it")
	f.StringVar(&opts.RaftAddr, "raft-addr", "127.0.0.1:7444", "host:port of the Raft transport (mutual TLS between members)")
	f.StringVar(&opts.HTTPAddr, "http-addr", "127.0.0.1:7480", "host:port serving /metrics and /healthz; empty disables")
	f.StringVar(&opts.MediaAddr, "media-addr", "", "host:port serving enrollment ISOs to BMCs as virtual media over HTTPS, under\nshort-lived per-Server download tokens (roostctl server provision); empty disables")
	f.StringVar(&opts.MediaURL, "media-url", "", "https://HOST[:PORT] by which BMCs reach --media-addr (default https://MEDIA-ADDR)")
	f.StringVar(&opts.BootAddr, "boot-addr", "", "host:port serving network boot over plain HTTP (iPXE script, enrollment kernel,\ninitrd and config) under the URLs 'roostctl netboot url' prints; empty disables")
	f.StringVar(&opts.BootURL, "boot-url", "", "http://HOST[:PORT] by which booting servers reach --boot-addr (default http://BOOT-ADDR)")
	f.StringVar(&opts.Join, "join", "", "API address (host:port) of any member of the cluster to join; used only with an empty data dir")
	f.StringVar(&opts.JoinToken, "join-token", os.Getenv("ROOST_JOIN_TOKEN"), "join token from 'roostctl hub join' (default $ROOST_JOIN_TOKEN)")
	f.StringVar(&opts.NodeID, "node-id", "", "Raft ID of this member on first start (default: hub-<random>)")
	f.BoolVar(&opts.ForceNewCluster, "force-new-cluster", false, "make this member, on its data dir, the only member of its hub before starting: after\nlosing a majority of the members for good (see docs/operations.md); use once: refused\nagain on the data dir while DIR/force-new-cluster.done exists")
	f.StringVar(&opts.LogStore, "raft-log-store", raftnode.LogStoreWAL, "Raft log store: wal (raft-wal) or boltdb (raft-boltdb/v2)")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.DurationVar(&opts.AgentCertLifetime, "agent-cert-lifetime", 24*time.Hour, fmt.Sprintf(
		"lifetime of agent client certificates (agents renew at two thirds), %s to %s", window.FormatDuration(minAgentCertLifetime), window.FormatDuration(maxAgentCertLifetime)))
	f.DurationVar(&opts.HeartbeatMinTTL, "heartbeat-min-ttl", liveness.DefaultMinTTL, fmt.Sprintf(
		"smallest time a silent server stays Reachable; grows with the fleet; %s to %s", window.FormatDuration(minHeartbeatMinTTL), window.FormatDuration(maxHeartbeatMinTTL)))
	f.Float64Var(&opts.MaxHeartbeatsPerSecond, "max-heartbeats-per-second", liveness.DefaultMaxHeartbeatsPerSecond, fmt.Sprintf(
		"fleet heartbeat rate the TTL is scaled for: ttl = max(min TTL, servers / this); %d to %d", minHeartbeatsPerSecond, maxHeartbeatsPerSecond))
	d := api.DefaultUnauthenticatedLimits
	opts.Unauthenticated.MaxAddresses = d.MaxAddresses
	unauth := "calls without a client certificate (Enroll, Join, health)"
	f.Float64Var(&opts.Unauthenticated.PerAddress, "unauthenticated-rate-per-address", d.PerAddress, fmt.Sprintf(
		"%s per second from one address (IPv6: a /64);\nmore fail with ResourceExhausted and the wait; %g to %g", unauth, minUnauthRate, float64(maxUnauthRate)))
	f.IntVar(&opts.Unauthenticated.PerAddressBurst, "unauthenticated-burst-per-address", d.PerAddressBurst, fmt.Sprintf(
		"%s at once from one address, above its rate; %d to %d", unauth, minUnauthBurst, maxUnauthBurst))
	f.Float64Var(&opts.Unauthenticated.Global, "unauthenticated-rate", d.Global, fmt.Sprintf(
		"%s per second to this member from all addresses; %g to %g", unauth, minUnauthRate, float64(maxUnauthRate)))
	f.IntVar(&opts.Unauthenticated.GlobalBurst, "unauthenticated-burst", d.GlobalBurst, fmt.Sprintf(
		"%s at once to this member from all addresses, above the rate; %d to %d", unauth, minUnauthBurst, maxUnauthBurst))
	f.DurationVar(&opts.HandshakeTimeout, "handshake-timeout", hub.DefaultHandshakeTimeout, fmt.Sprintf(
		"time a new API or Raft connection has to complete its TLS handshake, and an HTTP client to send\nits request headers, before it is closed; %s to %s",
		window.FormatDuration(minHandshakeTimeout), window.FormatDuration(maxHandshakeTimeout)))
	f.DurationVar(&opts.FeedPollInterval, "feed-poll-interval", 0, fmt.Sprintf(
		"poll every ReleaseFeed this often instead of its spec.pollInterval (a test feed, a benchmark);\n0 keeps each feed's own; %s to %s", window.FormatDuration(minFeedPollInterval), window.FormatDuration(maxFeedPollInterval)))
	f.IntVar(&opts.MaxPendingHandshakes, "raft-max-pending-handshakes", raftnode.DefaultMaxPendingHandshakes, fmt.Sprintf(
		"Raft port connections in their TLS handshake at once (16 per address); beyond it the oldest is closed; %d to %d",
		minPendingHandshakes, maxPendingHandshakes))
	f.IntVar(&opts.RaftMultiplier, "raft-multiplier", 1, fmt.Sprintf(
		"scale Raft's timeouts (1s heartbeat and election, 500ms leader lease) by this: members on busy\nor shared CPUs that miss heartbeats hold needless elections at 1; a dead leader is\nreplaced that much later; the same on every member; %d to %d", minRaftMultiplier, maxRaftMultiplier))
	return cmd, &opts
}

// checkFlags checks the numeric and duration flags in opts against their
// ranges (the constants above): a value out of range, zero included, is
// refused rather than replaced by a default. The error names the flag, the
// rule, the value and the range, e.g. "--agent-cert-lifetime: must be at
// least 1h, got -1h0m0s (allowed: 1h to 8760h)". It also checks
// --raft-log-store, --node-id and the addresses (checkAddrs).
func checkFlags(opts hub.Options) error {
	var errs []error
	if opts.LogStore != raftnode.LogStoreWAL && opts.LogStore != raftnode.LogStoreBolt {
		errs = append(errs, fmt.Errorf("--raft-log-store: must be %s or %s, got %q", raftnode.LogStoreWAL, raftnode.LogStoreBolt, opts.LogStore))
	}
	if err := hub.CheckNodeID(opts.NodeID); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, checkAddrs(opts)...)
	if err := checkBootURL(opts); err != nil {
		errs = append(errs, err)
	}
	durations := []struct {
		flag     string
		v        time.Duration
		min, max time.Duration
	}{
		{"--agent-cert-lifetime", opts.AgentCertLifetime, minAgentCertLifetime, maxAgentCertLifetime},
		{"--heartbeat-min-ttl", opts.HeartbeatMinTTL, minHeartbeatMinTTL, maxHeartbeatMinTTL},
		{"--handshake-timeout", opts.HandshakeTimeout, minHandshakeTimeout, maxHandshakeTimeout},
	}
	if opts.FeedPollInterval != 0 {
		durations = append(durations, struct {
			flag     string
			v        time.Duration
			min, max time.Duration
		}{"--feed-poll-interval", opts.FeedPollInterval, minFeedPollInterval, maxFeedPollInterval})
	}
	for _, d := range durations {
		allowed := fmt.Sprintf("(allowed: %s to %s)", window.FormatDuration(d.min), window.FormatDuration(d.max))
		switch {
		case d.v < d.min:
			errs = append(errs, fmt.Errorf("%s: must be at least %s, got %s %s", d.flag, window.FormatDuration(d.min), d.v, allowed))
		case d.v > d.max:
			errs = append(errs, fmt.Errorf("%s: must be at most %s, got %s %s", d.flag, window.FormatDuration(d.max), d.v, allowed))
		}
	}
	floats := []struct {
		flag     string
		v        float64
		min, max float64
	}{
		{"--max-heartbeats-per-second", opts.MaxHeartbeatsPerSecond, minHeartbeatsPerSecond, maxHeartbeatsPerSecond},
		{"--unauthenticated-rate-per-address", opts.Unauthenticated.PerAddress, minUnauthRate, maxUnauthRate},
		{"--unauthenticated-rate", opts.Unauthenticated.Global, minUnauthRate, maxUnauthRate},
	}
	for _, r := range floats {
		allowed := fmt.Sprintf("(allowed: %s to %s)", floatText(r.min), floatText(r.max))
		switch {
		case math.IsNaN(r.v):
			errs = append(errs, fmt.Errorf("%s: must be a number, got NaN %s", r.flag, allowed))
		case r.v < r.min:
			errs = append(errs, fmt.Errorf("%s: must be at least %s, got %s %s", r.flag, floatText(r.min), floatText(r.v), allowed))
		case r.v > r.max:
			errs = append(errs, fmt.Errorf("%s: must be at most %s, got %s %s", r.flag, floatText(r.max), floatText(r.v), allowed))
		}
	}
	ints := []struct {
		flag     string
		v        int
		min, max int
	}{
		{"--unauthenticated-burst-per-address", opts.Unauthenticated.PerAddressBurst, minUnauthBurst, maxUnauthBurst},
		{"--unauthenticated-burst", opts.Unauthenticated.GlobalBurst, minUnauthBurst, maxUnauthBurst},
		{"--raft-max-pending-handshakes", opts.MaxPendingHandshakes, minPendingHandshakes, maxPendingHandshakes},
		{"--raft-multiplier", opts.RaftMultiplier, minRaftMultiplier, maxRaftMultiplier},
	}
	for _, n := range ints {
		if n.v < n.min || n.v > n.max {
			errs = append(errs, fmt.Errorf("%s: must be %d to %d, got %d", n.flag, n.min, n.max, n.v))
		}
	}
	return errors.Join(errs...)
}

// floatText writes a flag's number as it is typed: "-3", "0.5", "+Inf".
func floatText(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// checkBootURL checks --boot-url: http:// or https://, a host, an
// optional port and no more (the boot paths are appended), and only with
// --boot-addr.
func checkBootURL(opts hub.Options) error {
	if opts.BootURL == "" {
		return nil
	}
	if opts.BootAddr == "" {
		return fmt.Errorf("--boot-url %s: give --boot-addr too (the listener it names)", opts.BootURL)
	}
	u, err := url.Parse(opts.BootURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.TrimSuffix(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("--boot-url %q: must be http://HOST[:PORT], the address servers reach --boot-addr by, e.g. http://10.20.0.5:8080", opts.BootURL)
	}
	return nil
}

// checkAddrs checks that --api-addr, --raft-addr, --http-addr and
// --media-addr and --boot-addr (unless empty) are host:port, and that no two of them are the same endpoint
// (the second listener would fail with "address already in use"): the
// same port (not 0, which picks a free one) on the same host, the same IP
// (api.SameHostPort), or on a host that is all interfaces.
func checkAddrs(opts hub.Options) []error {
	type addr struct {
		flag, v string
		port    int // -1: does not parse
	}
	addrs := []*addr{{flag: "--api-addr", v: opts.APIAddr}, {flag: "--raft-addr", v: opts.RaftAddr}}
	if opts.HTTPAddr != "" {
		addrs = append(addrs, &addr{flag: "--http-addr", v: opts.HTTPAddr})
	}
	if opts.MediaAddr != "" {
		addrs = append(addrs, &addr{flag: "--media-addr", v: opts.MediaAddr})
	}
	if opts.BootAddr != "" {
		addrs = append(addrs, &addr{flag: "--boot-addr", v: opts.BootAddr})
	}
	var errs []error
	for _, a := range addrs {
		a.port = -1
		_, p, err := net.SplitHostPort(a.v)
		if err == nil {
			a.port, err = net.LookupPort("tcp", p)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: must be host:port, e.g. 10.0.0.1:7443 (%v)", a.flag, a.v, err))
			a.port = -1
		}
	}
	for i, a := range addrs {
		for _, b := range addrs[i+1:] {
			if a.port > 0 && a.port == b.port && sameEndpoint(a.v, b.v) {
				errs = append(errs, fmt.Errorf("%s %s and %s %s are the same address: each needs its own port", a.flag, a.v, b.flag, b.v))
			}
		}
	}
	return errs
}

// sameEndpoint reports whether listening on host:port a and b (with the
// same port) would conflict: the same host, or one of them all
// interfaces ("", 0.0.0.0, ::).
func sameEndpoint(a, b string) bool {
	ha, _, _ := net.SplitHostPort(a)
	hb, _, _ := net.SplitHostPort(b)
	for _, h := range []string{ha, hb} {
		if ip := net.ParseIP(h); h == "" || ip != nil && ip.IsUnspecified() {
			return true
		}
	}
	return api.SameHostPort(a, b)
}
