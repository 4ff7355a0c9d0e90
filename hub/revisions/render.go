// Package revisions renders each claimed Server's Revision: the image
// release plus an Ignition config (hostname, labels, network profile, a
// worker's kubelet (see kubelet.go), agent config, SSH keys) and the
// kernel command line,
// numbered per Server. Its Controller runs on the leader only and writes
// through PutRevision commands; Render is a pure function of its Inputs.
package revisions

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/agent/config"
	"github.com/roostfleet/roost/hub/state"
	"github.com/roostfleet/roost/imagebuilder/ignition"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Paths and names a Revision writes on the Server.
const (
	// NetworkProfilePath holds the Revision's NetworkProfile (YAML); the
	// agent applies it at boot before it assesses the boot.
	NetworkProfilePath = config.NetworkProfilePath
	// MachineFactsPath holds the Machine's facts (JSON): machine, pool,
	// cluster, revision, hostname, labels.
	MachineFactsPath = "/etc/roost/machine.json"
	// StateDir is where the ROOST-STATE partition is mounted; the agent
	// keeps its identity there across reboots.
	StateDir = "/var/lib/roost"
	// StateMountUnit mounts the ROOST-STATE partition at StateDir.
	StateMountUnit = "var-lib-roost.mount"
	// DefaultKernelArgs are used when the release names no command line:
	// the console on the first screen and the first serial port.
	DefaultKernelArgs = "console=tty0 console=ttyS0,115200n8"
)

// DefaultRequiredUnits must be active before the agent marks a boot good.
var DefaultRequiredUnits = []string{"systemd-networkd.service", ignition.AgentUnitName}

// Inputs is everything a Revision is rendered from. MachineClass,
// NetworkProfile and Cluster may be nil (a Pool need not name them; a
// standalone Machine has no Pool).
type Inputs struct {
	Machine        *roostv1.Machine
	Server         *roostv1.Server
	Pool           *roostv1.Pool
	MachineClass   *roostv1.MachineClass
	NetworkProfile *roostv1.NetworkProfile
	Cluster        *roostv1.Cluster
	Release        *roostv1.ImageRelease
	// Extensions are the MachineClass's spec.extensions resolved for the
	// Server, by name (see extensions.go); the controller sets them.
	Extensions []*roostv1.Extension
	// extensionsKey identifies Extensions (or why they could not be
	// resolved) for the controller's memo.
	extensionsKey string
}

// Hostname is the Machine's host name: spec.hostname, else its name
// (state.MachineHostname, which the hub keeps unique within a Pool).
func (in Inputs) Hostname() string { return state.MachineHostname(in.Machine) }

// Labels are the Server's operator labels (not the derived roost.io/
// ones, which follow inventory) overlaid with the Pool's node labels.
func (in Inputs) Labels() map[string]string {
	out := map[string]string{}
	for k, v := range in.Server.GetMetadata().GetLabels() {
		if !state.IsDerivedLabel(k) {
			out[k] = v
		}
	}
	for k, v := range in.Pool.GetSpec().GetNodeLabels() {
		out[k] = v
	}
	return out
}

// Hash is the hex sha256 of the inputs' parts that a Revision depends on
// (names, specs, operator labels and a worker's Node labels; not status,
// metadata bookkeeping or spec fields that render nothing). A new
// Revision is rendered exactly when it changes, or, for a Revision hashed
// by an older roost-hub, when LegacyHash changes too.
func (in Inputs) Hash() string { return in.hash(false) }

// LegacyHash is Hash as earlier roost-hub builds computed it:
// it also covered how the Pool picks its image (spec.imageChannel,
// spec.imageVersion) and the picked release's channels, so promoting a
// release to a channel, or pinning a Pool to the release it already runs,
// rendered a new Revision, and rebooted, every Machine on it. The
// controller accepts a Revision whose inputsSha256 is either, so Machines
// keep their Revisions across the upgrade.
func (in Inputs) LegacyHash() string { return in.hash(true) }

