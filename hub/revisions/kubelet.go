package revisions

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/roostfleet/roost/agent/config"
	"github.com/roostfleet/roost/hub/state"
	"github.com/roostfleet/roost/imagebuilder/ignition"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// A worker Machine's kubelet, in kubeadm's layout. The Revision renders
// the cluster CA, the KubeletConfiguration and the units; the agent writes
// the bootstrap kubeconfig (config.KubeletBootstrapPath) from the
// short-lived token the hub hands it out of band, never in a Revision.
const (
	// KubeletCAPath holds Cluster.spec.caBundle: the kubelet trusts the API
	// server with it and checks client certificates of its own API.
	KubeletCAPath = config.KubeletCAPath
	// KubeletConfigPath holds the KubeletConfiguration.
	KubeletConfigPath = "/etc/kubernetes/kubelet.yaml"
	// KubeletKubeconfigPath is where the kubelet writes its kubeconfig
	// after TLS bootstrap (under KubeletDataDir, so it survives reboots).
	KubeletKubeconfigPath = KubeletDataDir + "/kubeconfig"
	// KubeletDataDir is the kubelet's root directory (certificates, pods).
	KubeletDataDir = "/var/lib/kubelet"
	// KubeletDataStateDir holds, in the STATE partition, one kubelet data
	// directory per Machine (KubeletDataStateDir/<machine>), bind-mounted
	// at KubeletDataDir: the kubelet's client certificate outlives reboots,
	// and a new Machine on the same Server joins afresh.
	KubeletDataStateDir = StateDir + "/kubelet"
	// KubeletBinary is the kubelet of the OS image.
	KubeletBinary = "/usr/bin/kubelet"
	// KubeletUnit runs the kubelet.
	KubeletUnit = "kubelet.service"
	// KubeletDataMountUnit bind-mounts the Machine's kubelet data directory.
	KubeletDataMountUnit = "var-lib-kubelet.mount"
	// KubeletDataDirUnit creates that directory on STATE before the mount.
	KubeletDataDirUnit = "roost-kubelet-dir.service"
	// ContainerRuntimeEndpoint is containerd's CRI socket.
	ContainerRuntimeEndpoint = "unix:///run/containerd/containerd.sock"
	// ProviderIDPrefix starts the providerID of a Roost Node:
	// "roost://<server name>".
	ProviderIDPrefix = "roost://"
	// DefaultClusterDomain is the cluster DNS domain when the Cluster names
	// none.
	DefaultClusterDomain = "cluster.local"
	// kubeletHealthzPort is kubeadm's kubelet /healthz port (on 127.0.0.1).
	kubeletHealthzPort = 10248
)

// Node labels the hub sets on every worker (besides the Pool's).
const (
	LabelPool    = "roost.io/pool"
	LabelMachine = "roost.io/machine"
)

// NodeDerivedLabels are the Server's derived labels a worker's Node
// carries.
var NodeDerivedLabels = []string{state.LabelCPUs, state.LabelMemoryGiB, state.LabelArch, state.LabelFirmware}

// ProviderID is the providerID of the Node of the worker on server.
func ProviderID(server string) string { return ProviderIDPrefix + server }

// IsWorker reports whether the inputs render a kubelet: the Machine serves
// a Cluster.
func (in Inputs) IsWorker() bool { return in.Cluster != nil }

// NodeLabels are the labels a worker's kubelet registers its Node with
// (--node-labels): the Pool's node labels, roost.io/pool,
// roost.io/machine and the Server's NodeDerivedLabels. Pool labels the
// hub sets itself (those, and any derived roost.io/ label) and labels a
// kubelet may not set on its own Node (see NodeLabelError) are left out,
// so one bad label cannot keep the kubelet from starting (the Server's
// operator labels are not Node labels). Nil for a Machine that is not a
// worker.
func (in Inputs) NodeLabels() map[string]string {
	labels, _ := in.nodeLabels()
	return labels
}

// SkippedNodeLabels says, per Pool node label left out of NodeLabels, why.
func (in Inputs) SkippedNodeLabels() map[string]string {
	_, skipped := in.nodeLabels()
	return skipped
}

