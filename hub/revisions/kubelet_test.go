package revisions

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/roostfleet/roost/internal/golden"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// renderKubelet renders in and returns the parsed Ignition config and the
// KubeletConfiguration decoded strictly into the kubelet's own type.
func renderKubelet(t *testing.T, in Inputs) (parsed, *kubeletv1beta1.KubeletConfiguration) {
	t.Helper()
	p := parseIgnition(t, mustRender(t, in, 1).GetIgnition())
	data, ok := p.files[KubeletConfigPath]
	if !ok {
		t.Fatalf("no %s rendered; files %v", KubeletConfigPath, slices.Sorted(maps.Keys(p.files)))
	}
	var kc kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict([]byte(data), &kc); err != nil {
		t.Fatalf("%s does not decode as a KubeletConfiguration: %v\n%s", KubeletConfigPath, err, data)
	}
	return p, &kc
}

func TestKubeletConfiguration(t *testing.T) {
	in := fullInputs()
	in.Cluster.Spec.Join = &roostv1.ClusterJoin{ClusterDns: []string{"10.96.0.10", "fd00::a"}, BootstrapTokenTtl: durationpb.New(time.Hour)}
	_, kc := renderKubelet(t, in)
	if kc.APIVersion != "kubelet.config.k8s.io/v1beta1" || kc.Kind != "KubeletConfiguration" {
		t.Errorf("header %s %s", kc.APIVersion, kc.Kind)
	}
	if kc.ProviderID != "roost://"+testServer {
		t.Errorf("providerID %q", kc.ProviderID)
	}
	a := kc.Authentication
	if a.X509.ClientCAFile != "/etc/kubernetes/pki/ca.crt" || a.Webhook.Enabled == nil || !*a.Webhook.Enabled ||
		a.Anonymous.Enabled == nil || *a.Anonymous.Enabled {
		t.Errorf("authentication %+v", a)
	}
	if kc.Authorization.Mode != kubeletv1beta1.KubeletAuthorizationModeWebhook {
		t.Errorf("authorization %+v", kc.Authorization)
	}
	if kc.CgroupDriver != "systemd" || !kc.RotateCertificates || kc.StaticPodPath != "" || kc.ReadOnlyPort != 0 ||
		kc.HealthzBindAddress != "127.0.0.1" || kc.HealthzPort == nil || *kc.HealthzPort != 10248 ||
		kc.ContainerRuntimeEndpoint != "unix:///run/containerd/containerd.sock" {
		t.Errorf("kubelet configuration %+v", kc)
	}
	if !slices.Equal(kc.ClusterDNS, []string{"10.96.0.10", "fd00::a"}) || kc.ClusterDomain != "cluster.local" {
		t.Errorf("cluster DNS %v domain %q", kc.ClusterDNS, kc.ClusterDomain)
	}

	in.Cluster.Spec.Join = &roostv1.ClusterJoin{ClusterDomain: "prod.example"}
	_, kc = renderKubelet(t, in)
	if kc.ClusterDNS != nil || kc.ClusterDomain != "prod.example" {
		t.Errorf("cluster DNS %v domain %q", kc.ClusterDNS, kc.ClusterDomain)
	}

	// Zero values are left out of the file; what is left decodes to the
	// same configuration.
	p, _ := renderKubelet(t, in)
	for _, zero := range []string{": 0s", ": 0\n", ": \"0\"", ": {}", "staticPodPath"} {
		if strings.Contains(p.files[KubeletConfigPath], zero) {
			t.Errorf("kubelet.yaml holds %q:\n%s", zero, p.files[KubeletConfigPath])
		}
	}
}