// hash is Hash, or LegacyHash when legacy is set.
func (in Inputs) hash(legacy bool) string {
	h := sha256.New()
	write := func(tag string, m proto.Message) {
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		fmt.Fprintf(h, "%s %d\n", tag, len(b))
		h.Write(b)
	}
	fmt.Fprintf(h, "machine %s hostname %s pool %s\n", in.Machine.GetMetadata().GetName(), in.Hostname(), in.Pool.GetMetadata().GetName())
	labels := in.Labels()
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "label %q=%q\n", k, labels[k])
	}
	// Pool and MachineClass fields that render into nothing (scaling,
	// rollout policy, windows, the server selector, the cleaning of
	// released Servers) are left out: changing them must not make every
	// Machine of the pool reboot.
	pool, class := &roostv1.PoolSpec{}, &roostv1.MachineClassSpec{}
	if s := in.Pool.GetSpec(); s != nil {
		pool = proto.Clone(s).(*roostv1.PoolSpec)
	}
	pool.Replicas, pool.Rollout, pool.MaintenanceWindows = nil, nil, nil
	if !legacy {
		// The release the Pool picks is hashed below, not how it was
		// picked: the same release by channel or by version renders the
		// same.
		pool.ImageChannel, pool.ImageVersion = "", ""
	}
	write("pool", pool)
	if s := in.MachineClass.GetSpec(); s != nil {
		class = proto.Clone(s).(*roostv1.MachineClassSpec)
	}
	class.ServerSelector, class.Cleaning = nil, nil
	write("class", class)
	hashExtensions(h, in)
	fmt.Fprintf(h, "profile %s\n", in.NetworkProfile.GetMetadata().GetName())
	write("profile", in.NetworkProfile.GetSpec())
	fmt.Fprintf(h, "cluster %s\n", in.Cluster.GetMetadata().GetName())
	write("cluster", renderedClusterSpec(in.Cluster))
	if in.IsWorker() {
		// the Node labels follow some of the Server's derived labels too
		labels := in.NodeLabels()
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			fmt.Fprintf(h, "node label %q=%q\n", k, labels[k])
		}
	}
	fmt.Fprintf(h, "release %s\n", in.Release.GetMetadata().GetName())
	release := in.Release.GetSpec()
	if release != nil && !legacy {
		// The channels a release is in render into nothing.
		release = proto.Clone(release).(*roostv1.ImageReleaseSpec)
		release.Channels = nil
	}
	write("release", release)
	return hex.EncodeToString(h.Sum(nil))
}

// renderedClusterSpec is the part of a Cluster's spec a Revision renders:
// the CA bundle and the kubelet's DNS settings (the domain defaulted).
// The rest renders into nothing: the hub's credentials, the drain timeout
// and the bootstrap token lifetime concern the hub; the API endpoint
// reaches the kubelet with its bootstrap token (KubeletBootstrap), and a
// joined kubelet keeps the endpoint it joined through; the Kubernetes
// version is the image's. Changing them must not reboot the Cluster's
// workers. Nil for nil.
func renderedClusterSpec(cl *roostv1.Cluster) *roostv1.ClusterSpec {
	if cl == nil {
		return nil
	}
	s := cl.GetSpec()
	return &roostv1.ClusterSpec{
		CaBundle: s.GetCaBundle(),
		Join:     &roostv1.ClusterJoin{ClusterDns: s.GetJoin().GetClusterDns(), ClusterDomain: clusterDomain(cl)},
	}
}

// machineFacts is the content of MachineFactsPath.
type machineFacts struct {
	Machine  string            `json:"machine"`
	Server   string            `json:"server"`
	Pool     string            `json:"pool,omitempty"`
	Cluster  string            `json:"cluster,omitempty"`
	Revision int64             `json:"revision"`
	Hostname string            `json:"hostname"`
	Image    string            `json:"image"`
	Labels   map[string]string `json:"labels,omitempty"`
}

