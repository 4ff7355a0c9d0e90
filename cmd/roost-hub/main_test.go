package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// roost-hub refuses numeric and duration flags out of their range (zero
// included, rather than using a default) with exit code 2 and a message
// naming the flag, the rule, the value and the range, before anything
// touches the data dir; so are unknown flags, values that do not parse,
// arguments and a bad --log-level.
func TestRefusesFlagsOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the whole first line of stderr
	}{
		{[]string{"--agent-cert-lifetime", "-1h"}, "roost-hub: --agent-cert-lifetime: must be at least 1h, got -1h0m0s (allowed: 1h to 8760h)"},
		{[]string{"--agent-cert-lifetime", "0"}, "roost-hub: --agent-cert-lifetime: must be at least 1h, got 0s (allowed: 1h to 8760h)"},
		{[]string{"--agent-cert-lifetime", "59m"}, "roost-hub: --agent-cert-lifetime: must be at least 1h, got 59m0s (allowed: 1h to 8760h)"},
		{[]string{"--agent-cert-lifetime", "8761h"}, "roost-hub: --agent-cert-lifetime: must be at most 8760h, got 8761h0m0s (allowed: 1h to 8760h)"},
		{[]string{"--heartbeat-min-ttl", "-5s"}, "roost-hub: --heartbeat-min-ttl: must be at least 3s, got -5s (allowed: 3s to 1h)"},
		{[]string{"--heartbeat-min-ttl", "2s"}, "roost-hub: --heartbeat-min-ttl: must be at least 3s, got 2s (allowed: 3s to 1h)"},
		{[]string{"--heartbeat-min-ttl", "2h"}, "roost-hub: --heartbeat-min-ttl: must be at most 1h, got 2h0m0s (allowed: 3s to 1h)"},
		{[]string{"--max-heartbeats-per-second", "-3"}, "roost-hub: --max-heartbeats-per-second: must be at least 1, got -3 (allowed: 1 to 100000)"},
		{[]string{"--max-heartbeats-per-second", "0"}, "roost-hub: --max-heartbeats-per-second: must be at least 1, got 0 (allowed: 1 to 100000)"},
		{[]string{"--max-heartbeats-per-second", "1e9"}, "roost-hub: --max-heartbeats-per-second: must be at most 100000, got 1e+09 (allowed: 1 to 100000)"},
		{[]string{"--max-heartbeats-per-second", "NaN"}, "roost-hub: --max-heartbeats-per-second: must be a number, got NaN (allowed: 1 to 100000)"},
		{[]string{"--max-heartbeats-per-second", "+Inf"}, "roost-hub: --max-heartbeats-per-second: must be at most 100000, got +Inf (allowed: 1 to 100000)"},
		{[]string{"--heartbeat-min-ttl", "soon"}, `roost-hub: invalid argument "soon" for "--heartbeat-min-ttl" flag: time: invalid duration "soon"`},
		{[]string{"--no-such-flag"}, "roost-hub: unknown flag: --no-such-flag"},
		{[]string{"extra"}, `roost-hub: unknown command "extra" for "roost-hub"`},
		{[]string{"--log-level", "loud"}, `roost-hub: --log-level: slog: level string "loud": unknown name`},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		var stderr bytes.Buffer
		args := append([]string{"--data-dir", dir, "--api-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--http-addr", ""}, tc.args...)
		code := run(args, &stderr)
		first, _, _ := strings.Cut(stderr.String(), "\n")
		if code != exitUsage || first != tc.want {
			t.Errorf("roost-hub %s: exit %d, stderr\n%s\nwant exit 2 and\n%s", strings.Join(tc.args, " "), code, stderr.String(), tc.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("roost-hub %s: the data dir was touched: %v", strings.Join(tc.args, " "), err)
		}
	}
}

// The defaults and the bounds pass; every bad flag is named at once.
func TestCheckFlags(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"--agent-cert-lifetime", "1h", "--heartbeat-min-ttl", "3s", "--max-heartbeats-per-second", "1"},
		{"--agent-cert-lifetime", "8760h", "--heartbeat-min-ttl", "1h", "--max-heartbeats-per-second", "100000"},
		{"--max-heartbeats-per-second", "2.5"},
	} {
		cmd, opts := newCommand()
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if err := checkFlags(*opts); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}

	var stderr bytes.Buffer
	code := run([]string{"--data-dir", filepath.Join(t.TempDir(), "d"), "--agent-cert-lifetime", "-1h", "--heartbeat-min-ttl", "-5s",
		"--max-heartbeats-per-second", "-3"}, &stderr)
	want := "roost-hub: --agent-cert-lifetime: must be at least 1h, got -1h0m0s (allowed: 1h to 8760h)\n" +
		"--heartbeat-min-ttl: must be at least 3s, got -5s (allowed: 3s to 1h)\n" +
		"--max-heartbeats-per-second: must be at least 1, got -3 (allowed: 1 to 100000)\n"
	if code != exitUsage || stderr.String() != want {
		t.Errorf("three bad flags: exit %d, stderr\n%s\nwant\n%s", code, stderr.String(), want)
	}
}
