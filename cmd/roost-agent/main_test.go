package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/roostfleet/roost/agent/config"
	"github.com/roostfleet/roost/agent/sim"
)

func cmdWith(t *testing.T, args ...string) (*cobra.Command, *flags) {
	t.Helper()
	var f flags
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	cmd.Flags().StringVar(&f.config, "config", config.DefaultPath, "")
	addCommon(cmd, &f)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return cmd, &f
}

func TestResolveFlagsOverrideFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.yaml")
	os.WriteFile(path, []byte("apiVersion: roost.io/v1\nkind: AgentConfig\nhubs: [a:1, b:2]\ntoken: abcdef.0123456789abcdef\nstateDir: /file\n"), 0o600)

	cmd, f := cmdWith(t, "--config", path)
	c, err := resolve(cmd, *f)
	if err != nil || strings.Join(c.Hubs, ",") != "a:1,b:2" || c.StateDirOrDefault() != "/file" || c.Token != "abcdef.0123456789abcdef" {
		t.Fatalf("file only: %+v %v", c, err)
	}
	cmd, f = cmdWith(t, "--config", path, "--hub", "c:3,d:4", "--token", "zzzzzz.0123456789abcdef", "--state-dir", "/flag", "--ca", "/ca.pem")
	c, err = resolve(cmd, *f)
	if err != nil || strings.Join(c.Hubs, ",") != "c:3,d:4" || c.StateDir != "/flag" || c.Token != "zzzzzz.0123456789abcdef" || c.CAFile != "/ca.pem" {
		t.Fatalf("flags over file: %+v %v", c, err)
	}
	// A missing default file is fine; a named missing file is not.
	cmd, f = cmdWith(t, "--hub", "h:1")
	f.config = filepath.Join(dir, "absent.yaml")
	if c, err := resolve(cmd, *f); err != nil || c.Hubs[0] != "h:1" || c.StateDirOrDefault() != config.DefaultStateDir {
		t.Fatalf("missing default file: %+v %v", c, err)
	}
	cmd, f = cmdWith(t, "--config", filepath.Join(dir, "absent.yaml"))
	if _, err := resolve(cmd, *f); err == nil || !strings.Contains(err.Error(), "absent.yaml") {
		t.Fatalf("missing named file: %v", err)
	}
	cmd, f = cmdWith(t, "--config", "", "--hub", "nohost")
	if _, err := resolve(cmd, *f); err == nil || !strings.Contains(err.Error(), `hubs[0]: address "nohost"`) {
		t.Fatalf("bad --hub: %v", err)
	}
	cmd, f = cmdWith(t, "--config", "", "--token", "nope")
	if _, err := resolve(cmd, *f); err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("bad --token: %v", err)
	}
}

func TestCheckSimulateFlags(t *testing.T) {
	ok := sim.Options{Count: 1, EnrollParallel: 64, ProgressEvery: time.Second}
	if err := checkSimulateFlags(ok, 0); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		mod      func(*sim.Options)
		duration time.Duration
		want     string
	}{
		{func(o *sim.Options) { o.Count = 0 }, 0, "--count 0"},
		{func(o *sim.Options) { o.Count = 100_000_000 }, 0, "--count 100000000: must be from 1 to 100000"},
		{func(o *sim.Options) { o.Rate = -1 }, 0, "--rate -1"},
		{func(o *sim.Options) { o.Rate = math.NaN() }, 0, "--rate NaN"},
		{func(o *sim.Options) { o.Rate = 1e-10 }, 0, "--rate 1e-10"},
		{func(o *sim.Options) { o.EnrollParallel = 0 }, 0, "--enroll-parallel 0"},
		{func(*sim.Options) {}, -time.Second, "--duration -1s"},
		{func(o *sim.Options) { o.ProgressEvery = 0 }, 0, "--progress 0s"},
		{func(o *sim.Options) { o.Heartbeat = time.Millisecond }, 0, "--heartbeat 1ms"},
		{func(o *sim.Options) { o.Heartbeat = -time.Second }, 0, "--heartbeat -1s"},
		{func(o *sim.Options) { o.RebalanceInterval = time.Millisecond }, 0, "--rebalance-interval 1ms"},
	} {
		o := ok
		tc.mod(&o)
		if err := checkSimulateFlags(o, tc.duration); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.want, err)
		}
	}
	o := ok
	o.RebalanceInterval, o.Heartbeat = -1, 2*time.Second
	if err := checkSimulateFlags(o, time.Minute); err != nil {
		t.Errorf("never rebalance, 2s heartbeats, 1m: %v", err)
	}
}