// Render builds Revision number of in.Server. It fails when the release
// lacks a kernel or initrd or its manifest, the kernel command line would
// not fit (checkCommandLine), a worker's Cluster has no CA bundle, or the
// Ignition config does not validate.
func Render(in Inputs, number int64) (*roostv1.RevisionSpec, error) {
	rel := in.Release.GetSpec()
	if rel.GetKernel().GetSha256() == "" || rel.GetInitrd().GetSha256() == "" {
		return nil, fmt.Errorf("ImageRelease %s has no kernel or initrd artifact", in.Release.GetMetadata().GetName())
	}
	if len(rel.GetManifest()) == 0 || rel.GetSignature() == "" {
		return nil, fmt.Errorf("ImageRelease %s has no signed manifest (push it with roostctl image push)", in.Release.GetMetadata().GetName())
	}
	var manifest struct {
		Cmdline []string `json:"cmdline"`
	}
	if err := json.Unmarshal(rel.GetManifest(), &manifest); err != nil {
		return nil, fmt.Errorf("ImageRelease %s: manifest: %w", in.Release.GetMetadata().GetName(), err)
	}
	host := in.Hostname()
	server := in.Server.GetMetadata().GetName()
	args := manifest.Cmdline
	if len(args) == 0 {
		args = strings.Fields(DefaultKernelArgs)
	}
	args = append(append(append([]string(nil), args...), in.MachineClass.GetSpec().GetKernelArgs()...), "systemd.hostname="+host)
	if err := checkCommandLine(in, args, number); err != nil {
		return nil, err
	}

	agentCfg, err := (&config.AgentConfig{APIVersion: config.APIVersion, Kind: config.Kind, StateDir: StateDir}).Marshal()
	if err != nil {
		return nil, err
	}
	facts, err := json.MarshalIndent(machineFacts{
		Machine: in.Machine.GetMetadata().GetName(), Server: server, Pool: in.Pool.GetMetadata().GetName(),
		Cluster: in.Cluster.GetMetadata().GetName(), Revision: number, Hostname: host,
		Image: rel.GetVersion(), Labels: in.Labels(),
	}, "", "  ")
	if err != nil {
		return nil, err
	}
	p := ignition.Params{
		AgentConfig: agentCfg,
		SSHKeys:     in.MachineClass.GetSpec().GetSshAuthorizedKeys(),
		Files: []ignition.File{
			{Path: "/etc/hostname", Mode: 0o644, Contents: []byte(host + "\n")},
			{Path: MachineFactsPath, Mode: 0o644, Contents: append(facts, '\n')},
		},
		Units: []ignition.Unit{
			{Name: StateMountUnit, Enabled: true, Contents: stateMount},
			{Name: ignition.AgentUnitName, Dropins: map[string]string{"10-state.conf": agentStateDropin}},
		},
	}
	jfiles, junits := journalFiles()
	p.Files, p.Units = append(p.Files, jfiles...), append(p.Units, junits...)
	if np := in.NetworkProfile; np != nil {
		// the manifest as a user would write it: no hub-set metadata
		clean := &roostv1.NetworkProfile{ApiVersion: np.GetApiVersion(), Kind: np.GetKind(),
			Metadata: &roostv1.ObjectMeta{Name: np.GetMetadata().GetName(), Labels: np.GetMetadata().GetLabels(), Annotations: np.GetMetadata().GetAnnotations()},
			Spec:     np.GetSpec()}
		y, err := resource.Encode([]*roostv1.Object{resource.Wrap(clean)}, "yaml")
		if err != nil {
			return nil, err
		}
		p.NetworkProfile, p.NetworkProfilePath = y, NetworkProfilePath
		p.Files = append(p.Files, unmanagedLinks(np)...)
	}
	if in.IsWorker() {
		files, units, err := kubeletFiles(in)
		if err != nil {
			return nil, err
		}
		p.Files, p.Units = append(p.Files, files...), append(p.Units, units...)
	}
	addClassSnippets(&p, in)
	ign, err := ignition.RenderJSON(p)
	if err != nil {
		return nil, fmt.Errorf("render Ignition config: %w", err)
	}
	exts, err := revisionExtensions(in)
	if err != nil {
		return nil, err
	}
	mc := in.MachineClass.GetSpec()
	spec := &roostv1.RevisionSpec{
		Server: server, Number: number, Machine: in.Machine.GetMetadata().GetName(),
		ImageRelease: in.Release.GetMetadata().GetName(), ImageVersion: rel.GetVersion(),
		Kernel: rel.GetKernel(), Initrd: rel.GetInitrd(), BootLoader: rel.GetBootLoader(),
		ReleaseManifest: rel.GetManifest(), ReleaseSignature: rel.GetSignature(),
		KernelArgs: args, Ignition: ign,
		InstallDisk: mc.GetInstallDisk(), WipeForeignDisks: mc.GetWipeForeignDisks(),
		Hostname: host, NetworkProfile: in.NetworkProfile.GetMetadata().GetName(),
		RequiredUnits: requiredUnits(in), HealthUrls: healthURLs(in), BootAssessmentTimeout: mc.GetBootAssessmentTimeout(),
		BootTries: mc.GetBootTries(), InputsSha256: in.Hash(), Extensions: exts,
	}
	return proto.Clone(spec).(*roostv1.RevisionSpec), nil
}

