// Package ignition renders Ignition configs (spec 3.3.0): the one baked
// into an enrollment image (the agent configuration file, the roost-agent
// unit, SSH keys for the user "core", the optional enrollment network
// profile) and, for hub/revisions, each Revision's; and it checks and
// merges users' snippets into them (snippet.go: Ignition spec 3 as JSON
// or YAML, or a Container Linux Config; one allow-list, Allowed, for the
// enrollment --user-config and a MachineClass's snippets alike).
//
// Spec 3.3.0 is what Debian's ignition (2.14) and Flatcar read. The output is
// deterministic: the same inputs give the same bytes (files, directories,
// links sorted by path; units by name; no timestamps).
package ignition

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_3"
	"github.com/coreos/ignition/v2/config/v3_3/types"
	"github.com/coreos/ignition/v2/config/validate"
	"github.com/coreos/vcontext/report"
)

// Paths and names Roost writes into the machine.
const (
	SpecVersion        = "3.3.0"
	AgentConfigPath    = "/etc/roost/agent.yaml"
	EnrollNetworkPath  = "/etc/roost/enroll-network.yaml"
	AgentUnitName      = "roost-agent.service"
	AgentBinary        = "/usr/bin/roost-agent"
	SSHUser            = "core"
	agentConfigMode    = 0o600
	networkProfileMode = 0o600
)

// AgentUnit is the systemd unit that runs the agent.
const AgentUnit = `[Unit]
Description=Roost agent
Documentation=https://github.com/roostfleet/roost
Wants=network-online.target
After=network-online.target
ConditionPathExists=` + AgentConfigPath + `

[Service]
ExecStart=` + AgentBinary + ` --config ` + AgentConfigPath + `
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
`

// Params is what goes into the rendered config.
type Params struct {
	// AgentConfig is the content of /etc/roost/agent.yaml (required).
	AgentConfig []byte
	// SSHKeys are authorized keys for the user "core".
	SSHKeys []string
	// NetworkProfile is the NetworkProfile YAML for enrollment (optional).
	NetworkProfile []byte
	// Snippets are user configs, checked (CheckSnippet) and merged
	// (MergeSnippets) in order; Roost's own entries are merged last, and
	// a snippet may not write any of them.
	Snippets []Snippet
	// Reserved is what the Snippets may not write besides Roost's own
	// entries (RevisionReserved for a Revision); nil for nothing more.
	Reserved *Reserved
	// NetworkProfilePath is where NetworkProfile is written; default
	// EnrollNetworkPath.
	NetworkProfilePath string
	// Files are further files Roost writes (a Revision's hostname, machine
	// facts, cluster join files).
	Files []File
	// Units are further systemd units (and drop-ins) Roost writes.
	Units []Unit
}

// File is one file of the rendered config: absolute Path, Unix Mode
// (e.g. 0o644) and Contents.
type File struct {
	Path     string
	Mode     int
	Contents []byte
}

// Unit is a systemd unit: Contents (empty for a drop-in-only unit),
// Enabled, and drop-ins by file name ("10-roost.conf") with contents.
type Unit struct {
	Name     string
	Contents string
	Enabled  bool
	Dropins  map[string]string
}

// Render builds and validates the config: the Snippets (see CheckSnippet
// and MergeSnippets; an error is a *SnippetError or SnippetErrors), then
// Roost's own entries, and SettingsUnit when the Snippets write kernel
// module lists, sysctl or tmpfiles.d files.
func Render(p Params) (types.Config, error) {
	if len(p.AgentConfig) == 0 {
		return types.Config{}, errors.New("ignition: agent config is empty")
	}
	own := roostConfig(p)
	reserved := p.Reserved.With(ownReserved(own))
	parsed := make([]*Parsed, 0, len(p.Snippets))
	for _, s := range p.Snippets {
		ps, err := CheckSnippet(s, reserved)
		if err != nil {
			return types.Config{}, err
		}
		parsed = append(parsed, ps)
	}
	cfg, err := MergeSnippets(parsed)
	if err != nil {
		return types.Config{}, err
	}
	if u, ok := settingsUnit(cfg); ok {
		own.Systemd.Units = append(own.Systemd.Units, u)
	}
	cfg = v3_3.Merge(cfg, own)
	cfg.Ignition.Version = SpecVersion
	Sort(&cfg)
	if err := Validate(cfg); err != nil {
		return types.Config{}, err
	}
	return cfg, nil
}

// RenderJSON renders and marshals the config.
func RenderJSON(p Params) ([]byte, error) {
	cfg, err := Render(p)
	if err != nil {
		return nil, err
	}
	return Marshal(cfg)
}

