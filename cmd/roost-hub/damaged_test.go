package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roostfleet/roost/hub"
)

// A member whose Raft log is damaged (one byte changed in the middle of
// what its newest segment holds) is refused with exit code 65
// (hub.ExitDamagedStorage), naming the segment file.
func TestDamagedLogExitCode(t *testing.T) {
	dir := t.TempDir()
	h, err := hub.Start(context.Background(), hub.Options{DataDir: dir, APIAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RaftLogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "raft", "wal", "*.wal"))
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	end := len(bytes.TrimRight(b, "\x00")) // the segment file is preallocated with zeros
	b[end/2] ^= 0x01
	if err := os.WriteFile(segs[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	code := run([]string{"--data-dir", dir, "--api-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--http-addr", ""}, &stderr)
	if code != hub.ExitDamagedStorage || !strings.Contains(stderr.String(), "damaged Raft log segment "+segs[0]) {
		t.Errorf("exit %d, stderr %q; want exit %d naming %s", code, stderr.String(), hub.ExitDamagedStorage, segs[0])
	}
}
