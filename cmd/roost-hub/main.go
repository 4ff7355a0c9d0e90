// Command roost-hub runs one member of the Roost hub.
//
// An empty --data-dir without --join bootstraps a new single-member cluster
// and writes DIR/admin.conf for roostctl. With --join ADDR --join-token T
// (from `roostctl hub join`) it joins an existing cluster. A data dir with
// state restarts the member. SIGTERM or SIGINT stop it gracefully.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
	metricsprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/liveness"
	"github.com/roostfleet/roost/hub/raftnode"
	"github.com/roostfleet/roost/version"
)

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(hub.DefaultGCPercent)
	}
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
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
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
			return h.Close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.DataDir, "data-dir", "/var/lib/roost-hub", "directory holding the member's Raft log, snapshots, TLS material and admin.conf")
	f.StringVar(&opts.APIAddr, "api-addr", "127.0.0.1:7443", "host:port of the gRPC API (TLS); clients and members dial it")
	f.StringVar(&opts.RaftAddr, "raft-addr", "127.0.0.1:7444", "host:port of the Raft transport (mutual TLS between members)")
	f.StringVar(&opts.HTTPAddr, "http-addr", "127.0.0.1:7480", "host:port serving /metrics and /healthz; empty disables")
	f.StringVar(&opts.Join, "join", "", "API address (host:port) of any member of the cluster to join; used only with an empty data dir")
	f.StringVar(&opts.JoinToken, "join-token", os.Getenv("ROOST_JOIN_TOKEN"), "join token from 'roostctl hub join' (default $ROOST_JOIN_TOKEN)")
	f.StringVar(&opts.NodeID, "node-id", "", "Raft ID of this member on first start (default: hub-<random>)")
	f.StringVar(&opts.LogStore, "raft-log-store", raftnode.LogStoreWAL, "Raft log store: wal (raft-wal) or boltdb (raft-boltdb/v2)")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.DurationVar(&opts.AgentCertLifetime, "agent-cert-lifetime", 24*time.Hour, "lifetime of agent client certificates (agents renew at two thirds)")
	f.DurationVar(&opts.HeartbeatMinTTL, "heartbeat-min-ttl", liveness.DefaultMinTTL, "smallest time a silent server stays Reachable; grows with the fleet")
	f.Float64Var(&opts.MaxHeartbeatsPerSecond, "max-heartbeats-per-second", liveness.DefaultMaxHeartbeatsPerSecond, "fleet heartbeat rate the TTL is scaled for: ttl = max(min TTL, servers / this)")
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "roost-hub:", err)
		os.Exit(1)
	}
}