func (in Inputs) nodeLabels() (labels, skipped map[string]string) {
	if !in.IsWorker() {
		return nil, nil
	}
	labels, skipped = map[string]string{}, map[string]string{}
	for k, v := range in.Pool.GetSpec().GetNodeLabels() {
		if isHubNodeLabel(k) {
			skipped[k] = fmt.Sprintf("label %s is set by the hub", k)
			continue
		}
		if err := NodeLabelError(k, v); err != nil {
			skipped[k] = err.Error()
			continue
		}
		labels[k] = v
	}
	labels[LabelMachine] = in.Machine.GetMetadata().GetName()
	if p := in.Pool.GetMetadata().GetName(); p != "" {
		labels[LabelPool] = p
	}
	server := in.Server.GetMetadata().GetLabels()
	for _, k := range NodeDerivedLabels {
		if v, ok := server[k]; ok && NodeLabelError(k, v) == nil {
			labels[k] = v
		}
	}
	return labels, skipped
}

// isHubNodeLabel reports whether key is one the hub sets on Nodes or
// derives from inventory: a Pool may not set it.
func isHubNodeLabel(key string) bool {
	return key == LabelPool || key == LabelMachine || state.IsDerivedLabel(key)
}

// NodeLabelError says why a kubelet may not register its Node with label
// k=v, or returns nil: the key and value must be valid Kubernetes label
// syntax, and the kubelet must be allowed to set the key on its own Node
// (state.KubeletLabelError, the rule the hub also warns with when a Pool
// is applied).
func NodeLabelError(k, v string) error {
	if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
		return fmt.Errorf("invalid label key %q: %s", k, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
		return fmt.Errorf("invalid value %q of label %s: %s", v, k, strings.Join(msgs, "; "))
	}
	return state.KubeletLabelError(k)
}

// clusterDomain is the Cluster's DNS domain, DefaultClusterDomain when
// it names none.
func clusterDomain(cl *roostv1.Cluster) string {
	if d := cl.GetSpec().GetJoin().GetClusterDomain(); d != "" {
		return d
	}
	return DefaultClusterDomain
}

// KubeletConfiguration is the worker's kubelet configuration: kubeadm's
// defaults for a node (webhook authentication and authorization, client
// certificates checked against the cluster CA, anonymous access off, no
// read-only port, /healthz on 127.0.0.1:10248, certificate rotation, the
// systemd cgroup driver), containerd's socket, the Cluster's DNS, no
// static pods, and providerID roost://<server>.
func KubeletConfiguration(in Inputs) *kubeletv1beta1.KubeletConfiguration {
	join := in.Cluster.GetSpec().GetJoin()
	return &kubeletv1beta1.KubeletConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubeletv1beta1.SchemeGroupVersion.String(), Kind: "KubeletConfiguration"},
		ProviderID: ProviderID(in.Server.GetMetadata().GetName()),
		Authentication: kubeletv1beta1.KubeletAuthentication{
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: KubeletCAPath},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr(true)},
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr(false)},
		},
		Authorization:            kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook},
		CgroupDriver:             "systemd",
		ContainerRuntimeEndpoint: ContainerRuntimeEndpoint,
		ClusterDNS:               append([]string(nil), join.GetClusterDns()...),
		ClusterDomain:            clusterDomain(in.Cluster),
		RotateCertificates:       true,
		StaticPodPath:            "",
		ReadOnlyPort:             0,
		HealthzBindAddress:       "127.0.0.1",
		HealthzPort:              ptr(int32(kubeletHealthzPort)),
	}
}

func ptr[T any](v T) *T { return &v }

