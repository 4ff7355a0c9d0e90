// Package resourcetest holds sample objects for tests: one fully populated
// object of each kind, with status and hub-set metadata, and the fixed
// "now" they are printed at. It imports only the proto, so resource's own
// tests can use it as well as the printers' (cli/printers).
package resourcetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Now is the "now" of table and describe tests.
var Now = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// TS parses an RFC 3339 time into a Timestamp; it panics on a bad one.
func TS(s string) *timestamppb.Timestamp {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return timestamppb.New(t)
}

// Meta is the metadata of a sample object named name, created at created
// (RFC 3339), with labels, annotations and hub-set fields.
func Meta(name string, created string) *roostv1.ObjectMeta {
	return &roostv1.ObjectMeta{
		Name:              name,
		Labels:            map[string]string{"env": "prod", "roost.io/rack": "r12"},
		Annotations:       map[string]string{"example.com/owner": "team-infra"},
		Uid:               "0b6f3c2e-9a41-4c1e-8a57-3f0d2b9c1e01",
		Generation:        2,
		CreateIndex:       10,
		ModifyIndex:       42,
		CreationTimestamp: TS(created),
	}
}

// SampleObjects returns one fully populated object of each kind, with
// status and hub-set metadata, in registry order (resource.Kinds).
func SampleObjects() []*roostv1.Object {
	cond := []*roostv1.Condition{{Type: "Ready", Status: "True", Reason: "AsExpected", Message: "all good", LastTransitionTime: TS("2026-11-20T11:00:00Z")}}
	return []*roostv1.Object{
		wrap(&roostv1.Server{ApiVersion: apiVersion, Kind: "Server", Metadata: Meta("srv-4c4c4544", "2026-01-02T03:04:05Z"),
			Spec: &roostv1.ServerSpec{SystemUuid: "4c4c4544-0042-3510-8052-b3c04f4e4d31", MacFingerprint: "9f86d081884c7d65",
				Pool: "workers", Unschedulable: true, PermanentMacs: []string{"52:54:00:12:34:56"}},
			Status: &roostv1.ServerStatus{AgentVersion: "v0.3.1", BootedRevision: 7, Health: "Healthy",
				LastSeen: TS("2026-11-20T11:59:30Z"), Conditions: cond, State: "Available", Reachability: "Unreachable",
				EnrollmentToken: "rack12", ImageVersion: "2026.11.0",
				Inventory: &roostv1.Inventory{Cpu: &roostv1.CPUInfo{Model: "AMD EPYC 7313", Sockets: 1, Cores: 16, Threads: 32},
					MemoryBytes: 128 << 30, Arch: "amd64", Firmware: "UEFI",
					Disks:  []*roostv1.DiskInfo{{Name: "nvme0n1", SizeBytes: 960197124096, Serial: "S5XXNA0R", Model: "SAMSUNG MZQL2960HCJR"}},
					Nics:   []*roostv1.NICInfo{{Name: "eno1", Mac: "52:54:00:12:34:56", Driver: "ice", SpeedMbps: 25000, PciAddress: "0000:3b:00.0", LinkUp: true}},
					System: &roostv1.SystemInfo{Vendor: "Dell Inc.", Product: "PowerEdge R6525", Serial: "7XK2Q93"}}}}),
		wrap(&roostv1.Machine{ApiVersion: apiVersion, Kind: "Machine", Metadata: Meta("workers-7x2k9", "2026-11-19T12:00:00Z"),
			Spec:   &roostv1.MachineSpec{Server: "srv-4c4c4544", Pool: "workers"},
			Status: &roostv1.MachineStatus{Phase: "Ready", Conditions: cond, Cluster: "prod", NodeName: "workers-7x2k9"}}),
		wrap(&roostv1.Pool{ApiVersion: apiVersion, Kind: "Pool", Metadata: Meta("workers", "2026-11-20T09:30:00Z"),
			Spec: &roostv1.PoolSpec{Cluster: "prod", MachineClass: "large-worker", NetworkProfile: "lacp-vlan100",
				MaintenanceWindows: []string{"tuesday-night", "thursday-night"}, ImageChannel: "stable", Replicas: proto.Int32(0),
				NodeLabels: map[string]string{"b": "2", "a": "1", "node-role.kubernetes.io/worker": ""},
				Rollout: &roostv1.RolloutPolicy{
					MaxUnavailable: &roostv1.IntOrString{Value: &roostv1.IntOrString_StrVal{StrVal: "25%"}},
					Settle:         durationpb.New(90 * time.Second), ReadyTimeout: durationpb.New(0), FailureBudget: 2}},
			Status: &roostv1.PoolStatus{Machines: 3, ReadyMachines: 2, Conditions: cond}}),
		wrap(&roostv1.Cluster{ApiVersion: apiVersion, Kind: "Cluster", Metadata: Meta("prod", "2025-06-01T00:00:00Z"),
			Spec: &roostv1.ClusterSpec{ApiEndpoint: "https://10.0.0.1:6443", CaBundle: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
				KubernetesVersion: "v1.34.4", Kubeconfig: Kubeconfig,
				Join: &roostv1.ClusterJoin{BootstrapTokenTtl: durationpb.New(2 * time.Hour), ClusterDns: []string{"10.96.0.10", "fd00::a"},
					ClusterDomain: "cluster.local"},
				DrainTimeout: durationpb.New(10 * time.Minute)},
			Status: &roostv1.ClusterStatus{Conditions: []*roostv1.Condition{{Type: "Reachable", Status: "False", Reason: "Unauthorized",
				Message: "the API server refused the credentials", LastTransitionTime: TS("2026-11-20T11:00:00Z")}},
				Nodes: 3, ReadyNodes: 2, ServerVersion: "v1.34.2", CredentialsSet: true}}),
		wrap(&roostv1.MachineClass{ApiVersion: apiVersion, Kind: "MachineClass", Metadata: Meta("large-worker", "2026-11-13T12:00:00Z"),
			Spec: &roostv1.MachineClassSpec{ServerSelector: []string{"roost.io/cpus>=16", "!gpu"},
				InstallDisk: &roostv1.InstallDiskHints{Serial: "S4EV", Wwn: "0x5002538e", MinSize: "200Gi", MaxSize: "2Ti", Rotational: proto.Bool(false)},
				KernelArgs:  []string{"console=ttyS0"}, SshAuthorizedKeys: []string{"ssh-ed25519 AAAA ops@example.com"}, WipeForeignDisks: true}}),
		wrap(&roostv1.NetworkProfile{ApiVersion: apiVersion, Kind: "NetworkProfile", Metadata: Meta("lacp-vlan100", "2026-11-20T11:58:00Z"),
			Spec: &roostv1.NetworkProfileSpec{
				Links: []*roostv1.Link{
					{Name: "uplink0", Match: &roostv1.LinkMatch{Mac: "52:54:00:12:34:56", Name: "enp*s0", Driver: "ice", PciPath: "0000:3b:00.0"}, Mtu: 9000, Dhcp6: true},
					{Name: "uplink1", Match: &roostv1.LinkMatch{PciPath: "0000:3b:00.1"}},
				},
				Bonds: []*roostv1.Bond{{Name: "bond0", Members: []string{"uplink0", "uplink1"}, Mode: "active-backup", Miimon: 100,
					Primary: "uplink0", Mtu: 9000, Dhcp4: true}},
				Vlans: []*roostv1.Vlan{{Name: "bond0.100", Id: 100, Link: "bond0", Addresses: []string{"192.0.2.10/24", "2001:db8::10/64"},
					Routes: []*roostv1.Route{{Destination: "default", Gateway: "192.0.2.1", Metric: 100, Table: 10}}}},
				Bridges: []*roostv1.Bridge{{Name: "br0", VlanFiltering: true, Stp: true, Mtu: 1500, Dhcp4: true}},
				Dns:     &roostv1.DNS{Servers: []string{"192.0.2.53"}, Search: []string{"example.com"}},
			}}),
		wrap(&roostv1.MaintenanceWindow{ApiVersion: apiVersion, Kind: "MaintenanceWindow", Metadata: Meta("tuesday-night", "2024-11-20T12:00:00Z"),
			Spec: &roostv1.MaintenanceWindowSpec{Rrule: "FREQ=WEEKLY;BYDAY=TU;BYHOUR=2", Duration: durationpb.New(4*time.Hour + 30*time.Minute), TimeZone: "Europe/Berlin"}}),
		wrap(&roostv1.ImageRelease{ApiVersion: apiVersion, Kind: "ImageRelease", Metadata: Meta("v2026-11-0", "2026-11-01T00:00:00.123456789Z"),
			Spec: &roostv1.ImageReleaseSpec{Version: "2026.11.0", Channels: []string{"stable", "beta"},
				Kernel: &roostv1.Artifact{Sha256: "aa11", Size: 12345678}, Initrd: &roostv1.Artifact{Sha256: "bb22", Size: 99},
				BootLoader: &roostv1.Artifact{Sha256: "cc33", Size: 1},
				Components: map[string]string{"kubelet": "v1.34.4", "containerd": "2.1.4", "systemd": "257"}, Signature: "c2lnbmF0dXJl"}}),
		wrap(&roostv1.EnrollmentToken{ApiVersion: apiVersion, Kind: "EnrollmentToken", Metadata: Meta("rack-r12", "2026-11-20T10:00:00Z"),
			Spec: &roostv1.EnrollmentTokenSpec{SecretSha256: "e3b0c442", ExpiresAt: TS("2026-11-27T10:00:00Z"), MaxUses: 10, Pool: "workers",
				ServerLabels: map[string]string{"rack": "r12"}, RequireApproval: true},
			Status: &roostv1.EnrollmentTokenStatus{Uses: 3, Revoked: false}}),
		wrap(&roostv1.Lease{ApiVersion: apiVersion, Kind: "Lease", Metadata: Meta("srv-4c4c4544", "2026-11-20T11:55:00Z"),
			Spec: &roostv1.LeaseSpec{Server: "srv-4c4c4544", FencingToken: 18446744073709551615, ExpiresAt: TS("2026-11-20T11:50:00Z"),
				Reason: "rollout of pool workers to revision 7", Revision: 7, Pool: "workers", Phase: "Draining"}}),
		wrap(&roostv1.Revision{ApiVersion: apiVersion, Kind: "Revision", Metadata: Meta("srv-4c4c4544-7", "2026-11-20T11:40:00Z"),
			Spec: &roostv1.RevisionSpec{Server: "srv-4c4c4544", Number: 7, Machine: "workers-srv-4c4c4544", ImageRelease: "v2026-11-0",
				ImageVersion: "2026.11.0", Hostname: "node-7", NetworkProfile: "rack-r12", KernelArgs: []string{"console=ttyS0"},
				Kernel: &roostv1.Artifact{Sha256: "aa", Size: 8 << 20}, InputsSha256: "bb"},
			Status: &roostv1.RevisionStatus{Phase: "Failed", Reason: "boot entry roost-rev-7 ran out of tries (3 failed boots); booted revision 6"}}),
		wrap(&roostv1.Extension{ApiVersion: apiVersion, Kind: "Extension", Metadata: Meta("kubelet-v1-34-4", "2026-11-19T08:00:00Z"),
			Spec: &roostv1.ExtensionSpec{Name: "kubelet", Version: "v1.34.4", Architecture: "x86-64",
				Image:    &roostv1.Artifact{Sha256: "5e2b0c7d9a41f3e8b6c1d0a9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9", Size: 58 << 20},
				Paths:    []string{"/usr/bin/kubelet", "/usr/lib/extension-release.d/extension-release.kubelet"},
				Manifest: []byte(`{"apiVersion":"roost.io/v1","kind":"ExtensionManifest","name":"kubelet"}`), Signature: "c2lnbmF0dXJl"}}),
		wrap(&roostv1.ReleaseFeed{ApiVersion: apiVersion, Kind: "ReleaseFeed", Metadata: Meta("upstream", "2026-11-01T08:00:00Z"),
			Spec: &roostv1.ReleaseFeedSpec{Url: "https://releases.example.com/roost", TrustedKeys: []string{"3b9f1c2d4e5f6a7b"},
				PollInterval: durationpb.New(time.Hour), Channels: []string{"beta"}},
			Status: &roostv1.ReleaseFeedStatus{Conditions: cond, LastPoll: TS("2026-11-20T11:00:00Z"), NextPoll: TS("2026-11-20T12:00:00Z"),
				Releases: []*roostv1.FeedRelease{
					{Version: "2026.11.0", Channel: "beta", State: "Imported", Time: TS("2026-11-02T08:00:00Z")},
					{Version: "2026.11.1", Channel: "beta", State: "ImportFailed", Reason: "ArtifactMismatch",
						Message: "artifact sha256 aa: content does not match its sha256 digest", Time: TS("2026-11-20T11:00:00Z")}}}}),
		wrap(&roostv1.Channel{ApiVersion: apiVersion, Kind: "Channel", Metadata: Meta("stable", "2026-11-01T08:00:00Z"),
			Spec: &roostv1.ChannelSpec{Follows: "beta", Soak: durationpb.New(168 * time.Hour), MinMachines: proto.Int32(10)},
			Status: &roostv1.ChannelStatus{Candidate: "2026.11.1", LastPromoted: "2026.11.0", LastPromotion: TS("2026-11-09T08:00:00Z"),
				Evidence: "release 2026.11.0 soaked 168h0m0s on beta (soak 168h0m0s), 12 Machines Good on it (at least 10 wanted), no Pool halted on it",
				Conditions: []*roostv1.Condition{{Type: "Promoting", Status: "True", Reason: "Soaking",
					Message: "release 2026.11.1 soaks on beta until 2026-11-27T08:00:00Z (soak 168h0m0s)", LastTransitionTime: TS("2026-11-20T08:00:00Z")}}}}),
		wrap(&roostv1.Event{ApiVersion: apiVersion, Kind: "Event", Metadata: Meta("ev-412-0", "2026-11-20T11:41:00Z"),
			Spec: &roostv1.EventSpec{InvolvedObject: &roostv1.EventObject{Kind: "Machine", Name: "workers-srv-4c4c4544"},
				Type: "Warning", Reason: "DrainBlocked", Message: "eviction of pod default/web-0 refused by PodDisruptionBudget web", Source: "drain"},
			Status: &roostv1.EventStatus{Count: 3, FirstTimestamp: TS("2026-11-20T11:41:00Z"), LastTimestamp: TS("2026-11-20T11:43:00Z")}}),
	}
}

