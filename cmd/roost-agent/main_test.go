package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/roostfleet/roost/agent/config"
	"github.com/roostfleet/roost/agent/sim"
	"github.com/roostfleet/roost/imagebuilder/release"
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

// TestFakeHostFlags: simulate's fake host flags through the command:
// each refusal names the flag and says what would do.
func TestFakeHostFlags(t *testing.T) {
	pub := filepath.Join(t.TempDir(), "release.pub")
	if _, err := release.GenerateKey(strings.TrimSuffix(pub, ".pub")); err != nil {
		t.Fatal(err)
	}
	// any CA certificate: the flags are refused before anything is dialled
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"--hub", "127.0.0.1:1", "--ca", ca, "--token", "abcdef.0123456789abcdef"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--host", "real"}, `--host "real": must be none or fake`},
		{[]string{"--boot-time", "1s"}, "--boot-time needs --host fake"},
		{[]string{"--host", "fake", "--release-key", pub, "--boot-time", "-1s"}, "--boot-time -1s: must be ≥ 0"},
		{[]string{"--host", "fake", "--release-key", pub, "--fail-rate", "1.5"}, "--fail-rate 1.5: must be from 0"},
		{[]string{"--host", "fake", "--release-key", pub, "--assess-timeout", "10ms"}, "--assess-timeout 10ms: must be at least 1s"},
		{[]string{"--host", "fake", "--release-key", pub, "--state-dir", t.TempDir()}, "--state-dir does not go with --host fake"},
		{[]string{"--host", "fake"}, "--host fake needs --release-key"},
		{[]string{"--host", "fake", "--release-key", filepath.Join(t.TempDir(), "none.pub")}, "--release-key: open"},
	} {
		cmd := simulateCmd()
		cmd.SetArgs(append(append([]string{}, base...), tc.args...))
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
