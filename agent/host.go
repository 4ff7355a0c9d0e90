package agent

import (
	"crypto/ed25519"
	"net/http"
	"time"

	"github.com/vishvananda/netns"

	"github.com/roostfleet/roost/agent/boot"
	"github.com/roostfleet/roost/agent/config"
	"github.com/roostfleet/roost/agent/install"
	"github.com/roostfleet/roost/netprofiles/hostnet"
	"github.com/roostfleet/roost/netprofiles/hostnet/nlkernel"
)

// Defaults of Host.
const (
	// DefaultESPDir is where the agent mounts the install disk's ESP.
	DefaultESPDir = "/run/roost/esp"
	// DefaultStateMountDir is where the agent mounts the STATE partition
	// while it runs from the enrollment image (on an installed Server the
	// Revision mounts STATE at the state dir itself).
	DefaultStateMountDir = "/run/roost/state"
	// DefaultHealthTimeout bounds the boot assessment: a Revision whose
	// checks do not pass within it is rebooted, so the boot loader's tries
	// count down and it falls back to the previous entry.
	DefaultHealthTimeout = 5 * time.Minute
	// DefaultRetry is the pause before a failed install or staging step is
	// tried again.
	DefaultRetry = 30 * time.Second
	// DefaultAgentStateDropin is where a Revision's Ignition config puts
	// the agent unit's drop-in requiring STATE (hub/revisions).
	DefaultAgentStateDropin = "/etc/systemd/system/roost-agent.service.d/10-state.conf"
	// ReleaseKeysFile holds the trusted release keys in the state dir.
	ReleaseKeysFile = "release-keys.pem"
	// RevisionsDir holds, in the STATE partition, the spec of each staged
	// Revision (N.json), read back at boot for its required units.
	RevisionsDir = "revisions"
	// CacheDir holds, in the STATE partition, the downloaded artifacts.
	CacheDir = "cache"
	// DefaultJournalDir is journald's persistent journal, which an
	// installed Server's Revision bind-mounts from the STATE partition.
	DefaultJournalDir = "/var/log/journal"
)

// Host is the OS side of installing and booting Revisions. An Agent with a
// nil Options.Host only records desired state (the simulator, most tests).
// Every field but the keys has a real implementation (NewHost) and a fake.
type Host struct {
	Disks    install.Disks
	Mounter  boot.Mounter
	Units    boot.Units
	Rebooter boot.Rebooter
	// Netlink applies network profiles; nil skips them.
	Netlink hostnet.Netlink
	// NewNetlink opens a Netlink of its own for one DHCPv4 client (see
	// dhcp4.Client); nil runs no DHCP.
	NewNetlink func() (hostnet.Netlink, error)
	// FindPartition returns the device of a GPT partition by name (see
	// boot.FindPartition).
	FindPartition func(name string) (string, error)

	// BootedRevision is the Revision this boot runs (roost.revision= on
	// the kernel command line); 0 means the enrollment image.
	BootedRevision int64
	// NetworkProfiles are NetworkProfile YAML files applied at start, in
	// order (the Revision's, or the enrollment profile); missing files are
	// skipped.
	NetworkProfiles []string
	// StateDir is the agent's state dir. On an installed Server it is the
	// STATE partition's mount point.
	StateDir string
	// ESPDir and StateMountDir: see DefaultESPDir, DefaultStateMountDir.
	ESPDir, StateMountDir string
	// TrustedKeys verify release manifests; with none the agent refuses to
	// install anything.
	TrustedKeys []ed25519.PublicKey
	// HealthTimeout: see DefaultHealthTimeout. Retry: see DefaultRetry.
	HealthTimeout, Retry time.Duration
	// KubeletBootstrapPath is where the kubelet's bootstrap kubeconfig is
	// written while the hub hands a bootstrap token; default
	// config.KubeletBootstrapPath.
	KubeletBootstrapPath string
	// AgentStateDropin is the Revision's drop-in that makes the agent's
	// unit require the STATE mount (RequiresMountsFor); a cleaning removes
	// it, so the agent can start again in a boot whose STATE is wiped.
	// Default DefaultAgentStateDropin.
	AgentStateDropin string
	// HTTPClient asks the Revision's health URLs; default a client with a
	// HealthCheckTimeout per request and no proxy.
	HTTPClient *http.Client
	// JournalDir is where journald keeps the persistent journal (one
	// directory per machine ID); the agent bounds those of earlier boots
	// at start (PruneJournals). Empty: no pruning. MachineIDPath holds
	// this boot's machine ID (default /etc/machine-id).
	JournalDir, MachineIDPath string
}

// NewHost returns the real Host: go-diskfs and mkfs for disks, mount(2),
// systemd over its private D-Bus socket, netlink in this namespace.
func NewHost(stateDir string, booted int64, profiles []string, keys []ed25519.PublicKey) (*Host, error) {
	h := &Host{
		Disks: install.OSDisks{}, Mounter: boot.OSMounter{}, Units: boot.Systemd{}, Rebooter: boot.Systemd{},
		FindPartition: boot.FindPartition, BootedRevision: booted, NetworkProfiles: profiles,
		StateDir: stateDir, TrustedKeys: keys, JournalDir: DefaultJournalDir,
	}
	nl, err := nlkernel.New(netns.None())
	if err != nil {
		return nil, err
	}
	h.Netlink = nl
	h.NewNetlink = func() (hostnet.Netlink, error) { return nlkernel.New(netns.None()) }
	return h, nil
}

func (h *Host) withDefaults() *Host {
	c := *h
	if c.ESPDir == "" {
		c.ESPDir = DefaultESPDir
	}
	if c.StateMountDir == "" {
		c.StateMountDir = DefaultStateMountDir
	}
	if c.HealthTimeout <= 0 {
		c.HealthTimeout = DefaultHealthTimeout
	}
	if c.Retry <= 0 {
		c.Retry = DefaultRetry
	}
	if c.MachineIDPath == "" {
		c.MachineIDPath = "/etc/machine-id"
	}
	if c.FindPartition == nil {
		c.FindPartition = boot.FindPartition
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: HealthCheckTimeout, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	}
	if c.AgentStateDropin == "" {
		c.AgentStateDropin = DefaultAgentStateDropin
	}
	if c.KubeletBootstrapPath == "" {
		c.KubeletBootstrapPath = config.KubeletBootstrapPath
	}
	return &c
}
