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
		{[]string{"--unauthenticated-rate-per-address", "0"}, "roost-hub: --unauthenticated-rate-per-address: must be at least 0.01, got 0 (allowed: 0.01 to 1e+06)"},
		{[]string{"--unauthenticated-rate", "-1"}, "roost-hub: --unauthenticated-rate: must be at least 0.01, got -1 (allowed: 0.01 to 1e+06)"},
		{[]string{"--unauthenticated-burst", "0"}, "roost-hub: --unauthenticated-burst: must be 1 to 1000000, got 0"},
		{[]string{"--unauthenticated-burst-per-address", "0"}, "roost-hub: --unauthenticated-burst-per-address: must be 1 to 1000000, got 0"},
		{[]string{"--raft-max-pending-handshakes", "0"}, "roost-hub: --raft-max-pending-handshakes: must be 1 to 65536, got 0"},
		{[]string{"--raft-multiplier", "0"}, "roost-hub: --raft-multiplier: must be 1 to 10, got 0"},
		{[]string{"--raft-multiplier", "11"}, "roost-hub: --raft-multiplier: must be 1 to 10, got 11"},
		{[]string{"--handshake-timeout", "100ms"}, "roost-hub: --handshake-timeout: must be at least 1s, got 100ms (allowed: 1s to 5m)"},
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

