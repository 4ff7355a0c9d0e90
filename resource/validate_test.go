package resource

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/roostfleet/roost/agent/boot"
	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

const testCA = `-----BEGIN CERTIFICATE-----
MIIBgTCCASegAwIBAgIUXLwghudIFVrdRcSKVTFI6+8UUmIwCgYIKoZIzj0EAwIw
FTETMBEGA1UEAwwKa3ViZXJuZXRlczAgFw0yNjExMzAwMjIzNDlaGA8yMTI2MTEw
NjAyMjM0OVowFTETMBEGA1UEAwwKa3ViZXJuZXRlczBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABJvfnDFUD6hO/1XfGP//MBa3TEftCZBaoWuCILngVZ67Iq/q6BWs
qt3AYjXuaJBtsZQkbo96Jh1mK54tHub3SRijUzBRMB0GA1UdDgQWBBSZpfJ9XKuG
fZj51KarxiYy3pNsbzAfBgNVHSMEGDAWgBSZpfJ9XKuGfZj51KarxiYy3pNsbzAP
BgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCICXLJEMCEsSaQijMXTh5
VmOHh8KGjfUQ8rtThNQM828+AiEAksoVWvPSJ0ocVZTq0w4eWpzazrilG/8zWcBO
c4peYzg=
-----END CERTIFICATE-----
`

const testSSHKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINn+EukAp1egLFWLR9/AHUr4RajCpu0YeNWBTQhgbeaX ops@example.com"

func validPool() *roostv1.Pool {
	return &roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "workers"}, Spec: &roostv1.PoolSpec{Cluster: "prod"}}
}

func validCluster() *roostv1.Cluster {
	return &roostv1.Cluster{Metadata: &roostv1.ObjectMeta{Name: "prod"}, Spec: &roostv1.ClusterSpec{
		ApiEndpoint: "https://10.0.0.1:6443", CaBundle: testCA, KubernetesVersion: "v1.34.4",
		Kubeconfig: tokenKubeconfig, DrainTimeout: durationpb.New(5 * time.Minute),
		Join: &roostv1.ClusterJoin{BootstrapTokenTtl: durationpb.New(time.Hour), ClusterDns: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"}}}
}

func validClass() *roostv1.MachineClass {
	return &roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "mc"}, Spec: &roostv1.MachineClassSpec{
		ServerSelector:    []string{"rack=r12", "gpu!=none", "ssd", "!maintenance", "roost.io/cpus>=16", "roost.io/memory > 64Gi", "a<=1", "b<2.5"},
		InstallDisk:       &roostv1.InstallDiskHints{MinSize: "8Gi", MaxSize: "2Ti"},
		KernelArgs:        []string{"console=ttyS0,115200"},
		SshAuthorizedKeys: []string{testSSHKey}}}
}

func validWindow() *roostv1.MaintenanceWindow {
	return &roostv1.MaintenanceWindow{Metadata: &roostv1.ObjectMeta{Name: "w"}, Spec: &roostv1.MaintenanceWindowSpec{
		Rrule: "FREQ=MONTHLY;BYDAY=2TU,-1FR;BYHOUR=2;BYMINUTE=0;WKST=MO", Duration: durationpb.New(4 * time.Hour), TimeZone: "Europe/Berlin"}}
}

func validProfile() *roostv1.NetworkProfile {
	return &roostv1.NetworkProfile{Metadata: &roostv1.ObjectMeta{Name: "np"}, Spec: &roostv1.NetworkProfileSpec{
		Links: []*roostv1.Link{
			{Name: "eth0", Match: &roostv1.LinkMatch{Mac: "52:54:00:12:34:56"}},
			{Name: "eth1", Match: &roostv1.LinkMatch{Name: "enp*s0f1", PciPath: "0000:3b:00.1"}, Mtu: 9000},
			{Name: "eth2", Match: &roostv1.LinkMatch{Driver: "e1000"}},
		},
		Bonds: []*roostv1.Bond{{Name: "bond0", Members: []string{"eth0", "eth1"}, Mode: "802.3ad", LacpRate: "fast", XmitHashPolicy: "layer3+4"}},
		Vlans: []*roostv1.Vlan{{Name: "bond0.100", Id: 100, Link: "bond0", Addresses: []string{"192.0.2.10/24", "2001:db8::1/64"},
			Routes: []*roostv1.Route{{Destination: "default", Gateway: "192.0.2.1"}, {Destination: "10.0.0.0/8"}}}},
		Bridges: []*roostv1.Bridge{{Name: "br0", Ports: []string{"eth2"}, Dhcp4: true}},
		Dns:     &roostv1.DNS{Servers: []string{"192.0.2.53", "2001:db8::53"}, Search: []string{"example.com"}},
	}}
}

// want is one expected violation: the field and a part of the message.
type want struct{ field, msg string }

func checkViolations(t *testing.T, got []apierror.Violation, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("got %d violations, want %d:\n%s", len(got), len(wants), violationsText(got))
	}
	for i, w := range wants {
		if got[i].Field != w.field || !strings.Contains(got[i].Message+" ("+got[i].Hint+")", w.msg) {
			t.Errorf("violation %d = %s\nwant field %q with %q", i, got[i], w.field, w.msg)
		}
	}
}

