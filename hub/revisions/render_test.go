package revisions

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/ignition/v2/config/v3_3"
	"github.com/coreos/ignition/v2/config/v3_3/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/roostfleet/roost/agent/config"
	"github.com/roostfleet/roost/imagebuilder/ignition"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

const (
	testServer = "4c4c4544-0042-3510-8052-b4c04f4d4e31"
	sshKey     = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ops@example"
)

func sha(c byte) string { return strings.Repeat(string(c), 64) }

// testRelease is an ImageRelease with every artifact, a manifest (with
// cmdline when given) and a signature.
func testRelease(name string, cmdline []string, channels ...string) *roostv1.ImageRelease {
	m := map[string]any{"version": name}
	if cmdline != nil {
		m["cmdline"] = cmdline
	}
	manifest, _ := json.Marshal(m)
	return &roostv1.ImageRelease{ApiVersion: resource.APIVersion, Kind: "ImageRelease", Metadata: &roostv1.ObjectMeta{Name: name},
		Spec: &roostv1.ImageReleaseSpec{Version: name, Channels: channels,
			Kernel: &roostv1.Artifact{Sha256: sha('a'), Size: 10}, Initrd: &roostv1.Artifact{Sha256: sha('b'), Size: 20},
			BootLoader: &roostv1.Artifact{Sha256: sha('c'), Size: 30}, Manifest: manifest, Signature: "c2lnbmF0dXJl"}}
}

// fullInputs is a worker of Pool "workers" in Cluster "prod" with every
// input set.
func fullInputs() Inputs {
	return Inputs{
		Machine: &roostv1.Machine{Metadata: &roostv1.ObjectMeta{Name: "workers-abcde"},
			Spec: &roostv1.MachineSpec{Server: testServer, Pool: "workers"}, Status: &roostv1.MachineStatus{Phase: "Scheduled"}},
		Server: &roostv1.Server{Metadata: &roostv1.ObjectMeta{Name: testServer,
			Labels: map[string]string{"rack": "r12", "tier": "silver", "roost.io/cpus": "16", "roost.io/arch": "amd64"}},
			Status: &roostv1.ServerStatus{State: "Claimed", BootedRevision: 0}},
		Pool: &roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "workers"}, Spec: &roostv1.PoolSpec{
			Cluster: "prod", MachineClass: "standard", NetworkProfile: "bonded", ImageChannel: "stable",
			NodeLabels: map[string]string{"tier": "gold"}}},
		MachineClass: &roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "standard"}, Spec: &roostv1.MachineClassSpec{
			KernelArgs: []string{"mitigations=off"}, SshAuthorizedKeys: []string{"# ops\n" + sshKey + "\n"},
			InstallDisk: &roostv1.InstallDiskHints{MinSize: "100Gi"}, WipeForeignDisks: true}},
		NetworkProfile: &roostv1.NetworkProfile{ApiVersion: resource.APIVersion, Kind: "NetworkProfile", Metadata: &roostv1.ObjectMeta{Name: "bonded"},
			Spec: &roostv1.NetworkProfileSpec{
				Links: []*roostv1.Link{{Name: "eno1", Match: &roostv1.LinkMatch{Mac: "52:54:00:AA:00:01"}}, {Name: "eno2", Match: &roostv1.LinkMatch{Name: "enp2s0"}}},
				Bonds: []*roostv1.Bond{{Name: "bond0", Members: []string{"eno1", "eno2"}, Mode: "802.3ad"}},
				Vlans: []*roostv1.Vlan{{Name: "bond0.100", Id: 100, Link: "bond0", Dhcp4: true}},
			}},
		Cluster: &roostv1.Cluster{Metadata: &roostv1.ObjectMeta{Name: "prod"}, Spec: &roostv1.ClusterSpec{
			ApiEndpoint: "https://10.0.0.1:6443", CaBundle: "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"}},
		Release: testRelease("2026.11.0", []string{"console=ttyS1,115200", "quiet"}, "stable"),
	}
}

