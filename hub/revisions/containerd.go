package revisions

import (
	"encoding/json"
	"fmt"

	"github.com/roostfleet/roost/imagebuilder/ignition"
)

// A worker's container runtime: containerd comes with the OS image (as on
// Flatcar), the Revision renders its configuration, keeps its data on the
// STATE partition (pulled images survive reboots) and gives it a CNI
// network.
const (
	// ContainerdConfigPath holds the rendered containerd configuration.
	ContainerdConfigPath = "/etc/containerd/config.toml"
	// ContainerdUnit is the OS image's containerd service.
	ContainerdUnit = "containerd.service"
	// ContainerdBinary is the OS image's containerd (Debian's and
	// Flatcar's path).
	ContainerdBinary = "/usr/bin/containerd"
	// ContainerdDataDir is containerd's root directory (images, snapshots).
	ContainerdDataDir = "/var/lib/containerd"
	// ContainerdStateDir holds containerd's data on the STATE partition,
	// shared by every Machine the Server serves: a cache of images.
	ContainerdStateDir = StateDir + "/containerd"
	// ContainerdDataMountUnit bind-mounts ContainerdStateDir at
	// ContainerdDataDir; ContainerdDataDirUnit creates it first.
	ContainerdDataMountUnit = "var-lib-containerd.mount"
	ContainerdDataDirUnit   = "roost-containerd-dir.service"
	// SandboxImage is the pod sandbox ("pause") image containerd runs for
	// every pod, the one Kubernetes v1.34 defaults to. It must be pullable
	// or imported into containerd's k8s.io namespace beforehand.
	SandboxImage = "registry.k8s.io/pause:3.10"
	// CNIBinDir is where CNI plugins are looked up (the path kubeadm's
	// and the CNI project's packages use; the testbed links Debian's
	// /usr/lib/cni there).
	CNIBinDir = "/opt/cni/bin"
	// CNIConfDir is where containerd reads CNI network configurations.
	CNIConfDir = "/etc/cni/net.d"
	// CNIConfigPath is the hub's fallback pod network: it sorts after the
	// "10-…" files cluster network add-ons (Calico, Cilium, Flannel) write
	// from their DaemonSets, and containerd uses the first file in order.
	CNIConfigPath = CNIConfDir + "/99-roost-bridge.conflist"
	// PodSubnet is the node-local pod subnet of the fallback network.
	PodSubnet = "10.88.0.0/16"
	// KubeletHealthzURL answers 200 OK once the kubelet runs with its
	// client certificate; a worker's boot is good only then.
	KubeletHealthzURL = "http://127.0.0.1:10248/healthz"
)

// containerdConfig is containerd's configuration (version 2, which
// containerd 1.6 through 2.x read): its data in ContainerdDataDir, the
// CRI plugin with runc under the systemd cgroup driver (the kubelet's
// cgroupDriver), SandboxImage, and CNI from CNIBinDir and CNIConfDir.
func containerdConfig() string {
	return `# Roost: containerd of a worker Machine, the kubelet's container runtime (CRI).
version = 2
root = "` + ContainerdDataDir + `"
state = "/run/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + SandboxImage + `"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "` + CNIBinDir + `"
    conf_dir = "` + CNIConfDir + `"
`
}

// containerdDropin makes the OS image's containerd.service read
// ContainerdConfigPath (Flatcar's unit reads /usr/share/containerd's
// unless told otherwise) and keep its data on STATE.
func containerdDropin() string {
	return `# Roost: containerd reads the Revision's configuration and keeps its data on the STATE partition.
[Unit]
Requires=` + ContainerdDataMountUnit + `
After=` + ContainerdDataMountUnit + `

[Service]
ExecStart=
ExecStart=` + ContainerdBinary + ` --config ` + ContainerdConfigPath + `
`
}

// cniConfig is the fallback pod network: a Linux bridge (cni0) with the
// node as gateway and host-local addresses from PodSubnet. Pods reach
// each other and the node; they are not routed between nodes nor
// masqueraded (a cluster installs its own network add-on for that).
func cniConfig() ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "roost",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      "cni0",
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": []any{[]any{map[string]any{"subnet": PodSubnet}}},
					"routes": []any{map[string]any{"dst": "0.0.0.0/0"}},
				},
			},
		},
	}
	out, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("CNI config: %w", err)
	}
	return append(out, '\n'), nil
}

// containerdFiles are a worker's container runtime files and units.
func containerdFiles() ([]ignition.File, []ignition.Unit, error) {
	cni, err := cniConfig()
	if err != nil {
		return nil, nil, err
	}
	files := []ignition.File{
		{Path: ContainerdConfigPath, Mode: 0o644, Contents: []byte(containerdConfig())},
		{Path: CNIConfigPath, Mode: 0o644, Contents: cni},
	}
	units := []ignition.Unit{
		{Name: ContainerdUnit, Enabled: true, Dropins: map[string]string{"10-roost.conf": containerdDropin()}},
	}
	units = append(units, stateBindMount{
		Dir: ContainerdStateDir, Where: ContainerdDataDir, MountUnit: ContainerdDataMountUnit, DirUnit: ContainerdDataDirUnit,
		What: "containerd's data (images, snapshots)", Mode: "0711",
	}.units()...)
	return files, units, nil
}

// requiredUnits are the units that must be active before the agent marks
// a boot good: the defaults, and a worker's containerd and kubelet.
func requiredUnits(in Inputs) []string {
	if !in.IsWorker() {
		return DefaultRequiredUnits
	}
	return append(append([]string(nil), DefaultRequiredUnits...), ContainerdUnit, KubeletUnit)
}

// healthURLs must answer 200 OK before the agent marks a boot good: a
// worker's kubelet /healthz.
func healthURLs(in Inputs) []string {
	if !in.IsWorker() {
		return nil
	}
	return []string{KubeletHealthzURL}
}
