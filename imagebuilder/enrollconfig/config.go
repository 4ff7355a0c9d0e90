package enrollconfig

import (
	"errors"
	"fmt"
	"io"

	agentconfig "github.com/roostfleet/roost/agent/config"
	"github.com/roostfleet/roost/imagebuilder/ignition"
	"github.com/roostfleet/roost/internal/cpio"
	"sigs.k8s.io/yaml"
)

// ConfigPath is where the Ignition config sits inside the config initrd:
// the OEM config path Flatcar's initramfs reads (the testbed reads it too).
const ConfigPath = "/usr/share/oem/config.ign"

// ExtensionsDir is where the config initrd unpacks system extensions
// (NAME.raw): systemd-sysext merges the images it finds there into /usr
// and /opt before sysinit.target (systemd-sysext(8)), so the OS image
// itself needs nothing of Roost's.
const ExtensionsDir = "/etc/extensions"

// KernelArgs are the kernel arguments every enrollment boot passes before
// the release's own: the console on the screen and the first serial port.
const KernelArgs = "console=tty0 console=ttyS0,115200n8"

// Params are the inputs of an enrollment config.
type Params struct {
	// Hubs are the hub API addresses (host:port) the agent enrolls with.
	Hubs []string
	// CA is the hub CA certificate bundle (PEM) the agent trusts.
	CA []byte
	// Token is the enrollment token, "<id>.<secret>".
	Token string
	// ReleaseKeys are PEM ed25519 public keys the agent trusts to sign the
	// releases it installs (agent config releaseKeys).
	ReleaseKeys []string
	// NetworkProfile is NetworkProfile YAML for enrollment (optional).
	NetworkProfile []byte
	// SSHKeys are authorized for the core user of the live OS (optional).
	SSHKeys []string
	// UserConfigs are more Ignition/Butane snippets merged in (optional).
	UserConfigs []ignition.Snippet
}

// Ignition checks p and returns the Ignition config (JSON) that writes the
// agent configuration. Errors name the input at fault: "token: …",
// "hubs: …", "hub CA: …", "network profile: …", "agent config: …".
func Ignition(p Params) ([]byte, error) {
	if !agentconfig.ValidToken(p.Token) {
		return nil, fmt.Errorf("token: not an enrollment token (want abcdef.0123456789abcdef)")
	}
	if len(p.Hubs) == 0 {
		return nil, errors.New("no hub endpoints (--config admin.conf or --hub)")
	}
	if err := agentconfig.ValidateHubs(p.Hubs); err != nil {
		return nil, fmt.Errorf("hubs: %w", err)
	}
	if _, err := agentconfig.ParseCABundle(p.CA); err != nil {
		return nil, fmt.Errorf("hub CA: %w", err)
	}
	if len(p.NetworkProfile) > 0 {
		var v map[string]any
		if err := yaml.Unmarshal(p.NetworkProfile, &v); err != nil {
			return nil, fmt.Errorf("network profile: %w", err)
		}
	}
	ac := agentconfig.AgentConfig{
		APIVersion:  agentconfig.APIVersion,
		Kind:        agentconfig.Kind,
		Hubs:        p.Hubs,
		CABundle:    string(p.CA),
		Token:       p.Token,
		StateDir:    agentconfig.DefaultStateDir,
		ReleaseKeys: p.ReleaseKeys,
	}
	if err := ac.Validate(); err != nil {
		return nil, fmt.Errorf("agent config: %w", err)
	}
	acYAML, err := ac.Marshal()
	if err != nil {
		return nil, fmt.Errorf("agent config: %w", err)
	}
	return ignition.RenderJSON(ignition.Params{
		AgentConfig:    acYAML,
		SSHKeys:        p.SSHKeys,
		NetworkProfile: p.NetworkProfile,
		Snippets:       p.UserConfigs,
	})
}

// Extension is the config initrd file of the system extension image data
// named name: ExtensionsDir/NAME.raw, mode 0644.
func Extension(name string, data []byte) cpio.File {
	return cpio.File{Path: ExtensionsDir + "/" + name + ".raw", Mode: 0o644, Data: data}
}

// WriteInitrd writes the config initrd: an uncompressed newc archive of
// the Ignition config at ConfigPath (mode 0600) and files (Extension),
// every timestamp mtime (Unix seconds), so equal inputs give equal bytes
// (cpio.Write). It fails on an empty config.
func WriteInitrd(w io.Writer, config []byte, files []cpio.File, mtime int64) error {
	if len(config) == 0 {
		return errors.New("no Ignition config")
	}
	all := append([]cpio.File{{Path: ConfigPath, Mode: 0o600, Data: config}}, files...)
	return cpio.Write(w, all, mtime)
}

// File is one file of the config initrd (cpio.File).
type File = cpio.File