// standaloneInputs is a standalone Machine: no Pool, class, profile or
// cluster.
func standaloneInputs() Inputs {
	in := fullInputs()
	in.Machine.Spec.Pool, in.Machine.Spec.Hostname = "", "edge-host"
	in.Pool, in.MachineClass, in.NetworkProfile, in.Cluster = nil, nil, nil, nil
	in.Release = testRelease("2026.11.0", nil)
	return in
}

func mustRender(t *testing.T, in Inputs, n int64) *roostv1.RevisionSpec {
	t.Helper()
	spec, err := Render(in, n)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// parsed is a rendered Ignition config, files decoded.
type parsed struct {
	cfg   types.Config
	files map[string]string
	modes map[string]int
	units map[string]types.Unit
}

func parseIgnition(t *testing.T, data []byte) parsed {
	t.Helper()
	cfg, rpt, err := v3_3.Parse(data)
	if err != nil {
		t.Fatalf("Ignition config does not parse: %v: %s", err, rpt)
	}
	p := parsed{cfg: cfg, files: map[string]string{}, modes: map[string]int{}, units: map[string]types.Unit{}}
	for _, f := range cfg.Storage.Files {
		src := *f.Contents.Source
		b64, ok := strings.CutPrefix(src, "data:;base64,")
		if !ok {
			t.Fatalf("%s: source %q is not a base64 data URL", f.Path, src)
		}
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatal(err)
		}
		p.files[f.Path] = string(b)
		p.modes[f.Path] = *f.Mode
	}
	for _, u := range cfg.Systemd.Units {
		p.units[u.Name] = u
	}
	return p
}

