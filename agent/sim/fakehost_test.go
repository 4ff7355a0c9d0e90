package sim

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roostfleet/roost/agent"
	"github.com/roostfleet/roost/agent/install"
	"github.com/roostfleet/roost/agent/internal/fakehub"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/syncbuf"
)

// signedRevision is Revision n of a release signed by key: a kernel, an
// initrd and a boot loader (an MZ/PE stub) served by hub.
func signedRevision(t *testing.T, hub *fakehub.Hub, key ed25519.PrivateKey, n int64, version string) *roostv1.RevisionSpec {
	t.Helper()
	efi := make([]byte, 4096)
	copy(efi, "MZ")
	binary.LittleEndian.PutUint32(efi[0x3c:], 0x80)
	copy(efi[0x80:], "PE\x00\x00")
	binary.LittleEndian.PutUint16(efi[0x84:], 0x8664)
	kernel, initrd := []byte("kernel "+version), []byte(strings.Repeat("initrd "+version, 100))
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	type entry struct {
		Name   string `json:"name"`
		SHA256 string `json:"sha256"`
		Size   int64  `json:"size"`
	}
	manifest, _ := json.Marshal(map[string]any{"version": version, "artifacts": []entry{
		{"vmlinuz", sum(kernel), int64(len(kernel))}, {"initrd.img", sum(initrd), int64(len(initrd))}, {"systemd-bootx64.efi", sum(efi), int64(len(efi))}}})
	hub.Mu.Lock()
	if hub.Blobs == nil {
		hub.Blobs = map[string][]byte{}
	}
	for _, b := range [][]byte{kernel, initrd, efi} {
		hub.Blobs[sum(b)] = b
	}
	hub.Mu.Unlock()
	art := func(b []byte) *roostv1.Artifact { return &roostv1.Artifact{Sha256: sum(b), Size: int64(len(b))} }
	return &roostv1.RevisionSpec{Server: "srv", Number: n, Machine: "m-1", ImageRelease: version, ImageVersion: version,
		Kernel: art(kernel), Initrd: art(initrd), BootLoader: art(efi),
		ReleaseManifest: manifest, ReleaseSignature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, manifest)),
		KernelArgs: []string{"console=ttyS0"}, RequiredUnits: []string{"systemd-networkd.service", "roost-agent.service"}, Ignition: []byte(`{"ignition":{"version":"3.3.0"}}`), Hostname: "m-1"}
}

func desire(hub *fakehub.Hub, gen int64, spec *roostv1.RevisionSpec) {
	hub.Send(&roostv1.HubMessage{Message: &roostv1.HubMessage_Desired{Desired: &roostv1.DesiredState{Generation: gen, Revision: spec.GetNumber(), Spec: spec}}})
}

// hello returns the newest Hello.
func hello(hub *fakehub.Hub) *roostv1.Hello {
	h, _, _, _, _, _ := hub.Snapshot()
	if len(h) == 0 {
		return nil
	}
	return h[len(h)-1]
}

func healthy(hub *fakehub.Hub, n int64) bool {
	st := hub.LastStatus()
	for _, c := range st.GetConditions() {
		if c.GetType() == agent.CondHealthy && c.GetStatus() == "True" {
			return st.GetBootedRevision() == n
		}
	}
	return false
}

// startFake runs one simulated Server with a fake host against hub until
// the test ends; logs go to the test log at warning level and up.
func startFake(t *testing.T, hub *fakehub.Hub, ca []byte, fh *FakeHost) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	out := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	go func() {
		_, err := Run(ctx, Options{Count: 1, Hubs: []string{hub.Addr}, CA: ca, Token: hub.Token, Seed: 3, Host: fh, Progress: out, ProgressEvery: 100 * time.Millisecond, Logger: log})
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	fakehub.Eventually(t, "connected", func() bool { return strings.Contains(out.String(), "connected=1") })
}

