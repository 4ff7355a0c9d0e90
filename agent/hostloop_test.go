package agent_test

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
	"google.golang.org/protobuf/types/known/durationpb"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	diskfs "github.com/diskfs/go-diskfs"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/agent"
	"github.com/roostfleet/roost/agent/boot"
	"github.com/roostfleet/roost/agent/install"
	"github.com/roostfleet/roost/agent/internal/fakehub"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// fakeEFI is the smallest blob install.RemovableMediaPath accepts: an MZ
// stub pointing at an x86-64 PE header.
func fakeEFI() []byte {
	b := make([]byte, 4096)
	copy(b, "MZ")
	binary.LittleEndian.PutUint32(b[0x3c:], 0x80)
	copy(b[0x80:], "PE\x00\x00")
	binary.LittleEndian.PutUint16(b[0x84:], 0x8664)
	copy(b[0x200:], "not really systemd-boot")
	return b
}

func digest(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// release is a signed image release: its blobs and the Revision spec
// naming them.
type release struct {
	key   ed25519.PrivateKey
	blobs map[string][]byte
	spec  *roostv1.RevisionSpec
}

// newRelease signs a manifest listing a kernel, an initrd and a boot
// loader with a fresh ed25519 key, as imagebuilder/release does.
func newRelease(t *testing.T, n int64) *release {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kernel, initrd, efi := []byte(strings.Repeat("kernel ", 1000)), []byte(strings.Repeat("initrd ", 30000)), fakeEFI()
	art := func(b []byte) *roostv1.Artifact { return &roostv1.Artifact{Sha256: digest(b), Size: int64(len(b))} }
	type entry struct {
		Name   string `json:"name"`
		SHA256 string `json:"sha256"`
		Size   int64  `json:"size"`
	}
	manifest, _ := json.Marshal(map[string]any{"version": "2026.11.0", "artifacts": []entry{
		{"vmlinuz", digest(kernel), int64(len(kernel))}, {"initrd.img", digest(initrd), int64(len(initrd))}, {"systemd-bootx64.efi", digest(efi), int64(len(efi))}}})
	return &release{
		key:   key,
		blobs: map[string][]byte{digest(kernel): kernel, digest(initrd): initrd, digest(efi): efi},
		spec: &roostv1.RevisionSpec{Server: "srv", Number: n, Machine: "edge-1", ImageRelease: "2026.11.0", ImageVersion: "2026.11.0",
			Kernel: art(kernel), Initrd: art(initrd), BootLoader: art(efi),
			ReleaseManifest: manifest, ReleaseSignature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, manifest)),
			KernelArgs: []string{"console=ttyS0,115200n8", "systemd.hostname=edge-1"}, Ignition: []byte(`{"ignition":{"version":"3.3.0"}}`),
			InstallDisk: &roostv1.InstallDiskHints{MinSize: "2Gi"}, Hostname: "edge-1", RequiredUnits: []string{"roost-agent.service"}},
	}
}

func (r *release) public() ed25519.PublicKey { return r.key.Public().(ed25519.PublicKey) }

// hostRig is an agent with a fake Host against a fake hub, on a fake
// clock that a goroutine moves 100 ms every millisecond.
type hostRig struct {
	hub      *fakehub.Hub
	disks    *install.FakeDisks
	mounter  *boot.FakeMounter
	units    *boot.FakeUnits
	rebooter *boot.FakeRebooter
	host     *agent.Host
	clock    *agent.FakeClock
	stateDir string
	caPEM    []byte
	r        *runner
	// extraDisks are inventoried after "fakedisk".
	extraDisks []*roostv1.DiskInfo
}