func TestRenderWorker(t *testing.T) {
	in := fullInputs()
	spec := mustRender(t, in, 7)

	// Spec fields.
	want := &roostv1.RevisionSpec{Server: testServer, Number: 7, Machine: "workers-abcde", ImageRelease: "2026.11.0", ImageVersion: "2026.11.0",
		Kernel: in.Release.Spec.Kernel, Initrd: in.Release.Spec.Initrd, BootLoader: in.Release.Spec.BootLoader,
		ReleaseManifest: in.Release.Spec.Manifest, ReleaseSignature: "c2lnbmF0dXJl",
		KernelArgs:  []string{"console=ttyS1,115200", "quiet", "mitigations=off", "systemd.hostname=workers-abcde"},
		InstallDisk: &roostv1.InstallDiskHints{MinSize: "100Gi"}, WipeForeignDisks: true,
		Hostname: "workers-abcde", NetworkProfile: "bonded",
		RequiredUnits: []string{"systemd-networkd.service", "roost-agent.service", "containerd.service", "kubelet.service"},
		HealthUrls:    []string{KubeletHealthzURL}, InputsSha256: in.Hash()}
	got := proto.Clone(spec).(*roostv1.RevisionSpec)
	got.Ignition = nil
	if !proto.Equal(got, want) {
		t.Errorf("spec\n got %v\nwant %v", got, want)
	}
	if len(spec.GetInputsSha256()) != 64 {
		t.Errorf("inputs hash %q", spec.GetInputsSha256())
	}

	p := parseIgnition(t, spec.GetIgnition())
	wantFiles := []string{
		CNIConfigPath,
		ContainerdConfigPath,
		"/etc/hostname",
		"/etc/kubernetes/kubelet.yaml",
		"/etc/kubernetes/pki/ca.crt",
		"/etc/roost/agent.yaml",
		JournalMoveScript,
		"/etc/roost/machine.json",
		"/etc/roost/network.yaml",
		JournaldConfigPath,
		"/etc/systemd/network/10-roost-bond0.100.network",
		"/etc/systemd/network/10-roost-bond0.network",
		"/etc/systemd/network/10-roost-eno1.network",
		"/etc/systemd/network/10-roost-eno2.network",
		"/etc/systemd/network/10-roost-match-eno1.network",
		"/etc/systemd/network/10-roost-match-eno2.network",
	}
	if got := slices.Sorted(maps.Keys(p.files)); !slices.Equal(got, wantFiles) {
		t.Errorf("files\n got %v\nwant %v", got, wantFiles)
	}
	if p.files["/etc/hostname"] != "workers-abcde\n" || p.modes["/etc/hostname"] != 0o644 {
		t.Errorf("/etc/hostname = %q (%o)", p.files["/etc/hostname"], p.modes["/etc/hostname"])
	}

	// Machine facts: operator labels overlaid with the pool's node labels,
	// no derived roost.io/ labels.
	var facts map[string]any
	if err := json.Unmarshal([]byte(p.files[MachineFactsPath]), &facts); err != nil {
		t.Fatal(err)
	}
	wantFacts := map[string]any{"machine": "workers-abcde", "server": testServer, "pool": "workers", "cluster": "prod",
		"revision": float64(7), "hostname": "workers-abcde", "image": "2026.11.0",
		"labels": map[string]any{"rack": "r12", "tier": "gold"}}
	if gb, _ := json.Marshal(facts); string(gb) != mustJSON(t, wantFacts) {
		t.Errorf("machine.json = %s, want %s", gb, mustJSON(t, wantFacts))
	}

	// The network profile, as YAML the agent decodes back.
	ms, err := resource.Decode([]byte(p.files[NetworkProfilePath]), NetworkProfilePath, resource.ForApply())
	if err != nil || len(ms) != 1 || !proto.Equal(ms[0].Object.GetNetworkProfile().GetSpec(), in.NetworkProfile.GetSpec()) {
		t.Errorf("network.yaml decodes to %v (%v):\n%s", ms, err, p.files[NetworkProfilePath])
	}
	if p.modes[NetworkProfilePath] != 0o600 {
		t.Errorf("network.yaml mode %o", p.modes[NetworkProfilePath])
	}
	// networkd keeps off the profile's links, by match and by name.
	for path, want := range map[string]string{
		"/etc/systemd/network/10-roost-match-eno1.network": "# Roost: NetworkProfile bonded owns this link.\n[Match]\nMACAddress=52:54:00:aa:00:01\n[Link]\nUnmanaged=yes\n",
		"/etc/systemd/network/10-roost-match-eno2.network": "# Roost: NetworkProfile bonded owns this link.\n[Match]\nName=enp2s0\n[Link]\nUnmanaged=yes\n",
		"/etc/systemd/network/10-roost-bond0.100.network":  "# Roost: NetworkProfile bonded owns this link.\n[Match]\nName=bond0.100\n[Link]\nUnmanaged=yes\n",
		"/etc/systemd/network/10-roost-eno1.network":       "# Roost: NetworkProfile bonded owns this link.\n[Match]\nName=eno1\n[Link]\nUnmanaged=yes\n",
	} {
		if p.files[path] != want {
			t.Errorf("%s =\n%s\nwant\n%s", path, p.files[path], want)
		}
	}

	// The agent config points at the STATE mount.
	var ac config.AgentConfig
	if err := yamlOrJSON([]byte(p.files[ignition.AgentConfigPath]), &ac); err != nil || ac.StateDir != StateDir || ac.Kind != config.Kind {
		t.Errorf("agent config %+v (%v):\n%s", ac, err, p.files[ignition.AgentConfigPath])
	}

	// Units: the STATE mount, enabled, the agent with its drop-in, and
	// the kubelet's (see TestKubeletUnits).
	if got := slices.Sorted(maps.Keys(p.units)); !slices.Equal(got, []string{ContainerdUnit, KubeletUnit, ignition.AgentUnitName, ContainerdDataDirUnit, JournalDirUnit, JournalUnit, KubeletDataDirUnit, ContainerdDataMountUnit, KubeletDataMountUnit, StateMountUnit, JournalMountUnit}) {
		t.Errorf("units %v", got)
	}
	mount := p.units[StateMountUnit]
	if mount.Enabled == nil || !*mount.Enabled || mount.Contents == nil ||
		!strings.Contains(*mount.Contents, "What=/dev/disk/by-partlabel/ROOST-STATE\nWhere=/var/lib/roost\nType=ext4") {
		t.Errorf("%s: %+v", StateMountUnit, mount)
	}
	agentUnit := p.units[ignition.AgentUnitName]
	if agentUnit.Contents == nil || *agentUnit.Contents != ignition.AgentUnit || len(agentUnit.Dropins) != 1 ||
		agentUnit.Dropins[0].Name != "10-state.conf" || *agentUnit.Dropins[0].Contents != "[Unit]\nRequiresMountsFor=/var/lib/roost\n" {
		t.Errorf("%s: %+v", ignition.AgentUnitName, agentUnit)
	}

	// SSH keys for "core", comments dropped.
	if u := p.cfg.Passwd.Users; len(u) != 1 || u[0].Name != ignition.SSHUser || len(u[0].SSHAuthorizedKeys) != 1 || string(u[0].SSHAuthorizedKeys[0]) != sshKey {
		t.Errorf("users %+v", u)
	}

	// Cluster join files: the CA; no bootstrap kubeconfig (the agent
	// writes it from its desired state) and no token anywhere.
	if p.files["/etc/kubernetes/pki/ca.crt"] != in.Cluster.Spec.CaBundle || p.modes["/etc/kubernetes/pki/ca.crt"] != 0o644 {
		t.Errorf("ca.crt = %q (%o)", p.files["/etc/kubernetes/pki/ca.crt"], p.modes["/etc/kubernetes/pki/ca.crt"])
	}
	if p.modes[KubeletConfigPath] != 0o644 {
		t.Errorf("%s mode %o", KubeletConfigPath, p.modes[KubeletConfigPath])
	}
	if bytes.Contains(spec.GetIgnition(), []byte("bootstrap-kubelet.conf\"")) || bytes.Contains(bytes.ToLower(spec.GetIgnition()), []byte("token:")) {
		t.Errorf("the Ignition config writes a bootstrap kubeconfig or a token:\n%s", spec.GetIgnition())
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// yamlOrJSON decodes the agent config with the agent's own parser.
func yamlOrJSON(data []byte, c *config.AgentConfig) error {
	got, err := config.Parse(data)
	if err != nil {
		return err
	}
	*c = *got
	return nil
}

func TestRenderStandalone(t *testing.T) {
	in := standaloneInputs()
	spec := mustRender(t, in, 1)
	// Default kernel args (the release names none), the hostname.
	if want := []string{"console=tty0", "console=ttyS0,115200n8", "systemd.hostname=edge-host"}; !slices.Equal(spec.GetKernelArgs(), want) {
		t.Errorf("kernel args %v, want %v", spec.GetKernelArgs(), want)
	}
	if spec.GetHostname() != "edge-host" || spec.GetNetworkProfile() != "" || spec.GetInstallDisk() != nil || spec.GetWipeForeignDisks() {
		t.Errorf("spec %v", spec)
	}
	if spec.GetBootTries() != 0 {
		t.Errorf("boot tries %d without spec.bootTries, want 0 (the agent's default)", spec.GetBootTries())
	}
	full := fullInputs()
	full.MachineClass.Spec.BootTries = 1
	if got := mustRender(t, full, 1).GetBootTries(); got != 1 {
		t.Errorf("boot tries %d, want the MachineClass's 1", got)
	}
	p := parseIgnition(t, spec.GetIgnition())
	want := []string{"/etc/hostname", "/etc/roost/agent.yaml", JournalMoveScript, "/etc/roost/machine.json", JournaldConfigPath}
	if got := slices.Sorted(maps.Keys(p.files)); !slices.Equal(got, want) {
		t.Errorf("files %v, want %v (no cluster join, no network files)", got, want)
	}
	if p.files["/etc/hostname"] != "edge-host\n" {
		t.Errorf("hostname %q", p.files["/etc/hostname"])
	}
	var facts map[string]any
	json.Unmarshal([]byte(p.files[MachineFactsPath]), &facts)
	if _, ok := facts["pool"]; ok || facts["cluster"] != nil || facts["hostname"] != "edge-host" || facts["machine"] != "workers-abcde" {
		t.Errorf("facts %v", facts)
	}
	if len(p.cfg.Passwd.Users) != 0 {
		t.Errorf("users %v without SSH keys", p.cfg.Passwd.Users)
	}
	if got := slices.Sorted(maps.Keys(p.units)); !slices.Equal(got, []string{ignition.AgentUnitName, JournalDirUnit, JournalUnit, StateMountUnit, JournalMountUnit}) {
		t.Errorf("units %v", got)
	}
	// Every Revision keeps its journal on STATE, bounded (the boot of a
	// failed Revision is read after the fallback).
	if conf := p.files[JournaldConfigPath]; !strings.Contains(conf, "\nStorage=persistent\n") || !strings.Contains(conf, "\nSystemMaxUse="+JournalMaxUse+"\n") {
		t.Errorf("journald drop-in:\n%s", conf)
	}
	if m := unitContents(p.units[JournalMountUnit]); !strings.Contains(m, "What="+JournalStateDir+"\n") || !strings.Contains(m, "Where="+JournalDir+"\n") || !strings.Contains(m, "Options=bind\n") {
		t.Errorf("%s:\n%s", JournalMountUnit, m)
	}
	// Moved there after Ignition: journald lets go of the RAM directory,
	// the early journal moves, the mount comes up, journald flushes.
	ju := unitContents(p.units[JournalUnit])
	order := []string{"--relinquish-var", JournalMoveScript, "start " + JournalMountUnit, "--flush"}
	for i, at := 0, 0; i < len(order); i++ {
		j := strings.Index(ju[at:], order[i])
		if j < 0 {
			t.Fatalf("%s lacks %q after byte %d:\n%s", JournalUnit, order[i], at, ju)
		}
		at += j
	}
	if !strings.Contains(p.files[JournalMoveScript], "mountpoint -q") {
		t.Errorf("%s:\n%s", JournalMoveScript, p.files[JournalMoveScript])
	}

	// A pool without a cluster: no join files either.
	in = fullInputs()
	in.Cluster, in.Pool.Spec.Cluster = nil, ""
	p = parseIgnition(t, mustRender(t, in, 1).GetIgnition())
	for path := range p.files {
		if strings.HasPrefix(path, "/etc/kubernetes/") {
			t.Errorf("standalone pool got %s", path)
		}
	}
}

func TestRenderRefusals(t *testing.T) {
	for name, mod := range map[string]func(*roostv1.ImageReleaseSpec){
		"no kernel":      func(s *roostv1.ImageReleaseSpec) { s.Kernel = nil },
		"no initrd":      func(s *roostv1.ImageReleaseSpec) { s.Initrd = &roostv1.Artifact{} },
		"no manifest":    func(s *roostv1.ImageReleaseSpec) { s.Manifest = nil },
		"no signature":   func(s *roostv1.ImageReleaseSpec) { s.Signature = "" },
		"manifest":       func(s *roostv1.ImageReleaseSpec) { s.Manifest = []byte("{") },
		"cmdline string": func(s *roostv1.ImageReleaseSpec) { s.Manifest = []byte(`{"cmdline":"quiet"}`) },
	} {
		in := fullInputs()
		mod(in.Release.Spec)
		if _, err := Render(in, 1); err == nil || !strings.Contains(err.Error(), "2026.11.0") {
			t.Errorf("%s: Render error %v", name, err)
		}
	}
}

func TestRenderDeterministic(t *testing.T) {
	a := mustRender(t, fullInputs(), 3)
	for i := 0; i < 5; i++ {
		b := mustRender(t, fullInputs(), 3)
		ab, _ := proto.MarshalOptions{Deterministic: true}.Marshal(a)
		bb, _ := proto.MarshalOptions{Deterministic: true}.Marshal(b)
		if !bytes.Equal(ab, bb) || !bytes.Equal(a.GetIgnition(), b.GetIgnition()) {
			t.Fatal("same inputs rendered different specs")
		}
	}
	// Render does not modify its inputs.
	in := fullInputs()
	before := proto.Clone(in.MachineClass).(*roostv1.MachineClass)
	spec := mustRender(t, in, 3)
	spec.KernelArgs = append(spec.KernelArgs[:0], "x")
	spec.Kernel.Sha256 = "changed"
	if !proto.Equal(in.MachineClass, before) || in.Release.Spec.Kernel.Sha256 != sha('a') {
		t.Error("Render's result shares memory with its inputs")
	}
	if DefaultRequiredUnits[0] != "systemd-networkd.service" {
		t.Error("Render's result shares DefaultRequiredUnits")
	}
}

func TestHash(t *testing.T) {
	base := fullInputs().Hash()
	if fullInputs().Hash() != base {
		t.Fatal("hash not stable")
	}
	changes := map[string]func(*Inputs){
		"hostname":          func(in *Inputs) { in.Machine.Spec.Hostname = "other" },
		"machine name":      func(in *Inputs) { in.Machine.Metadata.Name = "workers-zzzzz" },
		"server label":      func(in *Inputs) { in.Server.Metadata.Labels["rack"] = "r13" },
		"new server label":  func(in *Inputs) { in.Server.Metadata.Labels["gpu"] = "a100" },
		"pool node label":   func(in *Inputs) { in.Pool.Spec.NodeLabels["zone"] = "a" },
		"pool name":         func(in *Inputs) { in.Pool.Metadata.Name = "workers2" },
		"class kernel args": func(in *Inputs) { in.MachineClass.Spec.KernelArgs = nil },
		"class ssh keys":    func(in *Inputs) { in.MachineClass.Spec.SshAuthorizedKeys = nil },
		"profile spec":      func(in *Inputs) { in.NetworkProfile.Spec.Vlans[0].Id = 200 },
		"profile name":      func(in *Inputs) { in.NetworkProfile.Metadata.Name = "flat" },
		"no profile":        func(in *Inputs) { in.NetworkProfile = nil },
		"cluster CA":        func(in *Inputs) { in.Cluster.Spec.CaBundle += "\n" },
		"cluster DNS":       func(in *Inputs) { in.Cluster.Spec.Join = &roostv1.ClusterJoin{ClusterDns: []string{"10.96.0.10"}} },
		"cluster domain":    func(in *Inputs) { in.Cluster.Spec.Join = &roostv1.ClusterJoin{ClusterDomain: "prod.example"} },
		"cluster name":      func(in *Inputs) { in.Cluster.Metadata.Name = "staging" },
		// a worker's Node carries some of the derived labels
		"derived cpus":         func(in *Inputs) { in.Server.Metadata.Labels["roost.io/cpus"] = "32" },
		"derived memory":       func(in *Inputs) { in.Server.Metadata.Labels["roost.io/memory-gib"] = "64" },
		"no cluster":           func(in *Inputs) { in.Cluster = nil },
		"release":              func(in *Inputs) { in.Release = testRelease("2026.12.0", nil, "stable") },
		"release kernel":       func(in *Inputs) { in.Release.Spec.Kernel.Sha256 = sha('d') },
		"release name":         func(in *Inputs) { in.Release.Metadata.Name = "renamed" },
		"standalone (no pool)": func(in *Inputs) { in.Pool = nil },
	}
	seen := map[string]string{base: "base"}
	for name, mod := range changes {
		in := fullInputs()
		mod(&in)
		h := in.Hash()
		if prev, dup := seen[h]; dup {
			t.Errorf("%s: hash equals that of %s", name, prev)
		}
		seen[h] = name
	}
	same := map[string]func(*Inputs){
		// derived labels a Node does not carry
		"derived label":     func(in *Inputs) { in.Server.Metadata.Labels["roost.io/nics"] = "4" },
		"new derived label": func(in *Inputs) { in.Server.Metadata.Labels["roost.io/system-vendor"] = "Dell" },
		// Cluster fields that concern the hub, not the Revision (every
		// field is classified in TestClusterSpecHashed).
		"cluster drain timeout": func(in *Inputs) { in.Cluster.Spec.DrainTimeout = durationpb.New(10 * time.Minute) },
		"cluster token ttl": func(in *Inputs) {
			in.Cluster.Spec.Join = &roostv1.ClusterJoin{BootstrapTokenTtl: durationpb.New(2 * time.Hour)}
		},
		"cluster kubeconfig":     func(in *Inputs) { in.Cluster.Spec.Kubeconfig = "apiVersion: v1\nkind: Config\n" },
		"cluster endpoint":       func(in *Inputs) { in.Cluster.Spec.ApiEndpoint = "https://10.0.0.2:6443" },
		"cluster version":        func(in *Inputs) { in.Cluster.Spec.KubernetesVersion = "v1.35.0" },
		"cluster default domain": func(in *Inputs) { in.Cluster.Spec.Join = &roostv1.ClusterJoin{ClusterDomain: "cluster.local"} },
		"cluster status": func(in *Inputs) {
			in.Cluster.Status = &roostv1.ClusterStatus{Nodes: 3, ReadyNodes: 2, ServerVersion: "v1.34.4", CredentialsSet: true}
		},
		"label shadowed": func(in *Inputs) { in.Server.Metadata.Labels["tier"] = "bronze" }, // the pool's node label wins
		"server status":  func(in *Inputs) { in.Server.Status.BootedRevision = 4; in.Server.Status.State = "Available" },
		"machine status": func(in *Inputs) { in.Machine.Status.Phase = "Ready"; in.Machine.Status.Revision = 9 },
		"pool status":    func(in *Inputs) { in.Pool.Status = &roostv1.PoolStatus{Machines: 3} },
		"metadata bookkeeping": func(in *Inputs) {
			in.Server.Metadata.ModifyIndex, in.Pool.Metadata.Generation, in.Release.Metadata.CreateIndex = 99, 5, 77
		},
		"server annotations": func(in *Inputs) { in.Server.Metadata.Annotations = map[string]string{"note": "x"} },
		// Pool and MachineClass fields that render into nothing: scaling a
		// pool or tuning its rollout must not reboot every Machine in it.
		"pool replicas":            func(in *Inputs) { in.Pool.Spec.Replicas = proto.Int32(7) },
		"pool maintenance windows": func(in *Inputs) { in.Pool.Spec.MaintenanceWindows = []string{"tue"} },
		"pool rollout policy": func(in *Inputs) {
			in.Pool.Spec.Rollout = &roostv1.RolloutPolicy{FailureBudget: 2, MaxUnavailable: &roostv1.IntOrString{Value: &roostv1.IntOrString_IntVal{IntVal: 3}}}
		},
		"class server selector": func(in *Inputs) { in.MachineClass.Spec.ServerSelector = []string{"roost.io/cpus>=64"} },
		"class cleaning": func(in *Inputs) {
			in.MachineClass.Spec.Cleaning = &roostv1.MachineCleaning{Mode: "zero", DataDisks: true}
		},
		// How the Pool picks its release, and the channels the release is
		// in: the picked release is hashed, and promoting it or pinning a
		// Pool to the release it runs must not reboot the Pool.
		"pool channel":            func(in *Inputs) { in.Pool.Spec.ImageChannel = "beta" },
		"pool version pin":        func(in *Inputs) { in.Pool.Spec.ImageChannel, in.Pool.Spec.ImageVersion = "", "2026.11.0" },
		"release channels":        func(in *Inputs) { in.Release.Spec.Channels = append(in.Release.Spec.Channels, "beta") },
		"release channel removed": func(in *Inputs) { in.Release.Spec.Channels = nil },
	}
	for name, mod := range same {
		in := fullInputs()
		mod(&in)
		if in.Hash() != base {
			t.Errorf("%s changed the hash", name)
		}
	}
}

// unitContents is a unit's contents, "" without.
func unitContents(u types.Unit) string {
	if u.Contents == nil {
		return ""
	}
	return *u.Contents
}