// checkCommandLine fails when the command line Revision number would boot
// with (the boot loader's initrd= arguments, args, then the agent's
// roost.revision=N) is longer than the kernel keeps
// (resource.MaxKernelCommandLine): the kernel would cut off its end, and
// with it the hub's systemd.hostname and the agent's roost.revision.
// Validation bounds a MachineClass's kernelArgs so that they fit
// (resource.MaxKernelArgsBytes) when the release's cmdline is within
// resource.ReleaseCmdlineBudget; this catches a MachineClass stored before
// that bound and a release over its budget. args end with the hub's
// systemd.hostname argument.
func checkCommandLine(in Inputs, args []string, number int64) error {
	class := in.MachineClass.GetSpec().GetKernelArgs()
	release := args[:len(args)-len(class)-1]
	revisionArg := fmt.Sprintf("%s=%d", resource.KernelArgRevision, number)
	total := resource.BootLoaderArgs(number) + resource.JoinedLen(args) + 1 + len(revisionArg)
	if total <= resource.MaxKernelCommandLine {
		return nil
	}
	rel, mc := in.Release.GetMetadata().GetName(), in.MachineClass.GetMetadata().GetName()
	parts := fmt.Sprintf("ImageRelease %s's cmdline takes %d bytes (budget %d)", rel, resource.JoinedLen(release), resource.ReleaseCmdlineBudget)
	if in.MachineClass != nil {
		parts += fmt.Sprintf(", MachineClass %s's spec.kernelArgs %d (at most %d)", mc, resource.JoinedLen(class), resource.MaxKernelArgsBytes)
	}
	parts += fmt.Sprintf(", the hub's, the agent's and the boot loader's arguments %d", total-resource.JoinedLen(release)-resource.JoinedLen(class))
	var fix string
	switch {
	case resource.JoinedLen(class) > resource.MaxKernelArgsBytes:
		fix = fmt.Sprintf("shorten spec.kernelArgs of MachineClass %s to at most %d bytes joined", mc, resource.MaxKernelArgsBytes)
	case len(class) > 0:
		fix = fmt.Sprintf("use a release whose cmdline takes at most %d bytes, or shorten spec.kernelArgs of MachineClass %s", resource.ReleaseCmdlineBudget, mc)
	default:
		fix = fmt.Sprintf("use a release whose cmdline takes at most %d bytes", resource.ReleaseCmdlineBudget)
	}
	return fmt.Errorf("the kernel command line would be %d bytes, more than the %d the kernel keeps, which would cut off %s and %s at its end: %s; %s",
		total, resource.MaxKernelCommandLine, args[len(args)-1], revisionArg, parts, fix)
}

const stateMount = `# Roost: the install disk's STATE partition holds the agent's identity and caches.
[Unit]
Description=Roost STATE partition
Before=local-fs.target

[Mount]
What=/dev/disk/by-partlabel/ROOST-STATE
Where=` + StateDir + `
Type=ext4
Options=defaults,noatime

[Install]
WantedBy=local-fs.target
`

// agentStateDropin makes the agent require the STATE mount. Its path
// (roost-agent.service.d/10-state.conf) is agent.DefaultAgentStateDropin,
// which a cleaning removes once STATE is wiped.
const agentStateDropin = `[Unit]
RequiresMountsFor=` + StateDir + `
`

// unmanagedLinks are systemd-networkd files that keep networkd away from
// every link the profile owns (matched as the profile matches them, and by
// the names the agent gives them), so DHCP on other NICs goes on.
func unmanagedLinks(np *roostv1.NetworkProfile) []ignition.File {
	var files []ignition.File
	add := func(id, match string) {
		files = append(files, ignition.File{
			Path: fmt.Sprintf("/etc/systemd/network/10-roost-%s.network", id), Mode: 0o644,
			Contents: []byte("# Roost: NetworkProfile " + np.GetMetadata().GetName() + " owns this link.\n[Match]\n" + match + "[Link]\nUnmanaged=yes\n"),
		})
	}
	s := np.GetSpec()
	var names []string
	for _, l := range s.GetLinks() {
		names = append(names, l.GetName())
		var m strings.Builder
		if v := l.GetMatch().GetMac(); v != "" {
			// the current address: virtio and other NICs report no
			// permanent one (a PermanentMACAddress= match would miss them)
			fmt.Fprintf(&m, "MACAddress=%s\n", strings.ToLower(v))
		}
		if v := l.GetMatch().GetName(); v != "" {
			fmt.Fprintf(&m, "Name=%s\n", v)
		}
		if v := l.GetMatch().GetDriver(); v != "" {
			fmt.Fprintf(&m, "Driver=%s\n", v)
		}
		if v := l.GetMatch().GetPciPath(); v != "" {
			fmt.Fprintf(&m, "Path=pci-%s\n", v)
		}
		if m.Len() > 0 {
			add("match-"+l.GetName(), m.String())
		}
	}
	for _, b := range s.GetBonds() {
		names = append(names, b.GetName())
	}
	for _, v := range s.GetVlans() {
		names = append(names, v.GetName())
	}
	for _, b := range s.GetBridges() {
		names = append(names, b.GetName())
	}
	for _, n := range names {
		add(n, "Name="+n+"\n")
	}
	return files
}