// Marshal encodes cfg as indented JSON and checks that the library parses
// the bytes back and validates them (v3_3.Parse: the same checks as
// Validate, once; a render used to run them twice, and at 10,000
// Machines Ignition's reflective validation was a tenth of the hub's
// allocations). Errors: "ignition: invalid config: REPORT" with the
// field paths, or "ignition: rendered config does not parse".
func Marshal(cfg types.Config) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(cfg); err != nil {
		return nil, fmt.Errorf("ignition: encode: %w", err)
	}
	if _, rpt, err := v3_3.Parse(buf.Bytes()); err != nil {
		if rpt.IsFatal() {
			return nil, fmt.Errorf("ignition: invalid config: %s", strings.TrimSpace(rpt.String()))
		}
		return nil, fmt.Errorf("ignition: rendered config does not parse: %v: %s", err, strings.TrimSpace(rpt.String()))
	}
	return buf.Bytes(), nil
}

// Validate runs the Ignition library's validation and returns its fatal
// entries (with their field paths) as an error.
func Validate(cfg types.Config) error {
	rpt := validateReport(cfg)
	if rpt.IsFatal() {
		return fmt.Errorf("ignition: invalid config: %s", strings.TrimSpace(rpt.String()))
	}
	return nil
}

func validateReport(cfg types.Config) report.Report {
	return validate.ValidateWithContext(cfg, nil)
}

// Sort orders files, directories and links by path, units by name, users
// by name, so equal configs marshal to equal bytes.
func Sort(cfg *types.Config) {
	s := &cfg.Storage
	sort.SliceStable(s.Files, func(i, j int) bool { return s.Files[i].Path < s.Files[j].Path })
	sort.SliceStable(s.Directories, func(i, j int) bool { return s.Directories[i].Path < s.Directories[j].Path })
	sort.SliceStable(s.Links, func(i, j int) bool { return s.Links[i].Path < s.Links[j].Path })
	u := cfg.Systemd.Units
	sort.SliceStable(u, func(i, j int) bool { return u[i].Name < u[j].Name })
	for k := range u {
		d := u[k].Dropins
		sort.SliceStable(d, func(i, j int) bool { return d[i].Name < d[j].Name })
	}
	users := cfg.Passwd.Users
	sort.SliceStable(users, func(i, j int) bool { return users[i].Name < users[j].Name })
}

func roostConfig(p Params) types.Config {
	cfg := types.Config{Ignition: types.Ignition{Version: SpecVersion}}
	cfg.Storage.Directories = append(cfg.Storage.Directories, dir("/etc/roost", 0o700))
	cfg.Storage.Files = append(cfg.Storage.Files, file(AgentConfigPath, agentConfigMode, p.AgentConfig))
	if len(p.NetworkProfile) > 0 {
		path := p.NetworkProfilePath
		if path == "" {
			path = EnrollNetworkPath
		}
		cfg.Storage.Files = append(cfg.Storage.Files, file(path, networkProfileMode, p.NetworkProfile))
	}
	for _, f := range p.Files {
		cfg.Storage.Files = append(cfg.Storage.Files, file(f.Path, f.Mode, f.Contents))
	}
	agent := types.Unit{Name: AgentUnitName, Enabled: ptr(true), Contents: ptr(AgentUnit)}
	for _, u := range p.Units {
		tu := types.Unit{Name: u.Name}
		if u.Contents != "" {
			tu.Contents = ptr(u.Contents)
		}
		if u.Enabled {
			tu.Enabled = ptr(true)
		}
		for _, n := range slices.Sorted(maps.Keys(u.Dropins)) {
			tu.Dropins = append(tu.Dropins, types.Dropin{Name: n, Contents: ptr(u.Dropins[n])})
		}
		if u.Name == AgentUnitName {
			agent.Dropins = append(agent.Dropins, tu.Dropins...)
			continue
		}
		cfg.Systemd.Units = append(cfg.Systemd.Units, tu)
	}
	cfg.Systemd.Units = append(cfg.Systemd.Units, agent)
	if len(p.SSHKeys) > 0 {
		u := types.PasswdUser{Name: SSHUser}
		for _, k := range p.SSHKeys {
			for _, line := range strings.Split(k, "\n") {
				line = strings.TrimSpace(line)
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				u.SSHAuthorizedKeys = append(u.SSHAuthorizedKeys, types.SSHAuthorizedKey(line))
			}
		}
		cfg.Passwd.Users = append(cfg.Passwd.Users, u)
	}
	return cfg
}

// DataURL encodes content as an RFC 2397 data URL (base64).
func DataURL(content []byte) string {
	return "data:;base64," + base64.StdEncoding.EncodeToString(content)
}

func file(path string, mode int, content []byte) types.File {
	src := DataURL(content)
	return types.File{
		Node: types.Node{Path: path, Overwrite: ptr(true)},
		FileEmbedded1: types.FileEmbedded1{
			Mode:     ptr(mode),
			Contents: types.Resource{Source: &src},
		},
	}
}

func dir(path string, mode int) types.Directory {
	return types.Directory{
		Node:               types.Node{Path: path},
		DirectoryEmbedded1: types.DirectoryEmbedded1{Mode: ptr(mode)},
	}
}

func ptr[T any](v T) *T { return &v }