// Kubeconfig is a Cluster's spec.kubeconfig in the fixtures: what
// describe must never show.
const Kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster:
    server: https://10.0.0.1:6443
contexts:
- name: roost@prod
  context: {cluster: prod, user: roost}
current-context: roost@prod
users:
- name: roost
  user:
    token: fixture-secret-token-do-not-print
`

func durationOf(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

// KubeconfigSecret is the token in Kubeconfig: output that holds it leaks
// a write-only field.
const KubeconfigSecret = "fixture-secret-token-do-not-print"

// apiVersion is resource.APIVersion (this package does not import resource,
// so that resource's tests can import it).
const apiVersion = "roost.io/v1"

// Cluster returns the Cluster of SampleObjects, failing t if there is none
// or its kubeconfig lacks KubeconfigSecret.
func Cluster(t testing.TB) *roostv1.Object {
	t.Helper()
	for _, o := range SampleObjects() {
		if o.GetCluster() != nil {
			if !strings.Contains(o.GetCluster().GetSpec().GetKubeconfig(), KubeconfigSecret) {
				t.Fatal("the fixture Cluster should hold a kubeconfig with the fixture secret")
			}
			return o
		}
	}
	t.Fatal("no Cluster in the fixtures")
	return nil
}

// wrap puts a kind's message into the roostv1.Object field of its type
// (what resource.Wrap does through the kind registry).
func wrap(m proto.Message) *roostv1.Object {
	o := &roostv1.Object{}
	r := o.ProtoReflect()
	name := m.ProtoReflect().Descriptor().FullName()
	fields := r.Descriptor().Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); fd.Message() != nil && fd.Message().FullName() == name {
			r.Set(fd, protoreflect.ValueOfMessage(m.ProtoReflect()))
			return o
		}
	}
	panic(fmt.Sprintf("resourcetest: no roostv1.Object field holds a %s", name))
}