func violationsText(vs []apierror.Violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString("  " + v.String() + "\n")
	}
	return b.String()
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		obj    proto.Message
		mutate func(proto.Message)
		want   []want
	}{
		// Metadata.
		{"valid pool", validPool(), nil, nil},
		{"no name", validPool(), func(m proto.Message) { m.(*roostv1.Pool).Metadata.Name = "" },
			[]want{{"metadata.name", "is required"}}},
		{"upper-case name", validPool(), func(m proto.Message) { m.(*roostv1.Pool).Metadata.Name = "Workers" },
			[]want{{"metadata.name", `invalid name "Workers": a lowercase RFC 1123 label`}}},
		{"long name", validPool(), func(m proto.Message) { m.(*roostv1.Pool).Metadata.Name = strings.Repeat("a", 64) },
			[]want{{"metadata.name", "must be no more than 63 characters"}}},
		{"uid as the hub sets it", validPool(), func(m proto.Message) { m.(*roostv1.Pool).Metadata.Uid = "6f1c2a3e-8d4b-4c5a-9e7f-0a1b2c3d4e5f" }, nil},
		{"malformed uid", validPool(), func(m proto.Message) { m.(*roostv1.Pool).Metadata.Uid = "not-a-uid" },
			[]want{{"metadata.uid", `invalid uid "not-a-uid": must be the lower-case RFC 4122 UUID the hub set`}}},
		{"upper-case uid", validPool(), func(m proto.Message) { m.(*roostv1.Pool).Metadata.Uid = "6F1C2A3E-8D4B-4C5A-9E7F-0A1B2C3D4E5F" },
			[]want{{"metadata.uid", "invalid uid"}}},
		{"negative generation", validPool(), func(m proto.Message) { m.(*roostv1.Pool).Metadata.Generation = -5 },
			[]want{{"metadata.generation", "must be ≥ 0, got -5"}}},
		{"labels", validPool(), func(m proto.Message) {
			m.(*roostv1.Pool).Metadata.Labels = map[string]string{"ok": "v", "bad key": "v", "k": "bad value!", "roost.io/rack": "r1"}
		}, []want{{"metadata.labels[bad key]", `invalid label key "bad key"`}, {"metadata.labels[k]", `invalid label value "bad value!"`}}},
		{"annotations", validPool(), func(m proto.Message) {
			m.(*roostv1.Pool).Metadata.Annotations = map[string]string{"a/b/c": "anything goes: here"}
		}, []want{{"metadata.annotations[a/b/c]", "invalid annotation key"}}},
		{"wrong apiVersion and kind", validPool(), func(m proto.Message) {
			m.(*roostv1.Pool).ApiVersion, m.(*roostv1.Pool).Kind = "v1", "Cluster"
		}, []want{{"apiVersion", `unsupported apiVersion "v1"`}, {"kind", `kind "Cluster" does not match the object, a Pool`}}},

		// Pool.
		{"pool without spec (standalone hosts)", validPool(), func(m proto.Message) { m.(*roostv1.Pool).Spec = nil }, nil},
		{"pool refs", validPool(), func(m proto.Message) {
			s := m.(*roostv1.Pool).Spec
			s.Cluster, s.MachineClass, s.NetworkProfile, s.ImageChannel = "Prod", "mc_1", "np.1", "Stable"
		}, []want{{"spec.cluster", `invalid name "Prod"`}, {"spec.machineClass", `invalid name "mc_1"`},
			{"spec.networkProfile", `invalid name "np.1"`}, {"spec.imageChannel", `invalid name "Stable"`}}},
		{"pool windows", validPool(), func(m proto.Message) {
			m.(*roostv1.Pool).Spec.MaintenanceWindows = []string{"a", "", "b", "a", "B"}
		}, []want{{"spec.maintenanceWindows[1]", "is empty"}, {"spec.maintenanceWindows[3]", `window "a" is listed twice (also at index 0)`},
			{"spec.maintenanceWindows[4]", `invalid name "B"`}}},
		// A pin (imageVersion) wins over the channel, which stays set for
		// 'pool unpin': a pinned pool's 'get -o yaml' must apply again.
		{"channel and version (a pin over a channel)", validPool(), func(m proto.Message) {
			m.(*roostv1.Pool).Spec.ImageChannel, m.(*roostv1.Pool).Spec.ImageVersion = "stable", "2026.11.0"
		}, nil},
		{"version only", validPool(), func(m proto.Message) { m.(*roostv1.Pool).Spec.ImageVersion = "2026.11.0" }, nil},
		{"version with a slash", validPool(), func(m proto.Message) {
			m.(*roostv1.Pool).Spec.ImageChannel, m.(*roostv1.Pool).Spec.ImageVersion = "stable", "a/b"
		}, []want{{"spec.imageVersion", `"a/b" holds "/" at byte 1`}}},
		{"version with a blank", validPool(), func(m proto.Message) { m.(*roostv1.Pool).Spec.ImageVersion = "2026 11" },
			[]want{{"spec.imageVersion", `"2026 11" holds " " at byte 4`}}},
		{"negative replicas", validPool(), func(m proto.Message) { m.(*roostv1.Pool).Spec.Replicas = proto.Int32(-1) },
			[]want{{"spec.replicas", "must be ≥ 0, got -1"}}},
		{"zero replicas", validPool(), func(m proto.Message) { m.(*roostv1.Pool).Spec.Replicas = proto.Int32(0) }, nil},
		{"node labels", validPool(), func(m proto.Message) { m.(*roostv1.Pool).Spec.NodeLabels = map[string]string{"-x": ""} },
			[]want{{"spec.nodeLabels[-x]", "invalid label key"}}},
		{"rollout ok", validPool(), func(m proto.Message) {
			m.(*roostv1.Pool).Spec.Rollout = &roostv1.RolloutPolicy{MaxUnavailable: intOrStr("100%"), Settle: durationpb.New(0), ReadyTimeout: durationpb.New(time.Hour), FailureBudget: 3}
		}, nil},
		{"maxUnavailable 0", validPool(), func(m proto.Message) {
			m.(*roostv1.Pool).Spec.Rollout = &roostv1.RolloutPolicy{MaxUnavailable: intOrInt(0)}
		}, []want{{"spec.rollout.maxUnavailable", "must be ≥ 1, got 0"}}},
		{"maxUnavailable 150%", validPool(), func(m proto.Message) {
			m.(*roostv1.Pool).Spec.Rollout = &roostv1.RolloutPolicy{MaxUnavailable: intOrStr("150%")}
		}, []want{{"spec.rollout.maxUnavailable", `must be a percentage from 1% to 100%, got "150%"`}}},
		{"maxUnavailable 0%", validPool(), func(m proto.Message) {
			m.(*roostv1.Pool).Spec.Rollout = &roostv1.RolloutPolicy{MaxUnavailable: intOrStr("0%")}
		}, []want{{"spec.rollout.maxUnavailable", `from 1% to 100%, got "0%"`}}},
		{"maxUnavailable quoted number", validPool(), func(m proto.Message) {
			m.(*roostv1.Pool).Spec.Rollout = &roostv1.RolloutPolicy{MaxUnavailable: intOrStr("3")}
		}, []want{{"spec.rollout.maxUnavailable", `must be an integer ≥ 1 or a percentage "N%", got "3"`}}},
		{"maxUnavailable empty", validPool(), func(m proto.Message) {
			m.(*roostv1.Pool).Spec.Rollout = &roostv1.RolloutPolicy{MaxUnavailable: &roostv1.IntOrString{}}
		}, []want{{"spec.rollout.maxUnavailable", "is empty"}}},
		{"rollout negatives", validPool(), func(m proto.Message) {
			m.(*roostv1.Pool).Spec.Rollout = &roostv1.RolloutPolicy{Settle: durationpb.New(-time.Second), ReadyTimeout: &durationpb.Duration{Seconds: 1, Nanos: -1}, FailureBudget: -1}
		}, []want{{"spec.rollout.settle", "must be ≥ 0s, got -1s"}, {"spec.rollout.readyTimeout", "invalid duration"},
			{"spec.rollout.failureBudget", "must be ≥ 0, got -1"}}},
		{"readyTimeout at most 24h", validPool(), func(m proto.Message) {
			m.(*roostv1.Pool).Spec.Rollout = &roostv1.RolloutPolicy{ReadyTimeout: durationpb.New(MaxReadyTimeout)}
		}, nil},
		{"readyTimeout too long", validPool(), func(m proto.Message) {
			m.(*roostv1.Pool).Spec.Rollout = &roostv1.RolloutPolicy{ReadyTimeout: durationpb.New(99999 * time.Hour)}
		}, []want{{"spec.rollout.readyTimeout", "must be at most 24h, got 99999h"}}},

		// Cluster.
		{"valid cluster", validCluster(), nil, nil},
		{"no endpoint", validCluster(), func(m proto.Message) { m.(*roostv1.Cluster).Spec.ApiEndpoint = "" },
			[]want{{"spec.apiEndpoint", "is required"}}},
		{"http endpoint", validCluster(), func(m proto.Message) { m.(*roostv1.Cluster).Spec.ApiEndpoint = "http://10.0.0.1:6443" },
			[]want{{"spec.apiEndpoint", `must be an https:// URL, got "http://10.0.0.1:6443"`}}},
		{"no host", validCluster(), func(m proto.Message) { m.(*roostv1.Cluster).Spec.ApiEndpoint = "https:///api" },
			[]want{{"spec.apiEndpoint", "must name a host"}}},
		{"bare host", validCluster(), func(m proto.Message) { m.(*roostv1.Cluster).Spec.ApiEndpoint = "10.0.0.1:6443" },
			[]want{{"spec.apiEndpoint", "invalid URL"}}},
		{"credentials", validCluster(), func(m proto.Message) { m.(*roostv1.Cluster).Spec.ApiEndpoint = "https://u:p@h:6443" },
			[]want{{"spec.apiEndpoint", "must not hold credentials"}}},
		{"credentials over http", validCluster(), func(m proto.Message) { m.(*roostv1.Cluster).Spec.ApiEndpoint = "http://u:hunter2@h:6443" },
			[]want{{"spec.apiEndpoint", `must be an https:// URL, got "http://u:xxxxx@h:6443"`}}},
		{"bad port", validCluster(), func(m proto.Message) { m.(*roostv1.Cluster).Spec.ApiEndpoint = "https://h:64x3" },
			[]want{{"spec.apiEndpoint", "invalid URL"}}},
		{"ca not pem", validCluster(), func(m proto.Message) { m.(*roostv1.Cluster).Spec.CaBundle = "hello" },
			[]want{{"spec.caBundle", "holds no PEM certificate"}}},
		{"ca key", validCluster(), func(m proto.Message) {
			m.(*roostv1.Cluster).Spec.CaBundle = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
		}, []want{{"spec.caBundle", `PEM block 1 is a "PRIVATE KEY", not a CERTIFICATE`}}},
		{"ca garbage cert", validCluster(), func(m proto.Message) {
			m.(*roostv1.Cluster).Spec.CaBundle = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
		}, []want{{"spec.caBundle", "certificate 1 does not parse"}}},
		{"ca trailing", validCluster(), func(m proto.Message) { m.(*roostv1.Cluster).Spec.CaBundle = testCA + testCA + "junk" },
			[]want{{"spec.caBundle", "has data after the last PEM certificate"}}},
		{"minimal cluster", validCluster(), func(m proto.Message) {
			m.(*roostv1.Cluster).Spec = &roostv1.ClusterSpec{ApiEndpoint: "https://k8s.example.com:6443"}
		}, nil},
		{"bad kubeconfig", validCluster(), func(m proto.Message) { m.(*roostv1.Cluster).Spec.Kubeconfig = "current-context: x\n" },
			[]want{{"spec.kubeconfig", `current context "x" is not defined (contexts: none)`}}},
		{"join ok", validCluster(), func(m proto.Message) {
			m.(*roostv1.Cluster).Spec.Join = &roostv1.ClusterJoin{BootstrapTokenTtl: durationpb.New(24 * time.Hour),
				ClusterDns: []string{"10.96.0.10", "fd00:10:96::a"}, ClusterDomain: "k8s.corp.example"}
		}, nil},
		{"join ttl short", validCluster(), func(m proto.Message) {
			m.(*roostv1.Cluster).Spec.Join.BootstrapTokenTtl = durationpb.New(59 * time.Second)
		}, []want{{"spec.join.bootstrapTokenTtl", "must be at least 1m, got 59s"}}},
		{"join ttl long", validCluster(), func(m proto.Message) {
			m.(*roostv1.Cluster).Spec.Join.BootstrapTokenTtl = durationpb.New(25 * time.Hour)
		}, []want{{"spec.join.bootstrapTokenTtl", "must be at most 24h, got 25h"}}},
		{"join ttl zero", validCluster(), func(m proto.Message) { m.(*roostv1.Cluster).Spec.Join.BootstrapTokenTtl = durationpb.New(0) },
			[]want{{"spec.join.bootstrapTokenTtl", "must be > 0, got 0s"}}},
		{"join ttl invalid", validCluster(), func(m proto.Message) {
			m.(*roostv1.Cluster).Spec.Join.BootstrapTokenTtl = &durationpb.Duration{Seconds: 1, Nanos: -1}
		}, []want{{"spec.join.bootstrapTokenTtl", "invalid duration"}}},
		{"cluster dns", validCluster(), func(m proto.Message) {
			m.(*roostv1.Cluster).Spec.Join.ClusterDns = []string{"10.96.0.10", "", "kube-dns", "10.96.0.0/12", "::ffff:10.96.0.10", "fe80::1%eth0"}
		}, []want{{"spec.join.clusterDns[1]", "is empty"}, {"spec.join.clusterDns[2]", `invalid IP address "kube-dns"`},
			{"spec.join.clusterDns[3]", `invalid IP address "10.96.0.0/12"`}, {"spec.join.clusterDns[4]", "::ffff:10.96.0.10 is listed twice (also at index 0)"},
			{"spec.join.clusterDns[5]", `invalid IP address "fe80::1%eth0"`}}},
		{"cluster domain", validCluster(), func(m proto.Message) { m.(*roostv1.Cluster).Spec.Join.ClusterDomain = "Cluster_Local" },
			[]want{{"spec.join.clusterDomain", `invalid DNS name "Cluster_Local"`}}},
		{"cluster domain dot", validCluster(), func(m proto.Message) { m.(*roostv1.Cluster).Spec.Join.ClusterDomain = "cluster.local." },
			[]want{{"spec.join.clusterDomain", `must not end with a dot, got "cluster.local."`}}},
		{"drain timeout zero", validCluster(), func(m proto.Message) { m.(*roostv1.Cluster).Spec.DrainTimeout = durationpb.New(0) },
			[]want{{"spec.drainTimeout", "must be > 0, got 0s"}}},
		{"drain timeout negative", validCluster(), func(m proto.Message) { m.(*roostv1.Cluster).Spec.DrainTimeout = durationpb.New(-time.Minute) },
			[]want{{"spec.drainTimeout", "must be > 0, got -1m"}}},
		{"drain timeout long", validCluster(), func(m proto.Message) {
			m.(*roostv1.Cluster).Spec.DrainTimeout = durationpb.New(time.Hour + time.Second)
		}, []want{{"spec.drainTimeout", "must be at most 1h, got 1h1s"}}},
		{"drain timeout max", validCluster(), func(m proto.Message) { m.(*roostv1.Cluster).Spec.DrainTimeout = durationpb.New(time.Hour) }, nil},
		{"bad version", validCluster(), func(m proto.Message) { m.(*roostv1.Cluster).Spec.KubernetesVersion = "1.34" },
			[]want{{"spec.kubernetesVersion", `invalid version "1.34"`}}},

		// MachineClass.
		{"valid class", validClass(), nil, nil},
		{"selectors", validClass(), func(m proto.Message) {
			m.(*roostv1.MachineClass).Spec.ServerSelector = []string{"", "=x", "cpus>=lots", "Bad Key", "a=b=c", "a==b", "a!b", "x=bad value", "cpus>="}
		}, []want{{"spec.serverSelector[0]", "empty requirement"}, {"spec.serverSelector[1]", "missing label key"},
			{"spec.serverSelector[2]", `"lots" is not a quantity`}, {"spec.serverSelector[3]", `invalid label key "Bad Key"`},
			{"spec.serverSelector[4]", "more than one operator"}, {"spec.serverSelector[5]", `write "=" instead of "=="`},
			{"spec.serverSelector[6]", `"!" must start the requirement`}, {"spec.serverSelector[7]", `invalid label value "bad value"`},
			{"spec.serverSelector[8]", "missing number"}}},
		{"disk sizes", validClass(), func(m proto.Message) {
			m.(*roostv1.MachineClass).Spec.InstallDisk = &roostv1.InstallDiskHints{MinSize: "2Ti", MaxSize: "8Gi"}
		}, []want{{"spec.installDisk.minSize", "must not exceed maxSize (2Ti > 8Gi)"}}},
		{"disk garbage", validClass(), func(m proto.Message) {
			m.(*roostv1.MachineClass).Spec.InstallDisk = &roostv1.InstallDiskHints{MinSize: "big", MaxSize: "-1Gi"}
		}, []want{{"spec.installDisk.minSize", `invalid size "big"`}, {"spec.installDisk.maxSize", `must be ≥ 0, got "-1Gi"`}}},
		{"kernel args", validClass(), func(m proto.Message) { m.(*roostv1.MachineClass).Spec.KernelArgs = []string{"", "a b"} },
			[]want{{"spec.kernelArgs[0]", "is empty"}, {"spec.kernelArgs[1]", "must be one argument without spaces"}}},
		{"kernel args Roost sets", validClass(), func(m proto.Message) {
			m.(*roostv1.MachineClass).Spec.KernelArgs = []string{"roost.revision=5", "quiet", "systemd.hostname=x", "roost.debug", "roost.io=1", "roostx=1", "systemd.unit=rescue.target"}
		}, []want{{"spec.kernelArgs[0]", `"roost.revision=5": roost.revision is set by the agent`}, {"spec.kernelArgs[2]", `"systemd.hostname=x": systemd.hostname is set by the hub`},
			{"spec.kernelArgs[3]", `"roost.debug": kernel arguments starting with "roost." are reserved for Roost (remove the item)`},
			{"spec.kernelArgs[4]", "reserved for Roost"}}},
		{"ssh keys", validClass(), func(m proto.Message) {
			m.(*roostv1.MachineClass).Spec.SshAuthorizedKeys = []string{"not a key", testSSHKey + "\n" + testSSHKey}
		}, []want{{"spec.sshAuthorizedKeys[0]", "is not an OpenSSH public key"}, {"spec.sshAuthorizedKeys[1]", "holds more than one key"}}},

		// MaintenanceWindow.
		{"valid window", validWindow(), nil, nil},
		{"utc window", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.TimeZone = "" }, nil},
		{"no rrule", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.Rrule = "" },
			[]want{{"spec.rrule", "is required"}}},
		{"rrule prefix", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.Rrule = "RRULE:FREQ=DAILY" },
			[]want{{"spec.rrule", `drop the "RRULE:" prefix`}}},
		{"rrule no freq", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.Rrule = "BYHOUR=2" },
			[]want{{"spec.rrule", "FREQ is missing"}}},
		{"rrule bad freq", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.Rrule = "FREQ=FORTNIGHTLY" },
			[]want{{"spec.rrule", `unknown FREQ "FORTNIGHTLY"`}}},
		{"rrule typo", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.Rrule = "FREQ=DAILY;BYHUOR=2" },
			[]want{{"spec.rrule", `unknown part "BYHUOR": did you mean "BYHOUR"?`}}},
		{"rrule not kv", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.Rrule = "FREQ=DAILY;weekly" },
			[]want{{"spec.rrule", `part "weekly" is not KEY=VALUE`}}},
		{"rrule lower case", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.Rrule = "freq=daily;byhour=2" }, nil},
		{"rrule weekly ordinal", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.Rrule = "FREQ=WEEKLY;BYDAY=-1FR" },
			[]want{{"spec.rrule", "an ordinal (-1FR) is only allowed with FREQ=MONTHLY or FREQ=YEARLY"}}},
		{"rrule never", validWindow(), func(m proto.Message) {
			m.(*roostv1.MaintenanceWindow).Spec.Rrule = "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30"
		}, []want{{"spec.rrule", "never matches any date"}}},
		{"rrule count without dtstart", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.Rrule = "FREQ=DAILY;COUNT=3" },
			[]want{{"spec.rrule", "COUNT counts openings from DTSTART, which the rule does not set (add DTSTART=YYYYMMDDTHHMMSS"}}},
		{"rrule count with dtstart", validWindow(), func(m proto.Message) {
			m.(*roostv1.MaintenanceWindow).Spec.Rrule = "FREQ=DAILY;COUNT=3;DTSTART=20261201T020000"
		}, nil},
		{"rrule ranges", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.Rrule = "FREQ=DAILY;BYHOUR=24" },
			[]want{{"spec.rrule", "BYHOUR=24: byhour must be between 0 and 23 (integers from 0 to 23"}}},
		{"rrule day", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.Rrule = "FREQ=WEEKLY;BYDAY=TUE" },
			[]want{{"spec.rrule", `"TUE" is not a weekday`}}},
		{"rrule twice", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.Rrule = "FREQ=DAILY;FREQ=WEEKLY" },
			[]want{{"spec.rrule", "FREQ is given twice"}}},
		{"rrule count until", validWindow(), func(m proto.Message) {
			m.(*roostv1.MaintenanceWindow).Spec.Rrule = "FREQ=DAILY;COUNT=3;UNTIL=20270101T000000Z"
		}, []want{{"spec.rrule", "COUNT and UNTIL are mutually exclusive"}}},
		{"rrule trailing", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.Rrule = "FREQ=DAILY;" },
			[]want{{"spec.rrule", "remove the extra ';'"}}},
		{"no duration", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.Duration = nil },
			[]want{{"spec.duration", "is required"}}},
		{"zero duration", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.Duration = durationpb.New(0) },
			[]want{{"spec.duration", "must be > 0, got 0s"}}},
		{"day-long duration", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.Duration = durationpb.New(24 * time.Hour) }, nil},
		{"long duration", validWindow(), func(m proto.Message) {
			m.(*roostv1.MaintenanceWindow).Spec.Duration = durationpb.New(36 * time.Hour)
		}, []want{{"spec.duration", "must be at most 24h, got 36h (split it into two windows)"}}},
		{"week-long duration", validWindow(), func(m proto.Message) {
			m.(*roostv1.MaintenanceWindow).Spec.Duration = durationpb.New(169 * time.Hour)
		}, []want{{"spec.duration", "must be at most 24h, got 169h (split it into 8 windows)"}}},
		{"every problem", validWindow(), func(m proto.Message) {
			s := m.(*roostv1.MaintenanceWindow).Spec
			s.Rrule, s.Duration, s.TimeZone = "FREQ=DAILY;BYHOUR=2;BYHOUR=3", durationpb.New(-time.Hour), "Berlin"
		}, []want{{"spec.rrule", "BYHOUR is given twice"}, {"spec.duration", "must be > 0, got -1h"}, {"spec.timeZone", `unknown time zone "Berlin"`}}},
		{"bad zone", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.TimeZone = "Mars/Olympus" },
			[]want{{"spec.timeZone", `unknown time zone "Mars/Olympus"`}}},
		{"local zone", validWindow(), func(m proto.Message) { m.(*roostv1.MaintenanceWindow).Spec.TimeZone = "Local" },
			[]want{{"spec.timeZone", `"Local" is the zone of whoever reads the window`}}},

		// NetworkProfile.
		{"valid profile", validProfile(), nil, nil},
		{"if names", validProfile(), func(m proto.Message) {
			s := m.(*roostv1.NetworkProfile).Spec
			s.Links[2].Name = "averyveryverylongname"
			s.Bridges[0].Name = "br/0"
			s.Bridges = append(s.Bridges, &roostv1.Bridge{Name: "eth0"})
		}, []want{{"spec.links[2].name", `"averyveryverylongname" is 21 bytes long`}, {"spec.bridges[0].name", `"br/0" is not a legal interface name`},
			{"spec.bridges[1].name", `"eth0" is already the name of link spec.links[0]`}, {"spec.bridges[0].ports[0]", `"eth2" is not an interface of this profile`}}},
		{"link match", validProfile(), func(m proto.Message) {
			s := m.(*roostv1.NetworkProfile).Spec
			s.Links[0].Match = nil
			s.Links[1].Match = &roostv1.LinkMatch{Mac: "52:54:00", Name: "enp[", PciPath: "3b:00.0"}
			s.Links[1].Mtu = 67
		}, []want{{"spec.links[0].match", "set at least one of mac, name, driver, pciPath"}, {"spec.links[1].match.mac", `invalid MAC address "52:54:00"`},
			{"spec.links[1].match.name", `invalid pattern "enp["`}, {"spec.links[1].match.pciPath", `invalid PCI address "3b:00.0"`},
			{"spec.links[1].mtu", "must be from 68 to 65535, got 67"}}},
		{"addresses and routes", validProfile(), func(m proto.Message) {
			v := m.(*roostv1.NetworkProfile).Spec.Vlans[0]
			v.Addresses = []string{"192.0.2.10"}
			v.Routes = []*roostv1.Route{{Gateway: "gw"}, {Destination: "10.0.0.0"}}
		}, []want{{"spec.vlans[0].addresses[0]", `invalid CIDR "192.0.2.10"`}, {"spec.vlans[0].routes[0].destination", "is required"},
			{"spec.vlans[0].routes[0].gateway", `invalid gateway "gw"`}, {"spec.vlans[0].routes[1].destination", `invalid destination "10.0.0.0"`}}},
		{"bond", validProfile(), func(m proto.Message) {
			b := m.(*roostv1.NetworkProfile).Spec.Bonds[0]
			b.Mode, b.LacpRate, b.XmitHashPolicy, b.Primary = "lacp", "medium", "layer5", "eth9"
			b.Members = []string{"eth0", "bond0", "nope", ""}
		}, []want{{"spec.bonds[0].mode", `unknown bond mode "lacp"`}, {"spec.bonds[0].members[1]", `"bond0" is a bond; only a link can be here`},
			{"spec.bonds[0].members[2]", `"nope" is not an interface of this profile`}, {"spec.bonds[0].members[3]", "is empty"},
			{"spec.bonds[0].lacpRate", `unknown LACP rate "medium"`}, {"spec.bonds[0].xmitHashPolicy", `unknown transmit hash policy "layer5"`},
			{"spec.bonds[0].primary", `"eth9" is not a member of the bond`}}},
		{"bond miimon", validProfile(), func(m proto.Message) { m.(*roostv1.NetworkProfile).Spec.Bonds[0].Miimon = MaxBondMiimon }, nil},
		{"bond miimon too large", validProfile(), func(m proto.Message) { m.(*roostv1.NetworkProfile).Spec.Bonds[0].Miimon = 4294967295 },
			[]want{{"spec.bonds[0].miimon", "must be at most 2147483647 (the kernel's limit, in milliseconds), got 4294967295"}}},
		{"bond options by mode", validProfile(), func(m proto.Message) {
			b := m.(*roostv1.NetworkProfile).Spec.Bonds[0]
			b.Mode, b.Primary = "balance-rr", "eth0"
		}, []want{{"spec.bonds[0].lacpRate", "applies to mode 802.3ad only"}, {"spec.bonds[0].primary", "applies to modes active-backup"}}},
		{"bond without mode and members", validProfile(), func(m proto.Message) {
			s := m.(*roostv1.NetworkProfile).Spec
			s.Bonds = []*roostv1.Bond{{Name: "bond1"}}
			s.Vlans[0].Link = "eth0"
		}, []want{{"spec.bonds[0].mode", "is required"}, {"spec.bonds[0].members", "is required"}}},
		{"two owners", validProfile(), func(m proto.Message) {
			s := m.(*roostv1.NetworkProfile).Spec
			s.Bridges[0].Ports = []string{"eth1", "bond0", "bond0.100"}
		}, []want{{"spec.bridges[0].ports[0]", `"eth1" is already in bond "bond0"`},
			{"spec.vlans[0].addresses", "an enslaved interface carries no addresses"}, {"spec.vlans[0].routes", "an enslaved interface carries no routes"}}},
		{"vlans", validProfile(), func(m proto.Message) {
			s := m.(*roostv1.NetworkProfile).Spec
			s.Vlans = append(s.Vlans, &roostv1.Vlan{Name: "v0", Id: 5000, Link: "bond0.100"}, &roostv1.Vlan{Name: "v1", Id: 100, Link: "bond0"},
				&roostv1.Vlan{Name: "v2", Id: 0}, &roostv1.Vlan{Name: "v3", Id: 7, Link: "ghost"})
		}, []want{{"spec.vlans[1].id", "must be from 1 to 4094, got 5000"}, {"spec.vlans[1].link", "stacked VLANs are not supported"},
			{"spec.vlans[2].id", `VLAN 100 on "bond0" is already declared at spec.vlans[0]`}, {"spec.vlans[3].id", "got 0"},
			{"spec.vlans[3].link", "is required"}, {"spec.vlans[4].link", `"ghost" is not an interface of this profile`}}},
		{"dns", validProfile(), func(m proto.Message) {
			m.(*roostv1.NetworkProfile).Spec.Dns = &roostv1.DNS{Servers: []string{"dns.example.com"}, Search: []string{""}}
		}, []want{{"spec.dns.servers[0]", `invalid IP address "dns.example.com"`}, {"spec.dns.search[0]", `invalid search domain ""`}}},

		// Kinds the hub writes get the metadata checks.
		{"server", &roostv1.Server{Metadata: &roostv1.ObjectMeta{Name: "Srv"}}, nil, []want{{"metadata.name", "invalid name"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.mutate != nil {
				tc.mutate(tc.obj)
			}
			checkViolations(t, Validate(Wrap(tc.obj.(Resource))), tc.want)
		})
	}
}

