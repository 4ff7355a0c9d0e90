package redfishtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// newTestQEMU is a machine that boots nothing (-S: the CPU never starts).
func newTestQEMU(t *testing.T) *QEMU {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 not installed")
	}
	q, err := NewQEMU(QEMUConfig{Args: []string{"-S", "-m", "32"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func TestQEMUPowerAndMedia(t *testing.T) {
	q := newTestQEMU(t)
	ctx := context.Background()
	img1 := filepath.Join(t.TempDir(), "one.iso")
	img2 := filepath.Join(t.TempDir(), "two.iso")
	for _, p := range []string{img1, img2} {
		if err := os.WriteFile(p, make([]byte, 2048*16), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if q.Running() {
		t.Fatal("a new machine runs")
	}
	// Media inserted while off goes on the command line.
	if err := q.InsertMedia(img1); err != nil {
		t.Fatal(err)
	}
	if err := q.PowerOn(ctx, Boot{Device: "d", Once: true}); err != nil {
		t.Fatal(err)
	}
	if !q.Running() {
		t.Fatal("not running after PowerOn")
	}
	cmd := q.Cmdline()
	if i := slices.Index(cmd, "-boot"); i < 0 || cmd[i+1] != "once=d" {
		t.Errorf("command line %q lacks -boot once=d", cmd)
	}
	if st, err := q.Status(); err != nil || st != "prelaunch" && st != "paused" {
		t.Errorf("status = %q, %v; want prelaunch or paused (-S)", st, err)
	}
	if got, err := q.CDMedia(); err != nil || got != img1 {
		t.Errorf("CD = %q, %v; want %s", got, err, img1)
	}
	// Changes while running go through QMP.
	if err := q.EjectMedia(); err != nil {
		t.Fatal(err)
	}
	if got, err := q.CDMedia(); err != nil || got != "" {
		t.Errorf("CD after eject = %q, %v; want empty", got, err)
	}
	if err := q.InsertMedia(img2); err != nil {
		t.Fatal(err)
	}
	if got, err := q.CDMedia(); err != nil || got != img2 {
		t.Errorf("CD = %q, %v; want %s", got, err, img2)
	}
	if err := q.Reset(ctx); err != nil {
		t.Errorf("Reset: %v", err)
	}
	if err := q.PowerOff(ctx); err != nil {
		t.Fatal(err)
	}
	if q.Running() {
		t.Fatal("running after PowerOff")
	}
	if _, err := q.CDMedia(); err == nil {
		t.Error("QMP answers with QEMU off")
	}
	// The next start keeps the media, with the default boot order.
	if err := q.PowerOn(ctx, Boot{}); err != nil {
		t.Fatal(err)
	}
	if cmd := q.Cmdline(); slices.Contains(cmd, "-boot") {
		t.Errorf("command line %q has -boot without an override", cmd)
	}
	if got, err := q.CDMedia(); err != nil || got != img2 {
		t.Errorf("CD after restart = %q, %v; want %s", got, err, img2)
	}
}
