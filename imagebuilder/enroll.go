package imagebuilder

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/roostfleet/roost/imagebuilder/enrollconfig"
	"github.com/roostfleet/roost/imagebuilder/ignition"
	"github.com/roostfleet/roost/imagebuilder/iso"
	"github.com/roostfleet/roost/imagebuilder/release"
)

// InfoPath is the image's metadata file (no secrets): release, hubs, token
// id and expiry. "roost/image.inf" keeps to ISO 9660's 8.3 names.
const InfoPath = "roost/image.inf"

// Info is the content of InfoPath.
type Info struct {
	Release     string            `json:"release,omitempty"`
	ReleaseName string            `json:"releaseName,omitempty"`
	Components  map[string]string `json:"components,omitempty"`
	// Extensions maps the name of each extension the image carries to
	// its version.
	Extensions    map[string]string `json:"extensions,omitempty"`
	Hubs          []string          `json:"hubs"`
	TokenID       string            `json:"tokenID,omitempty"`
	TokenExpires  *time.Time        `json:"tokenExpires,omitempty"`
	KernelCmdline string            `json:"kernelCmdline"`
	ConfigPath    string            `json:"configPath"`
	Format        string            `json:"format"`
}

// EnrollOptions are the inputs of an enrollment image.
type EnrollOptions struct {
	// Release is a bundle directory; or give Kernel and Initrd.
	Release        string
	Kernel, Initrd string
	Hubs           []string
	CA             []byte
	Token          string
	// TokenExpires is when the token stops working (zero: unknown/never).
	TokenExpires time.Time
	// NetworkProfile is NetworkProfile YAML for enrollment (optional).
	NetworkProfile []byte
	SSHKeys        []string
	// ReleaseKeys are PEM ed25519 public keys the agent trusts to sign
	// the releases it installs (agent config releaseKeys).
	ReleaseKeys []string
	UserConfigs []ignition.Snippet
	// Extensions are system extension images (.raw from roost-image
	// sysext) the live OS merges before the agent starts, unpacked at
	// ExtensionsDir: the roost-agent extension for an OS image without the
	// agent (see loadExtensions for the checks).
	Extensions []string
	Format     iso.Format
	Loaders    iso.BootLoaders
	Cmdline    []string
	// Now is the current time (for expiry checks); zero means time.Now.
	Now      time.Time
	Progress iso.Progress
}

// Epoch picks the image timestamp: SOURCE_DATE_EPOCH when set, else the
// release date, else the Unix epoch — never the wall clock.
func Epoch(rel *release.Bundle) (time.Time, error) {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: not a number of seconds", s)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	if rel != nil && !rel.Manifest.Date.IsZero() {
		return rel.Manifest.Date.UTC(), nil
	}
	return time.Unix(0, 0).UTC(), nil
}

// Enroll writes an enrollment image to out. On error, no file is left at out.
// With a release bundle and ReleaseKeys, one of the keys must verify the
// bundle's signature (errors wrap ErrReleaseKeys): the image's agent would
// refuse the release otherwise.
func Enroll(o EnrollOptions, out string) error {
	if out == "" {
		return errors.New("no output file (-o)")
	}
	spec, err := prepare(o)
	if err != nil {
		return err
	}
	return iso.Build(spec, out)
}

// Check validates o as Enroll would, without writing an image.
func Check(o EnrollOptions) error {
	spec, err := prepare(o)
	if err != nil {
		return err
	}
	for what, p := range map[string]string{"kernel": spec.Kernel, "initrd": spec.Initrd} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	_, err = iso.FindBootLoaders(spec.Loaders, spec.Format == iso.FormatISO)
	return err
}

func prepare(o EnrollOptions) (iso.Spec, error) {
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	if o.Format == "" {
		o.Format = iso.FormatISO
	}
	if !o.TokenExpires.IsZero() && !o.TokenExpires.After(now) {
		return iso.Spec{}, fmt.Errorf("token expired at %s: create a new one (roostctl) or pass a later --expires", o.TokenExpires.UTC().Format(time.RFC3339))
	}
	ecParams := enrollconfig.Params{Hubs: o.Hubs, CA: o.CA, Token: o.Token, ReleaseKeys: o.ReleaseKeys,
		NetworkProfile: o.NetworkProfile, SSHKeys: o.SSHKeys, UserConfigs: o.UserConfigs}
	// the config first: its inputs are checked before the slower release
	// and extension checks
	cfg, err := enrollconfig.Ignition(ecParams)
	if err != nil {
		return iso.Spec{}, err
	}

	var rel *release.Bundle
	kernel, initrd := o.Kernel, o.Initrd
	var cmdline []string
	if o.Release != "" {
		if rel, err = release.Load(o.Release, nil); err != nil {
			return iso.Spec{}, err
		}
		if len(o.ReleaseKeys) > 0 {
			if err := checkReleaseKeys(rel, o.ReleaseKeys); err != nil {
				return iso.Spec{}, err
			}
		}
		if kernel == "" {
			kernel = rel.Path("kernel")
		}
		if initrd == "" {
			initrd = rel.Path("initrd")
		}
		cmdline = append(cmdline, rel.Manifest.Cmdline...)
	}
	if kernel == "" || initrd == "" {
		return iso.Spec{}, errors.New("no kernel and initrd: give a release bundle (--release) or --kernel and --initrd")
	}
	cmdline = append(cmdline, o.Cmdline...)
	extFiles, extVersions, err := loadExtensions(o.Extensions, o.ReleaseKeys)
	if err != nil {
		return iso.Spec{}, err
	}
	if rel != nil {
		if err := checkAgent(extVersions, rel.Manifest.Components); err != nil {
			return iso.Spec{}, err
		}
	}

	epoch, err := Epoch(rel)
	if err != nil {
		return iso.Spec{}, err
	}
	spec := iso.Spec{
		Format:            o.Format,
		Kernel:            kernel,
		Initrd:            initrd,
		Config:            cfg,
		ConfigInitrdFiles: extFiles,
		Cmdline:           cmdline,
		Loaders:           o.Loaders,
		Epoch:             epoch,
		Progress:          o.Progress,
	}
	info := Info{
		Hubs:          o.Hubs,
		TokenID:       strings.SplitN(o.Token, ".", 2)[0],
		KernelCmdline: spec.KernelCmdline(),
		ConfigPath:    iso.ConfigPath,
		Format:        string(o.Format),
		Extensions:    extVersions,
	}
	if rel != nil {
		info.Release = rel.Manifest.Version
		info.ReleaseName = rel.Manifest.Name
		info.Components = rel.Manifest.Components
		spec.Label = fmt.Sprintf("Roost enrollment (%s %s)", rel.Manifest.Name, rel.Manifest.Version)
	}
	if !o.TokenExpires.IsZero() {
		t := o.TokenExpires.UTC()
		info.TokenExpires = &t
	}
	infoJSON, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return iso.Spec{}, err
	}
	spec.Files = append(spec.Files, iso.File{Path: InfoPath, Data: append(infoJSON, '\n')})
	return spec, nil
}