// TestValidateImageVersion: the check 'roostctl pool pin' (and the hub's
// RolloutControl PIN) shares with a Pool's spec.imageVersion.
func TestValidateImageVersion(t *testing.T) {
	for v, want := range map[string]string{
		"2026.11.0":      "",
		"2026.11.0-rc.1": "",
		"":               "version: is required",
		"a/b":            `version: "a/b" holds "/"`,
		"a b":            `version: "a b" holds " "`,
		"a\tb":           `version: "a\tb" holds "\t"`,
		"a\nb":           `version: "a\nb" holds "\n"`,
	} {
		vs := ValidateImageVersion("version", v)
		switch {
		case want == "" && len(vs) > 0:
			t.Errorf("%q: %v, want no violation", v, vs)
		case want != "" && (len(vs) != 1 || !strings.HasPrefix(vs[0].String(), want)):
			t.Errorf("%q: %v, want one starting with %q", v, vs, want)
		}
		// A Pool manifest refuses exactly what pin refuses (an empty
		// imageVersion is no pin).
		if v != "" {
			p := validPool()
			p.Spec.ImageVersion = v
			if got := len(Validate(Wrap(p))) > 0; got != (want != "") {
				t.Errorf("Pool with imageVersion %q: refused %t, pin refuses it: %t", v, got, want != "")
			}
		}
	}
}