func newHostRig(t *testing.T, booted int64, keys ...ed25519.PublicKey) *hostRig {
	t.Helper()
	dir := t.TempDir()
	disks, err := install.NewFakeDisks(t.TempDir(), map[string]int64{"fakedisk": 3 << 30})
	if err != nil {
		t.Fatal(err)
	}
	ca := fakehub.NewCA(t)
	rg := &hostRig{
		hub: fakehub.Start(t, ca), caPEM: ca.CertPEM, disks: disks,
		mounter: &boot.FakeMounter{}, units: &boot.FakeUnits{}, rebooter: &boot.FakeRebooter{},
		clock: agent.NewFakeClock(time.Now()), stateDir: filepath.Join(dir, "state"),
	}
	rg.hub.Hubs = []string{rg.hub.Addr}
	rg.host = &agent.Host{
		Disks: disks, Mounter: rg.mounter, Units: rg.units, Rebooter: rg.rebooter,
		FindPartition: func(name string) (string, error) {
			if name != install.ESPName {
				t.Errorf("FindPartition(%q)", name)
			}
			return "/dev/fakedisk1", nil
		},
		BootedRevision: booted, StateDir: rg.stateDir,
		ESPDir: filepath.Join(dir, "esp"), StateMountDir: filepath.Join(dir, "state-mnt"),
		TrustedKeys: keys, HealthTimeout: 30 * time.Second, Retry: 10 * time.Second,
		AgentStateDropin: filepath.Join(dir, "10-state.conf"),
	}
	// The ESP as the boot loader installer leaves it (the fake mounter
	// mounts nothing: the folder stands for the mounted partition).
	for _, d := range []string{filepath.Join(rg.host.ESPDir, install.EntriesDir), rg.host.StateMountDir, rg.stateDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return rg
}

// start runs the agent; the fake clock runs until the test ends.
func (rg *hostRig) start(t *testing.T) {
	t.Helper()
	id, _ := simServer(20)
	inv := &agent.FakeInventory{Inv: &roostv1.Inventory{
		Cpu: &roostv1.CPUInfo{Model: "Simulated", Sockets: 1, Cores: 4, Threads: 8}, MemoryBytes: 16 << 30,
		Disks:    append([]*roostv1.DiskInfo{{Name: "fakedisk", SizeBytes: 3 << 30, Serial: "FAKE1"}}, rg.extraDisks...),
		Nics:     []*roostv1.NICInfo{{Name: "eth0", Mac: id.MACs[0]}},
		Firmware: "UEFI", Arch: "amd64",
	}}
	rg.r = startAgent(t, agent.Options{Hubs: []string{rg.hub.Addr}, CA: rg.caPEM, Token: rg.hub.Token, Version: "v-test",
		Store: agent.FileStore{Dir: rg.stateDir}, Identity: id, Inventory: inv, Clock: rg.clock, Host: rg.host})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			rg.clock.Advance(100 * time.Millisecond)
			time.Sleep(time.Millisecond)
		}
	}()
	t.Cleanup(func() { rg.r.halt(t); cancel(); wg.Wait() })
	fakehub.Eventually(t, "stream", func() bool { h, _, _, _, _, _ := rg.hub.Snapshot(); return len(h) == 1 })
}

func (rg *hostRig) desire(gen int64, spec *roostv1.RevisionSpec, failed bool) {
	rg.hub.Send(&roostv1.HubMessage{Message: &roostv1.HubMessage_Desired{Desired: &roostv1.DesiredState{
		Generation: gen, Revision: spec.GetNumber(), Spec: spec, Failed: failed}}})
}

// condition returns the newest reported condition typ ("" status when
// none).
func (rg *hostRig) condition(typ string) *roostv1.Condition {
	for _, c := range rg.hub.LastStatus().GetConditions() {
		if c.GetType() == typ {
			return c
		}
	}
	return &roostv1.Condition{}
}

func (rg *hostRig) waitCondition(t *testing.T, typ, status, reason string) *roostv1.Condition {
	t.Helper()
	fakehub.Eventually(t, typ+"="+status+"/"+reason, func() bool {
		c := rg.condition(typ)
		return c.GetStatus() == status && (reason == "" || c.GetReason() == reason)
	})
	return rg.condition(typ)
}