// TestFakeHostRolls: a simulated Server on a fake host installs Revision 1
// from the enrollment image (a real GPT, FAT32 and ext4 on its memory
// disk), asks for a Lease, reboots, comes back booted into 1 with its
// identity from STATE and its entry blessed; then moves to Revision 2 the
// same way.
func TestFakeHostRolls(t *testing.T) {
	if _, err := os.Stat("/usr/sbin/mkfs.ext4"); err != nil {
		t.Skip("mkfs.ext4 (e2fsprogs) is not installed")
	}
	ca := fakehub.NewCA(t)
	hub := fakehub.Start(t, ca)
	hub.Hubs = []string{hub.Addr}
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	dir := t.TempDir()
	startFake(t, hub, ca.CertPEM, &FakeHost{Dir: dir, BootTime: 100 * time.Millisecond, TrustedKeys: []ed25519.PublicKey{pub}})
	if h := hello(hub); h.GetBootedRevision() != 0 {
		t.Fatalf("first hello %v, want the enrollment image", h)
	}
	desire(hub, 10, signedRevision(t, hub, key, 1, "2026.11.0"))
	fakehub.Eventually(t, "booted into 1, healthy", func() bool { return hello(hub).GetBootedRevision() == 1 && healthy(hub, 1) })
	entries := func() string {
		des, _ := os.ReadDir(filepath.Join(dir, "agent-00000", "esp", filepath.FromSlash(install.EntriesDir)))
		var names []string
		for _, d := range des {
			names = append(names, d.Name())
		}
		return strings.Join(names, " ")
	}
	if got := entries(); got != "roost-rev-1.conf" {
		t.Errorf("entries %q, want revision 1 blessed", got)
	}
	for _, f := range []string{agent.KeyFile, agent.CertFile, "revisions/1.json"} {
		if _, err := os.Stat(filepath.Join(dir, "agent-00000", "state", f)); err != nil {
			t.Errorf("STATE: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "agent-00000", "ram")); !os.IsNotExist(err) {
		t.Errorf("the enrollment image's RAM survived the reboot: %v", err)
	}
	_, peers, _, _, _, enrolls := hub.Snapshot()
	if enrolls != 1 || len(peers) < 2 || peers[0] != peers[len(peers)-1] {
		t.Errorf("enrollments %d, stream peers %v: want one identity across the reboot", enrolls, peers)
	}
	desire(hub, 20, signedRevision(t, hub, key, 2, "2026.12.0"))
	fakehub.Eventually(t, "booted into 2, healthy", func() bool { return hello(hub).GetBootedRevision() == 2 && healthy(hub, 2) })
	if got := entries(); got != "roost-rev-1.conf roost-rev-2.conf" {
		t.Errorf("entries %q", got)
	}
	if n := len(hub.Leases()); n != 2 {
		t.Errorf("%d lease requests, want 2", n)
	}
}

// TestFakeHostFailRate: a Server that fails Revision 2's assessment
// reboots three times (systemd-boot's tries), falls back to Revision 1
// and reports 2 failed.
func TestFakeHostFailRate(t *testing.T) {
	if testing.Short() {
		t.Skip("three failed boots take about 45 s")
	}
	if _, err := os.Stat("/usr/sbin/mkfs.ext4"); err != nil {
		t.Skip("mkfs.ext4 (e2fsprogs) is not installed")
	}
	ca := fakehub.NewCA(t)
	hub := fakehub.Start(t, ca)
	hub.Hubs = []string{hub.Addr}
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	fh := &FakeHost{Dir: t.TempDir(), BootTime: 100 * time.Millisecond, AssessTimeout: time.Second, TrustedKeys: []ed25519.PublicKey{pub}}
	srv := &server{fh: fh, i: 0, seed: 3}
	// FailRate 0.5 with seed 3: find which of revisions 1, 2 fail.
	fh.FailRate = 0.5
	var good, bad int64
	for n := int64(1); n < 50 && (good == 0 || bad == 0 || bad < good); n++ {
		if srv.fails(n) {
			bad = n
		} else if good == 0 {
			good = n
		}
	}
	if good == 0 || bad <= good {
		t.Fatalf("no good revision before a bad one in 50 draws")
	}
	startFake(t, hub, ca.CertPEM, fh)
	desire(hub, 10, signedRevision(t, hub, key, good, "2026.11.0"))
	fakehub.Eventually(t, fmt.Sprintf("booted into %d", good), func() bool { return healthy(hub, good) })
	desire(hub, 20, signedRevision(t, hub, key, bad, "2026.12.0"))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st := hub.LastStatus()
		if f := st.GetFailedRevisions(); len(f) == 1 && f[0].GetNumber() == bad && st.GetBootedRevision() == good {
			if !strings.Contains(f[0].GetReason(), "3 failed boots") {
				t.Errorf("failed revision %v", f[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no fallback to %d with %d failed; last status %v", good, bad, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