// roost-hub refuses, with exit code 2 and before it touches the data dir,
// an unknown --raft-log-store, addresses that do not parse or that are the
// same endpoint, a --node-id that cannot be a certificate common name and
// Raft ID, and --force-new-cluster with --join on an empty data dir.
func TestRefusesBadStoreAddressesAndNodeID(t *testing.T) {
	tok := "R1" + strings.Repeat("a", 64) + "::0123abcd." + strings.Repeat("b", 32)
	for _, tc := range []struct {
		args []string
		want string // a prefix of the first line of stderr
	}{
		{[]string{"--raft-log-store", "foo"}, `roost-hub: --raft-log-store: must be wal or boltdb, got "foo"`},
		{[]string{"--api-addr", "nope"}, `roost-hub: --api-addr "nope": must be host:port, e.g. 10.0.0.1:7443 (`},
		{[]string{"--api-addr", "10.0.0.1:99999"}, `roost-hub: --api-addr "10.0.0.1:99999": must be host:port`},
		{[]string{"--raft-addr", "10.0.0.1"}, `roost-hub: --raft-addr "10.0.0.1": must be host:port`},
		{[]string{"--http-addr", "[::1"}, `roost-hub: --http-addr "[::1": must be host:port`},
		{[]string{"--api-addr", "127.0.0.1:7443", "--raft-addr", "127.0.0.1:7443"},
			"roost-hub: --api-addr 127.0.0.1:7443 and --raft-addr 127.0.0.1:7443 are the same address: each needs its own port"},
		{[]string{"--api-addr", "0.0.0.0:7443", "--raft-addr", "127.0.0.1:7443"},
			"roost-hub: --api-addr 0.0.0.0:7443 and --raft-addr 127.0.0.1:7443 are the same address"},
		{[]string{"--api-addr", "localhost:7443", "--http-addr", "127.0.0.1:7443"},
			"roost-hub: --api-addr localhost:7443 and --http-addr 127.0.0.1:7443 are the same address"},
		{[]string{"--node-id", "-a"}, `roost-hub: --node-id "-a": must be 1 to 63 characters of letters, digits, '.', '_' and '-', starting with a letter or a digit`},
		{[]string{"--node-id", "hub a"}, `roost-hub: --node-id "hub a": must be 1 to 63`},
		{[]string{"--node-id", "hub/a"}, `roost-hub: --node-id "hub/a": must be 1 to 63`},
		{[]string{"--node-id", "hübb"}, `roost-hub: --node-id "hübb": must be 1 to 63`},
		{[]string{"--node-id", strings.Repeat("a", 64)}, `roost-hub: --node-id "aaaa`},
		{[]string{"--force-new-cluster", "--join", "10.0.0.1:7443", "--join-token", tok}, "roost-hub: --force-new-cluster and --join do not go together"},
		{[]string{"--force-new-cluster"}, "roost-hub: --force-new-cluster: the data dir"},
		{[]string{"--boot-url", "http://10.0.0.1:8080"}, "roost-hub: --boot-url http://10.0.0.1:8080: give --boot-addr too"},
		{[]string{"--boot-addr", "127.0.0.1:0", "--boot-url", "10.0.0.1:8080"}, `roost-hub: --boot-url "10.0.0.1:8080": must be http://HOST[:PORT]`},
		{[]string{"--boot-addr", "127.0.0.1:0", "--boot-url", "http://h:8080/boot"}, `roost-hub: --boot-url "http://h:8080/boot": must be http://HOST[:PORT]`},
		{[]string{"--boot-addr", "nope"}, `roost-hub: --boot-addr "nope": must be host:port`},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		var stderr bytes.Buffer
		args := append([]string{"--data-dir", dir, "--api-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--http-addr", ""}, tc.args...)
		code := run(args, &stderr)
		first, _, _ := strings.Cut(stderr.String(), "\n")
		if code != exitUsage || !strings.HasPrefix(first, tc.want) {
			t.Errorf("roost-hub %s: exit %d, stderr\n%s\nwant exit 2 and\n%s…", strings.Join(tc.args, " "), code, stderr.String(), tc.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("roost-hub %s: the data dir was touched: %v", strings.Join(tc.args, " "), err)
		}
	}

	for _, args := range [][]string{
		{"--node-id", "a"},
		{"--node-id", "hub-a"},
		{"--node-id", "9.Hub_b-c"},
		{"--node-id", strings.Repeat("a", 63)},
		{"--raft-log-store", "boltdb"},
		{"--api-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"},
		{"--api-addr", "10.0.0.1:7443", "--raft-addr", "10.0.0.2:7443", "--http-addr", ""},
		{"--api-addr", "hub.example:7443", "--raft-addr", "hub.example:7444"},
		{"--boot-addr", "0.0.0.0:8080", "--boot-url", "http://10.20.0.5:8080/"},
	} {
		cmd, opts := newCommand()
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if err := checkFlags(*opts); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// --force-new-cluster on a data dir where it was used before
// (DIR/force-new-cluster.done) is refused with exit code 2, saying when
// and what to do, and nothing is written.
func TestRefusesForceNewClusterUsedBefore(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "raft"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"raft/raft.db": "x", "force-new-cluster.done": "# …\ntime 2025-01-02T03:04:05Z\nindex 42\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var stderr bytes.Buffer
	code := run([]string{"--data-dir", dir, "--api-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--http-addr", "", "--force-new-cluster"}, &stderr)
	want := "roost-hub: --force-new-cluster was already used on the data dir " + dir + " at 2025-01-02T03:04:05Z (Raft index 42): " +
		"used again it would drop every member that joined since; remove --force-new-cluster from the command line " +
		"(or, to force a new cluster from this member again, delete " + filepath.Join(dir, "force-new-cluster.done") + ")\n"
	if code != exitUsage || stderr.String() != want {
		t.Errorf("exit %d, stderr\n%s\nwant exit 2 and\n%s", code, stderr.String(), want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 2 {
		t.Errorf("the data dir holds %v (%v), want raft and force-new-cluster.done only", entries, err)
	}
}

// TestLogStoreMismatchIsUsage: --raft-log-store naming the other kind than
// the data dir's log is a refused command line (exit 2), before anything
// binds or writes.
func TestLogStoreMismatchIsUsage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(dir, "raft", "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	code := run([]string{"--data-dir", dir, "--api-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--http-addr", "", "--raft-log-store", "boltdb"}, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), `holds a "wal" log; use --raft-log-store=wal`) {
		t.Errorf("exit %d, stderr %q; want exit 2 naming --raft-log-store=wal", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "raft", "raft.db")); !os.IsNotExist(err) {
		t.Errorf("a boltdb log was created: %v", err)
	}
}