// TestKubeletUnits pins the kubelet's units: the service (enabled,
// restarting until the agent wrote the bootstrap kubeconfig), the bind
// mount of the Machine's data directory on STATE and the helper that
// creates it.
// TestWorkerGolden compares what a worker's Revision renders for its
// kubelet, containerd and pod network (files and units, with modes and
// whether each unit is enabled) with testdata/worker/ (go test -update
// rewrites them). Only the kubelet and containerd are enabled: they pull
// in the bind mounts, the mounts the directory helpers.
func TestWorkerGolden(t *testing.T) {
	in := fullInputs()
	spec := mustRender(t, in, 7)
	p := parseIgnition(t, spec.GetIgnition())
	for _, path := range []string{KubeletConfigPath, KubeletCAPath, ContainerdConfigPath, CNIConfigPath} {
		golden.Check(t, filepath.Join("testdata", "worker", "files", strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "_")),
			[]byte(fmt.Sprintf("# mode %04o\n%s", p.modes[path], p.files[path])))
	}
	for _, name := range []string{KubeletUnit, KubeletDataMountUnit, KubeletDataDirUnit, ContainerdUnit, ContainerdDataMountUnit, ContainerdDataDirUnit} {
		u, ok := p.units[name]
		if !ok {
			t.Errorf("%s not rendered", name)
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "# enabled %v\n", u.Enabled != nil && *u.Enabled)
		if u.Contents != nil {
			b.WriteString(*u.Contents)
		}
		for _, d := range u.Dropins {
			fmt.Fprintf(&b, "# drop-in %s\n%s", d.Name, *d.Contents)
		}
		golden.Check(t, filepath.Join("testdata", "worker", "units", name), []byte(b.String()))
	}
	// A worker's boot is good only with containerd and the kubelet active
	// and the kubelet's /healthz answering.
	if got, want := spec.GetRequiredUnits(), []string{"systemd-networkd.service", "roost-agent.service", "containerd.service", "kubelet.service"}; !slices.Equal(got, want) {
		t.Errorf("required units %v, want %v", got, want)
	}
	if got := spec.GetHealthUrls(); !slices.Equal(got, []string{"http://127.0.0.1:10248/healthz"}) {
		t.Errorf("health URLs %v", got)
	}
	// Mount units are named for their mount points, as systemd wants.
	for unit, where := range map[string]string{KubeletDataMountUnit: KubeletDataDir, ContainerdDataMountUnit: ContainerdDataDir} {
		if unit != strings.ReplaceAll(strings.TrimPrefix(where, "/"), "/", "-")+".mount" {
			t.Errorf("mount unit %s does not name %s", unit, where)
		}
	}
	// The CNI config is valid JSON naming plugins Debian and Flatcar ship.
	var conf struct {
		CNIVersion string `json:"cniVersion"`
		Plugins    []struct {
			Type string `json:"type"`
			IPAM struct {
				Type string `json:"type"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(p.files[CNIConfigPath]), &conf); err != nil || conf.CNIVersion != "1.0.0" ||
		len(conf.Plugins) != 1 || conf.Plugins[0].Type != "bridge" || conf.Plugins[0].IPAM.Type != "host-local" {
		t.Errorf("CNI config %+v (%v)", conf, err)
	}
}

// TestStandaloneNoRuntime: a Machine that serves no Cluster gets no
// kubelet, containerd or CNI files and no health URLs.
func TestStandaloneNoRuntime(t *testing.T) {
	in := fullInputs()
	in.Cluster = nil
	spec := mustRender(t, in, 7)
	p := parseIgnition(t, spec.GetIgnition())
	for _, path := range []string{KubeletConfigPath, ContainerdConfigPath, CNIConfigPath} {
		if _, ok := p.files[path]; ok {
			t.Errorf("%s rendered for a standalone Machine", path)
		}
	}
	if _, ok := p.units[ContainerdUnit]; ok {
		t.Errorf("%s rendered for a standalone Machine", ContainerdUnit)
	}
	if len(spec.GetHealthUrls()) != 0 || slices.Contains(spec.GetRequiredUnits(), KubeletUnit) {
		t.Errorf("standalone Machine checks %v %v", spec.GetRequiredUnits(), spec.GetHealthUrls())
	}
}

func TestNodeLabels(t *testing.T) {
	in := fullInputs()
	in.Pool.Spec.NodeLabels = map[string]string{
		"tier":                             "gold",
		"node.kubernetes.io/lifecycle":     "spot",
		"topology.kubernetes.io/zone":      "r12",
		"kubelet.kubernetes.io/x":          "y",
		"example.com/team":                 "storage",
		"empty":                            "",
		"node-role.kubernetes.io/worker":   "",
		"kubernetes.io/role":               "worker",
		"example.k8s.io/x":                 "y",
		"roost.io/pool":                    "other",
		"roost.io/cpus":                    "128",
		"roost.io/nics":                    "9",
		"bad key!":                         "x",
		"value":                            "not valid!",
		"node-restriction.kubernetes.io/a": "b",
	}
	in.Server.Metadata.Labels = map[string]string{
		"rack": "r12", "roost.io/cpus": "16", "roost.io/memory-gib": "64", "roost.io/arch": "amd64",
		"roost.io/firmware": "uefi", "roost.io/nics": "2", "roost.io/system-vendor": "QEMU",
	}
	want := map[string]string{
		"tier": "gold", "node.kubernetes.io/lifecycle": "spot", "topology.kubernetes.io/zone": "r12",
		"kubelet.kubernetes.io/x": "y", "example.com/team": "storage", "empty": "",
		"roost.io/pool": "workers", "roost.io/machine": "workers-abcde",
		"roost.io/cpus": "16", "roost.io/memory-gib": "64", "roost.io/arch": "amd64", "roost.io/firmware": "uefi",
	}
	if got := in.NodeLabels(); !maps.Equal(got, want) {
		t.Errorf("node labels\n got %v\nwant %v", got, want)
	}
	skipped := in.SkippedNodeLabels()
	if got := slices.Sorted(maps.Keys(skipped)); !slices.Equal(got, []string{"bad key!", "example.k8s.io/x", "kubernetes.io/role",
		"node-restriction.kubernetes.io/a", "node-role.kubernetes.io/worker", "roost.io/cpus", "roost.io/nics", "roost.io/pool", "value"}) {
		t.Errorf("skipped %v", skipped)
	}
	for k, why := range map[string]string{
		"node-role.kubernetes.io/worker": "a kubelet may not set labels of the kubernetes.io",
		"roost.io/pool":                  "set by the hub",
		"bad key!":                       "invalid label key",
		"value":                          "invalid value",
	} {
		if !strings.Contains(skipped[k], why) {
			t.Errorf("skipped %s: %q, want %q", k, skipped[k], why)
		}
	}

	// --node-labels holds exactly NodeLabels, sorted.
	p, _ := renderKubelet(t, in)
	unit := *p.units[KubeletUnit].Contents
	_, flag, ok := strings.Cut(unit, "--node-labels=")
	flag, _, _ = strings.Cut(flag, "\n")
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		pairs = append(pairs, k+"="+want[k])
	}
	if !ok || flag != strings.Join(pairs, ",") {
		t.Errorf("--node-labels=%s\nwant %s", flag, strings.Join(pairs, ","))
	}

	// Not a worker: no Node labels, no kubelet.
	in = fullInputs()
	in.Cluster = nil
	if in.NodeLabels() != nil || in.IsWorker() {
		t.Errorf("non-worker node labels %v", in.NodeLabels())
	}
}

// TestClusterSpecHashed classifies every ClusterSpec and ClusterJoin
// field: those a Revision renders change the hash, the others must not
// (a changed drain timeout must not reboot a cluster's workers). A new
// proto field fails this test until it is classified here.
func TestClusterSpecHashed(t *testing.T) {
	type field struct {
		rendered bool
		set      func(*roostv1.ClusterSpec)
	}
	join := func(s *roostv1.ClusterSpec) *roostv1.ClusterJoin {
		if s.Join == nil {
			s.Join = &roostv1.ClusterJoin{}
		}
		return s.Join
	}
	spec := map[string]field{
		"api_endpoint": {false, func(s *roostv1.ClusterSpec) { s.ApiEndpoint = "https://10.9.9.9:6443" }},
		"ca_bundle": {true, func(s *roostv1.ClusterSpec) {
			s.CaBundle = "-----BEGIN CERTIFICATE-----\nOTHER\n-----END CERTIFICATE-----\n"
		}},
		"kubernetes_version": {false, func(s *roostv1.ClusterSpec) { s.KubernetesVersion = "v1.35.1" }},
		"kubeconfig":         {false, func(s *roostv1.ClusterSpec) { s.Kubeconfig = "apiVersion: v1\nkind: Config\n" }},
		"join":               {true, func(s *roostv1.ClusterSpec) { join(s).ClusterDns = []string{"10.96.0.10"} }},
		"drain_timeout":      {false, func(s *roostv1.ClusterSpec) { s.DrainTimeout = durationpb.New(time.Minute) }},
	}
	joinFields := map[string]field{
		"bootstrap_token_ttl": {false, func(s *roostv1.ClusterSpec) { join(s).BootstrapTokenTtl = durationpb.New(3 * time.Hour) }},
		"cluster_dns":         {true, func(s *roostv1.ClusterSpec) { join(s).ClusterDns = []string{"10.96.0.10"} }},
		"cluster_domain":      {true, func(s *roostv1.ClusterSpec) { join(s).ClusterDomain = "example.internal" }},
	}
	for desc, fields := range map[protoreflect.MessageDescriptor]map[string]field{
		(&roostv1.ClusterSpec{}).ProtoReflect().Descriptor(): spec,
		(&roostv1.ClusterJoin{}).ProtoReflect().Descriptor(): joinFields,
	} {
		var names []string
		for i := range desc.Fields().Len() {
			names = append(names, string(desc.Fields().Get(i).Name()))
		}
		slices.Sort(names)
		if got := slices.Sorted(maps.Keys(fields)); !slices.Equal(got, names) {
			t.Errorf("%s fields %v, classified %v", desc.Name(), names, got)
		}
	}
	base := fullInputs().Hash()
	for name, f := range joinFields {
		spec["join."+name] = f
	}
	for name, f := range spec {
		in := fullInputs()
		f.set(in.Cluster.Spec)
		if changed := in.Hash() != base; changed != f.rendered {
			t.Errorf("ClusterSpec.%s: hash changed=%v, want %v", name, changed, f.rendered)
		}
	}
}

// TestHashWorkerLabels: a worker's hash follows its Node labels, derived
// ones included; a standalone Machine's does not follow derived labels.
func TestHashWorkerLabels(t *testing.T) {
	for name, mk := range map[string]func() Inputs{"standalone": standaloneInputs, "pool without cluster": func() Inputs {
		in := fullInputs()
		in.Cluster, in.Pool.Spec.Cluster = nil, ""
		return in
	}} {
		in := mk()
		base := in.Hash()
		in.Server.Metadata.Labels["roost.io/cpus"] = "64"
		in.Server.Metadata.Labels["roost.io/firmware"] = "bios"
		if in.Hash() != base {
			t.Errorf("%s: a derived label changed the hash", name)
		}
	}
	in := fullInputs()
	base := in.Hash()
	in.Server.Metadata.Labels["roost.io/firmware"] = "uefi"
	if in.Hash() == base {
		t.Error("worker: a new derived Node label did not change the hash")
	}
}

// TestHashStable pins the hash of non-worker inputs: a hub whose hash
// function changes renders a new Revision, and so reboots, every Server it
// runs. Change these only on purpose.
func TestHashStable(t *testing.T) {
	if got, want := standaloneInputs().Hash(), "94770d252ea4a3127ea447da3beadc177a5dee357f09343ba62acdccaa536514"; got != want {
		t.Errorf("standalone hash %s, want %s", got, want)
	}
	in := fullInputs()
	in.Cluster, in.Pool.Spec.Cluster = nil, ""
	if got, want := in.Hash(), "6deb81f719c7c8b66ac2e1a34fe863dacd09e1d6908ee04d67ed59d0dbbb1cb3"; got != want {
		t.Errorf("pool without cluster: hash %s, want %s", got, want)
	}
	// The hash before the Pool's image selection and the release's
	// channels were left out: Revisions stored with it are kept (plan).
	if got, want := in.LegacyHash(), "007b2043e5ed82e77bae9c72cf702142cd4bc22613727370ab3c7490e0492b14"; got != want {
		t.Errorf("pool without cluster: legacy hash %s, want %s", got, want)
	}
	if got, want := standaloneInputs().LegacyHash(), "94770d252ea4a3127ea447da3beadc177a5dee357f09343ba62acdccaa536514"; got != want {
		t.Errorf("standalone legacy hash %s, want %s", got, want)
	}
}

// TestPlanKeepsLegacyHash: a Revision hashed by an older roost-hub (the
// Pool's image selection and the release's channels included) is not
// rendered again after the upgrade; a real change still renders one.
func TestPlanKeepsLegacyHash(t *testing.T) {
	in := fullInputs()
	latest := &roostv1.Revision{Spec: &roostv1.RevisionSpec{Number: 4, Machine: in.Machine.GetMetadata().GetName(), InputsSha256: in.LegacyHash()}}
	if spec, _, note := plan(in, latest, ""); spec != nil || note != "" {
		t.Fatalf("plan with a legacy-hashed latest Revision rendered %v (note %q)", spec, note)
	}
	in.Server.Metadata.Labels["rack"] = "r99"
	if spec, _, _ := plan(in, latest, ""); spec.GetNumber() != 5 || spec.GetInputsSha256() != in.Hash() {
		t.Errorf("plan after a change: %v, want Revision 5 with the new hash", spec)
	}
}

func TestRenderWorkerWithoutCA(t *testing.T) {
	in := fullInputs()
	in.Cluster.Spec.CaBundle = ""
	if _, err := Render(in, 1); err == nil || !strings.Contains(err.Error(), "Cluster prod has no caBundle") {
		t.Errorf("Render error %v", err)
	}
}