func (rg *hostRig) entries(t *testing.T) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(rg.host.ESPDir, install.EntriesDir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

// espFile reads name from the ESP partition of the fake disk image.
func espFile(t *testing.T, disks *install.FakeDisks, name string) []byte {
	t.Helper()
	d, err := diskfs.Open(disks.Path("fakedisk"), diskfs.WithOpenMode(diskfs.ReadOnly))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fs, err := d.GetFilesystem(install.ESPPartition)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fs.OpenFile(name, os.O_RDONLY)
	if err != nil {
		t.Fatalf("%s on the ESP: %v", name, err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRolloutFromEnrollmentImage: on the enrollment image (booted 0) a
// desired Revision 1 prepares the install disk, installs the boot loader,
// keeps the identity on STATE, stages the entry, asks for a Lease — first
// refused, then granted — and reboots once.
func TestRolloutFromEnrollmentImage(t *testing.T) {
	rel := newRelease(t, 1)
	rg := newHostRig(t, 0, rel.public())
	rg.hub.Blobs = rel.blobs
	refusal := "pool edge allows 1 unavailable Machine(s) at once and 1 Lease(s) are held (srv-b)"
	var mu sync.Mutex
	grant := false
	rg.hub.Lease = func(n int, req *roostv1.AcquireLeaseRequest) (*roostv1.AcquireLeaseResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		if !grant {
			return &roostv1.AcquireLeaseResponse{Reason: refusal, RetryAfterSeconds: 15}, nil
		}
		return &roostv1.AcquireLeaseResponse{Granted: true, FencingToken: 42}, nil
	}
	rg.start(t)
	rg.desire(10, rel.spec, false)

	// Refused: staged, waiting for the Lease, no reboot.
	c := rg.waitCondition(t, agent.CondLeaseGranted, "False", "WaitingForLease")
	if c.GetMessage() != refusal {
		t.Errorf("LeaseGranted = %v", c)
	}
	if c := rg.condition(agent.CondStaged); c.GetStatus() != "True" || !strings.Contains(c.GetMessage(), "roost-rev-1+3.conf") {
		t.Errorf("Staged = %v", c)
	}
	if c := rg.condition(agent.CondInstalled); c.GetStatus() != "True" || !strings.Contains(c.GetMessage(), "/dev/fakedisk") {
		t.Errorf("Installed = %v", c)
	}
	if n := rg.rebooter.Reboots(); n != 0 {
		t.Fatalf("%d reboots without a Lease", n)
	}

	// The disk: prepared (ESP and STATE made), boot loader on the ESP.
	log := strings.Join(rg.disks.Log(), "\n")
	if !strings.Contains(log, "mkfs.ext4 fakedisk") || !strings.Contains(log, "label="+install.StateName) {
		t.Errorf("disk log:\n%s", log)
	}
	if got := espFile(t, rg.disks, "/EFI/BOOT/BOOTX64.EFI"); string(got) != string(fakeEFI()) {
		t.Error("the boot loader on the ESP is not the release's")
	}
	if got := espFile(t, rg.disks, install.LoaderConfPath); string(got) != install.LoaderConf {
		t.Errorf("loader.conf = %q", got)
	}
	mounts := rg.mounter.String()
	for _, want := range []string{"/dev/fakedisk2 on " + rg.host.StateMountDir + " type ext4", "/dev/fakedisk1 on " + rg.host.ESPDir + " type vfat"} {
		if !strings.Contains(mounts, want) {
			t.Errorf("mounts lack %q:\n%s", want, mounts)
		}
	}
	// The identity is on STATE, with the staged Revision and the cache.
	for _, name := range []string{agent.KeyFile, agent.CertFile, agent.CAFile, agent.StateFile} {
		want, _ := os.ReadFile(filepath.Join(rg.stateDir, name))
		got, err := os.ReadFile(filepath.Join(rg.host.StateMountDir, name))
		if err != nil || string(got) != string(want) || len(want) == 0 {
			t.Errorf("%s on STATE: %v (%d bytes, want %d)", name, err, len(got), len(want))
		}
	}
	if _, err := os.Stat(filepath.Join(rg.host.StateMountDir, agent.RevisionsDir, "1.json")); err != nil {
		t.Errorf("revision record: %v", err)
	}
	if _, err := os.Stat(filepath.Join(rg.host.StateMountDir, agent.CacheDir, "sha256", rel.spec.GetKernel().GetSha256())); err != nil {
		t.Errorf("kernel cache: %v", err)
	}
	// The entry on the ESP, with boot counting.
	if got := rg.entries(t); len(got) != 1 || got[0] != "roost-rev-1+3.conf" {
		t.Fatalf("entries %v", got)
	}
	entry, _ := os.ReadFile(filepath.Join(rg.host.ESPDir, install.EntriesDir, "roost-rev-1+3.conf"))
	if !strings.Contains(string(entry), "options console=ttyS0,115200n8 systemd.hostname=edge-1 roost.revision=1\n") ||
		!strings.Contains(string(entry), "linux "+boot.ContentDir(rel.spec.GetKernel().GetSha256())+"/vmlinuz\n") {
		t.Errorf("entry:\n%s", entry)
	}
	kernel, err := os.ReadFile(filepath.Join(rg.host.ESPDir, filepath.FromSlash(boot.ContentDir(rel.spec.GetKernel().GetSha256())), boot.KernelName))
	if err != nil || digest(kernel) != rel.spec.GetKernel().GetSha256() {
		t.Errorf("kernel on the ESP: %v", err)
	}

	// Granted: LeaseGranted, one reboot; the request named Revision 1.
	mu.Lock()
	grant = true
	mu.Unlock()
	fakehub.Eventually(t, "reboot", func() bool { return rg.rebooter.Reboots() == 1 })
	rg.waitCondition(t, agent.CondLeaseGranted, "True", "Granted")
	if c := rg.condition(agent.CondLeaseGranted); !strings.Contains(c.GetMessage(), "fencing token 42") {
		t.Errorf("LeaseGranted = %v", c)
	}
	reqs := rg.hub.Leases()
	if len(reqs) < 2 {
		t.Fatalf("lease requests %v", reqs)
	}
	for _, r := range reqs {
		if r.GetRevision() != 1 {
			t.Errorf("lease request %v", r)
		}
	}
	// The disk was prepared once: a retried roll does not redo it.
	if log := strings.Join(rg.disks.Log(), "\n"); strings.Contains(log, "mkfs") {
		t.Errorf("disk prepared again:\n%s", log)
	}
	time.Sleep(50 * time.Millisecond) // ~5 s of fake time
	if n := rg.rebooter.Reboots(); n != 1 {
		t.Errorf("%d reboots, want 1", n)
	}
}

// TestRolloutUntrustedRelease: a release signed by a key the agent does
// not trust is never staged, no Lease is asked and nothing reboots.
func TestRolloutUntrustedRelease(t *testing.T) {
	rel := newRelease(t, 1)
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	rg := newHostRig(t, 0, other)
	rg.hub.Blobs = rel.blobs
	rg.start(t)
	rg.desire(10, rel.spec, false)
	c := rg.waitCondition(t, agent.CondStaged, "False", "")
	if !strings.Contains(c.GetMessage(), "not signed by a trusted key") {
		t.Errorf("Staged = %v", c)
	}
	time.Sleep(50 * time.Millisecond) // a few retries of fake time
	if got := rg.entries(t); len(got) != 0 {
		t.Errorf("entries %v", got)
	}
	if n := len(rg.hub.Leases()); n != 0 {
		t.Errorf("%d lease requests", n)
	}
	if n := rg.rebooter.Reboots(); n != 0 {
		t.Errorf("%d reboots", n)
	}
	// VerifyRelease: the right key passes; a tampered manifest, or a spec
	// naming an artifact the manifest does not list, fails.
	keys := []ed25519.PublicKey{rel.public()}
	if err := agent.VerifyRelease(rel.spec, keys); err != nil {
		t.Errorf("VerifyRelease: %v", err)
	}
	tampered := proto.Clone(rel.spec).(*roostv1.RevisionSpec)
	tampered.ReleaseManifest = append([]byte(" "), tampered.ReleaseManifest...)
	if err := agent.VerifyRelease(tampered, keys); err == nil || !strings.Contains(err.Error(), "not signed by a trusted key") {
		t.Errorf("tampered manifest: %v", err)
	}
	swapped := proto.Clone(rel.spec).(*roostv1.RevisionSpec)
	swapped.Kernel = &roostv1.Artifact{Sha256: strings.Repeat("e", 64), Size: 7}
	if err := agent.VerifyRelease(swapped, keys); err == nil || !strings.Contains(err.Error(), "does not list the kernel") {
		t.Errorf("unlisted kernel: %v", err)
	}
	if err := agent.VerifyRelease(rel.spec, nil); err == nil || !strings.Contains(err.Error(), "no trusted release keys") {
		t.Errorf("no keys: %v", err)
	}
}

// TestAssessDiskBoot: booted from disk into Revision 2 (its entry on its
// second try) next to Revision 3's exhausted entry: the boot is healthy,
// entry 2 is blessed, Revision 3 is reported failed, and a desired
// Revision 3 is not staged again.
func TestAssessDiskBoot(t *testing.T) {
	rel := newRelease(t, 3)
	rg := newHostRig(t, 2, rel.public())
	rg.hub.Blobs = rel.blobs
	entries := filepath.Join(rg.host.ESPDir, install.EntriesDir)
	for _, n := range []string{"roost-rev-2+2-1.conf", "roost-rev-3+0-3.conf"} {
		if err := os.WriteFile(filepath.Join(entries, n), []byte("title x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Revision 2's record names its required units.
	two := newRelease(t, 2).spec
	two.RequiredUnits = []string{"systemd-networkd.service", "roost-agent.service"}
	writeRevisionRecord(t, rg.stateDir, two)
	rg.units.Set("systemd-networkd.service", "active")
	rg.units.Set("roost-agent.service", "active")
	rg.start(t)

	c := rg.waitCondition(t, agent.CondHealthy, "True", "BootAssessed")
	if !strings.Contains(c.GetMessage(), "systemd-networkd.service, roost-agent.service") {
		t.Errorf("Healthy = %v", c)
	}
	if got := rg.entries(t); strings.Join(got, " ") != "roost-rev-2.conf roost-rev-3+0-3.conf" {
		t.Errorf("entries %v", got)
	}
	fakehub.Eventually(t, "failed revisions reported", func() bool { return rg.hub.LastStatus().GetHasFailedRevisions() })
	st := rg.hub.LastStatus()
	if f := st.GetFailedRevisions(); len(f) != 1 || f[0].GetNumber() != 3 ||
		f[0].GetReason() != "boot entry roost-rev-3 ran out of tries (3 failed boots); booted revision 2" {
		t.Errorf("failed revisions %v", f)
	}
	if st.GetBootedRevision() != 2 {
		t.Errorf("booted revision %d", st.GetBootedRevision())
	}
	if m := rg.mounter.String(); m != "/dev/fakedisk1 on "+rg.host.ESPDir+" type vfat\n" {
		t.Errorf("mounts:\n%s", m)
	}

	// The hub marks 3 failed: nothing is staged. Unmarked, the agent
	// still sees its exhausted entry and stages nothing.
	rg.desire(20, rel.spec, true)
	rg.desire(21, rel.spec, false)
	time.Sleep(50 * time.Millisecond)
	if n := len(rg.hub.Leases()); n != 0 {
		t.Errorf("%d lease requests", n)
	}
	if c := rg.condition(agent.CondStaged); c.GetStatus() != "" {
		t.Errorf("Staged = %v", c)
	}
	if got := rg.entries(t); strings.Join(got, " ") != "roost-rev-2.conf roost-rev-3+0-3.conf" {
		t.Errorf("entries %v", got)
	}
	if n, log := rg.rebooter.Reboots(), rg.disks.Log(); n != 0 || len(log) != 0 {
		t.Errorf("%d reboots, disk log %v", n, log)
	}
}

// TestAssessUnhealthyBootReboots: the required units stay failed past
// HealthTimeout: the agent reports it and reboots, so the boot loader
// counts the try; the entry is not blessed.
func TestAssessUnhealthyBootReboots(t *testing.T) {
	rg := newHostRig(t, 2, newRelease(t, 2).public())
	if err := os.WriteFile(filepath.Join(rg.host.ESPDir, install.EntriesDir, "roost-rev-2+2-1.conf"), []byte("title x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rg.units.Set("roost-agent.service", "failed") // no record: the default units
	rg.start(t)
	fakehub.Eventually(t, "reboot", func() bool { return rg.rebooter.Reboots() == 1 })
	c := rg.waitCondition(t, agent.CondHealthy, "False", "AssessmentFailed")
	if !strings.Contains(c.GetMessage(), "roost-agent.service (failed)") || !strings.Contains(c.GetMessage(), "unhealthy after 30s") {
		t.Errorf("Healthy = %v", c)
	}
	if got := rg.entries(t); len(got) != 1 || got[0] != "roost-rev-2+2-1.conf" {
		t.Errorf("entries %v", got)
	}
	time.Sleep(50 * time.Millisecond)
	if n := rg.rebooter.Reboots(); n != 1 {
		t.Errorf("%d reboots", n)
	}
}

// writeRevisionRecord stores spec as the agent's record of a staged
// Revision (RevisionsDir/N.json in the state dir).
func writeRevisionRecord(t *testing.T, stateDir string, spec *roostv1.RevisionSpec) {
	t.Helper()
	dir := filepath.Join(stateDir, agent.RevisionsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := protojson.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.json", spec.GetNumber())), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAssessHealthURLAndTimeout: the booted Revision's record names a
// health URL that does not answer 200 and its own boot assessment
// timeout: the agent reboots after that timeout (not HealthTimeout), and
// says which URL failed.
func TestAssessHealthURLAndTimeout(t *testing.T) {
	kubelet := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}))
	defer kubelet.Close()
	rg := newHostRig(t, 2, newRelease(t, 2).public())
	if err := os.WriteFile(filepath.Join(rg.host.ESPDir, install.EntriesDir, "roost-rev-2+2-1.conf"), []byte("title x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	two := newRelease(t, 2).spec
	two.RequiredUnits = []string{"roost-agent.service"}
	two.HealthUrls = []string{kubelet.URL + "/healthz"}
	two.BootAssessmentTimeout = durationpb.New(45 * time.Second)
	writeRevisionRecord(t, rg.stateDir, two)
	rg.units.Set("roost-agent.service", "active")
	rg.start(t)
	fakehub.Eventually(t, "reboot", func() bool { return rg.rebooter.Reboots() == 1 })
	c := rg.waitCondition(t, agent.CondHealthy, "False", "AssessmentFailed")
	if !strings.Contains(c.GetMessage(), "unhealthy after 45s") || !strings.Contains(c.GetMessage(), kubelet.URL+"/healthz: 503") {
		t.Errorf("Healthy = %v", c)
	}
	if got := rg.entries(t); len(got) != 1 || got[0] != "roost-rev-2+2-1.conf" {
		t.Errorf("entries %v", got)
	}
}