func TestValidateEmptyObject(t *testing.T) {
	vs := Validate(&roostv1.Object{})
	if len(vs) != 1 || !strings.Contains(vs[0].Message, "empty object") {
		t.Errorf("got %v", vs)
	}
	if vs := Validate(nil); len(vs) != 1 {
		t.Errorf("nil: got %v", vs)
	}
}

func TestValidateManifests(t *testing.T) {
	in := `apiVersion: roost.io/v1
kind: Pool
metadata:
  name: workers
spec:
  rollout:
    maxUnavailable: 0
---
apiVersion: roost.io/v1
kind: Cluster
metadata:
  name: workers
spec:
  apiEndpoint: https://h:6443
---
apiVersion: roost.io/v1
kind: Pool
metadata:
  name: workers
spec:
  cluster: workers
`
	ms, err := Decode([]byte(in), "pool.yaml", ForApply())
	if err != nil {
		t.Fatal(err)
	}
	got := FormatViolations(ValidateManifests(ms))
	want := `pool.yaml:7:5: Pool "workers": spec.rollout.maxUnavailable: must be ≥ 1, got 0 (a rollout needs at least one Machine down at a time; or use a percentage such as "25%")
pool.yaml:19:3: Pool "workers": metadata.name: Pool "workers" is defined twice in this apply (first at pool.yaml:4:3) (names are unique per kind: rename or remove one)
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if ds := ValidateManifests(nil); ds != nil {
		t.Errorf("no manifests: %v", ds)
	}
}

func intOrStr(s string) *roostv1.IntOrString {
	return &roostv1.IntOrString{Value: &roostv1.IntOrString_StrVal{StrVal: s}}
}

func intOrInt(i int32) *roostv1.IntOrString {
	return &roostv1.IntOrString{Value: &roostv1.IntOrString_IntVal{IntVal: i}}
}

// The kernel argument the agent appends and reads back is one a
// MachineClass may not set.
func TestReservedKernelArgsMatchTheAgent(t *testing.T) {
	if KernelArgRevision != boot.RevisionArg || ReservedKernelArg(boot.RevisionArg+"=1") == "" || ReservedKernelArg(boot.RevisionArg) == "" {
		t.Errorf("the agent's %s is not refused", boot.RevisionArg)
	}
}