// marshalKubeletConfiguration encodes c as YAML without the zero values
// its non-pointer fields marshal to ("0s", 0, "0", {}): they mean "use the
// kubelet's default" either way, and a reader of the file should see only
// what is set. The result decodes back to c exactly (checked).
func marshalKubeletConfiguration(c *kubeletv1beta1.KubeletConfiguration) ([]byte, error) {
	full, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("KubeletConfiguration: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(full, &doc); err != nil {
		return nil, fmt.Errorf("KubeletConfiguration: %w", err)
	}
	pruneZero(doc)
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("KubeletConfiguration: %w", err)
	}
	var back kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(out, &back); err != nil {
		return nil, fmt.Errorf("KubeletConfiguration does not decode: %w", err)
	}
	if !equality.Semantic.DeepEqual(&back, c) {
		return nil, fmt.Errorf("KubeletConfiguration: leaving out zero values changed it:\n%s", out)
	}
	return out, nil
}

// pruneZero removes from m, recursively, the entries that hold "0s", 0,
// "0" or an object left empty.
func pruneZero(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case map[string]any:
			pruneZero(v)
			if len(v) == 0 {
				delete(m, k)
			}
		case string:
			if v == "0s" || v == "0" {
				delete(m, k)
			}
		case float64:
			if v == 0 {
				delete(m, k)
			}
		}
	}
}

// kubeletFiles are a worker's kubelet files and units: the cluster CA,
// the KubeletConfiguration, kubelet.service (enabled) and the bind mount
// that keeps the kubelet's data on STATE.
func kubeletFiles(in Inputs) ([]ignition.File, []ignition.Unit, error) {
	cl := in.Cluster
	if strings.TrimSpace(cl.GetSpec().GetCaBundle()) == "" {
		return nil, nil, fmt.Errorf("Cluster %s has no caBundle: its workers need the API server's CA to join", cl.GetMetadata().GetName())
	}
	cfg, err := marshalKubeletConfiguration(KubeletConfiguration(in))
	if err != nil {
		return nil, nil, err
	}
	files := []ignition.File{
		{Path: KubeletCAPath, Mode: 0o644, Contents: []byte(cl.GetSpec().GetCaBundle())},
		{Path: KubeletConfigPath, Mode: 0o644, Contents: cfg},
	}
	units := []ignition.Unit{{Name: KubeletUnit, Enabled: true, Contents: kubeletUnit(in)}}
	units = append(units, stateBindMount{
		Dir: KubeletDataStateDir + "/" + in.Machine.GetMetadata().GetName(), Where: KubeletDataDir,
		MountUnit: KubeletDataMountUnit, DirUnit: KubeletDataDirUnit,
		What: "the kubelet's data (its client certificate and kubeconfig)", Mode: "0700",
	}.units()...)
	rfiles, runits, err := containerdFiles()
	if err != nil {
		return nil, nil, err
	}
	files, units = append(files, rfiles...), append(units, runits...)
	return files, units, nil
}

// kubeletUnit runs the kubelet as kubeadm's packages do: it restarts
// every 10 s, without a start limit, until the agent has written the
// bootstrap kubeconfig (first join); afterwards it finds its own
// kubeconfig and certificate under KubeletDataDir.
func kubeletUnit(in Inputs) string {
	labels := in.NodeLabels()
	pairs := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		pairs = append(pairs, k+"="+labels[k])
	}
	var b strings.Builder
	fmt.Fprintf(&b, `# Roost: the kubelet of Machine %s, a worker of Cluster %s.
[Unit]
Description=Kubernetes kubelet
Documentation=https://kubernetes.io/docs/reference/command-line-tools-reference/kubelet/
Wants=network-online.target containerd.service
After=network-online.target containerd.service
Requires=%s
After=%s
StartLimitIntervalSec=0

[Service]
ExecStart=%s \
  --bootstrap-kubeconfig=%s \
  --kubeconfig=%s \
  --config=%s`, in.Machine.GetMetadata().GetName(), in.Cluster.GetMetadata().GetName(),
		KubeletDataMountUnit, KubeletDataMountUnit,
		KubeletBinary, config.KubeletBootstrapPath, KubeletKubeconfigPath, KubeletConfigPath)
	if len(pairs) > 0 {
		fmt.Fprintf(&b, " \\\n  --node-labels=%s", strings.Join(pairs, ","))
	}
	b.WriteString(`
Restart=always
RestartSec=10

[Install]
WantedBy=multi-user.target
`)
	return b.String()
}
