package ignition

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_3"
	"github.com/coreos/ignition/v2/config/v3_3/types"
	ct "github.com/flatcar/container-linux-config-transpiler/config"
	ign23 "github.com/flatcar/ignition/config/v2_3/types"
)

// ParseSnippet reads a user config: Ignition JSON (spec 3.0 to 3.3, by its
// ignition.version) when it starts with '{', otherwise a Container Linux
// Config. Errors name the snippet and the field path.
func ParseSnippet(s Snippet) (types.Config, error) {
	data := bytes.TrimSpace(s.Data)
	if len(data) == 0 {
		return types.Config{}, fmt.Errorf("user config %s: empty", s.Name)
	}
	if data[0] == '{' {
		cfg, rpt, err := v3_3.ParseCompatibleVersion(data)
		if err != nil {
			msg := strings.TrimSpace(rpt.String())
			if msg == "" {
				return types.Config{}, fmt.Errorf("user config %s (Ignition JSON): %v", s.Name, err)
			}
			return types.Config{}, fmt.Errorf("user config %s (Ignition JSON): %v: %s", s.Name, err, msg)
		}
		return cfg, nil
	}
	return parseCLC(s.Name, data)
}

func parseCLC(name string, data []byte) (types.Config, error) {
	clc, ast, rpt := ct.Parse(data)
	if rpt.IsFatal() {
		return types.Config{}, fmt.Errorf("user config %s (Container Linux Config): %s", name, strings.TrimSpace(rpt.String()))
	}
	old, rpt := ct.Convert(clc, "", ast)
	if rpt.IsFatal() {
		return types.Config{}, fmt.Errorf("user config %s (Container Linux Config): %s", name, strings.TrimSpace(rpt.String()))
	}
	cfg, err := translate23(old)
	if err != nil {
		return types.Config{}, fmt.Errorf("user config %s (Container Linux Config): %w", name, err)
	}
	return cfg, nil
}

// translatable lists the Ignition 2.3 fields (as JSON paths; "*" is any list
// index) that Roost carries over to spec 3.3. Everything else is refused.
var translatable = map[string]bool{
	"ignition.version": true,

	"storage.files.*.filesystem":                 true,
	"storage.files.*.path":                       true,
	"storage.files.*.overwrite":                  true,
	"storage.files.*.mode":                       true,
	"storage.files.*.append":                     true,
	"storage.files.*.contents.source":            true,
	"storage.files.*.contents.compression":       true,
	"storage.files.*.contents.verification.hash": true,
	"storage.files.*.user.id":                    true,
	"storage.files.*.user.name":                  true,
	"storage.files.*.group.id":                   true,
	"storage.files.*.group.name":                 true,

	"storage.directories.*.filesystem": true,
	"storage.directories.*.path":       true,
	"storage.directories.*.overwrite":  true,
	"storage.directories.*.mode":       true,
	"storage.directories.*.user.id":    true,
	"storage.directories.*.user.name":  true,
	"storage.directories.*.group.id":   true,
	"storage.directories.*.group.name": true,

	"storage.links.*.filesystem": true,
	"storage.links.*.path":       true,
	"storage.links.*.overwrite":  true,
	"storage.links.*.target":     true,
	"storage.links.*.hard":       true,
	"storage.links.*.user.id":    true,
	"storage.links.*.user.name":  true,
	"storage.links.*.group.id":   true,
	"storage.links.*.group.name": true,

	"systemd.units.*.name":               true,
	"systemd.units.*.contents":           true,
	"systemd.units.*.enable":             true,
	"systemd.units.*.enabled":            true,
	"systemd.units.*.mask":               true,
	"systemd.units.*.dropins.*.name":     true,
	"systemd.units.*.dropins.*.contents": true,

	"passwd.users.*.name":              true,
	"passwd.users.*.passwordHash":      true,
	"passwd.users.*.sshAuthorizedKeys": true,
	"passwd.users.*.uid":               true,
	"passwd.users.*.gecos":             true,
	"passwd.users.*.homeDir":           true,
	"passwd.users.*.noCreateHome":      true,
	"passwd.users.*.primaryGroup":      true,
	"passwd.users.*.groups":            true,
	"passwd.users.*.noUserGroup":       true,
	"passwd.users.*.noLogInit":         true,
	"passwd.users.*.shell":             true,
	"passwd.users.*.system":            true,
}

// untranslatable returns the JSON paths of set fields of old that Roost
// does not translate, sorted.
func untranslatable(old ign23.Config) ([]string, error) {
	raw, err := json.Marshal(old)
	if err != nil {
		return nil, err
	}
	var tree any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	var bad []string
	var walk func(v any, path, pattern string)
	walk = func(v any, path, pattern string) {
		if pattern != "" && translatable[pattern] {
			return
		}
		switch t := v.(type) {
		case map[string]any:
			for k, c := range t {
				walk(c, join(path, k), join(pattern, k))
			}
		case []any:
			for i, c := range t {
				walk(c, fmt.Sprintf("%s.%d", path, i), pattern+".*")
			}
		default:
			if isZero(t) {
				return
			}
			bad = append(bad, path)
		}
	}
	walk(tree, "", "")
	sort.Strings(bad)
	return bad, nil
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

func isZero(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case bool:
		return !t
	case string:
		return t == ""
	case json.Number:
		return t.String() == "0"
	}
	return false
}

// translate23 converts the Ignition 2.3 config that ct emits into spec 3.3,
// for files, directories, links, units, drop-ins and users. Any other field
// is refused, naming its path.
func translate23(old ign23.Config) (types.Config, error) {
	bad, err := untranslatable(old)
	if err != nil {
		return types.Config{}, err
	}
	if len(bad) > 0 {
		return types.Config{}, fmt.Errorf("cannot translate to Ignition spec 3.3 (Roost carries files, directories, links, units, drop-ins and users): %s", strings.Join(bad, ", "))
	}
	cfg := types.Config{Ignition: types.Ignition{Version: SpecVersion}}
	for i, f := range old.Storage.Files {
		n, err := node(fmt.Sprintf("storage.files.%d", i), f.Node)
		if err != nil {
			return types.Config{}, err
		}
		res := types.Resource{
			Source:       strPtr(f.Contents.Source),
			Compression:  strPtr(f.Contents.Compression),
			Verification: types.Verification{Hash: f.Contents.Verification.Hash},
		}
		nf := types.File{Node: n, FileEmbedded1: types.FileEmbedded1{Mode: f.Mode}}
		if f.Append {
			nf.Append = []types.Resource{res}
		} else {
			nf.Contents = res
		}
		cfg.Storage.Files = append(cfg.Storage.Files, nf)
	}
	for i, d := range old.Storage.Directories {
		n, err := node(fmt.Sprintf("storage.directories.%d", i), d.Node)
		if err != nil {
			return types.Config{}, err
		}
		cfg.Storage.Directories = append(cfg.Storage.Directories, types.Directory{Node: n, DirectoryEmbedded1: types.DirectoryEmbedded1{Mode: d.Mode}})
	}
	for i, l := range old.Storage.Links {
		n, err := node(fmt.Sprintf("storage.links.%d", i), l.Node)
		if err != nil {
			return types.Config{}, err
		}
		nl := types.Link{Node: n, LinkEmbedded1: types.LinkEmbedded1{Target: strPtr(l.Target)}}
		if l.Hard {
			nl.Hard = ptr(true)
		}
		cfg.Storage.Links = append(cfg.Storage.Links, nl)
	}
	for _, u := range old.Systemd.Units {
		nu := types.Unit{Name: u.Name, Contents: strPtr(u.Contents), Enabled: u.Enabled}
		if u.Enable {
			nu.Enabled = ptr(true)
		}
		if u.Mask {
			nu.Mask = ptr(true)
		}
		for _, d := range u.Dropins {
			nu.Dropins = append(nu.Dropins, types.Dropin{Name: d.Name, Contents: strPtr(d.Contents)})
		}
		cfg.Systemd.Units = append(cfg.Systemd.Units, nu)
	}
	for _, u := range old.Passwd.Users {
		nu := types.PasswdUser{
			Name:         u.Name,
			PasswordHash: u.PasswordHash,
			UID:          u.UID,
			Gecos:        strPtr(u.Gecos),
			HomeDir:      strPtr(u.HomeDir),
			PrimaryGroup: strPtr(u.PrimaryGroup),
			Shell:        strPtr(u.Shell),
			NoCreateHome: boolPtr(u.NoCreateHome),
			NoUserGroup:  boolPtr(u.NoUserGroup),
			NoLogInit:    boolPtr(u.NoLogInit),
			System:       boolPtr(u.System),
		}
		for _, k := range u.SSHAuthorizedKeys {
			nu.SSHAuthorizedKeys = append(nu.SSHAuthorizedKeys, types.SSHAuthorizedKey(k))
		}
		for _, g := range u.Groups {
			nu.Groups = append(nu.Groups, types.Group(g))
		}
		cfg.Passwd.Users = append(cfg.Passwd.Users, nu)
	}
	if err := Validate(cfg); err != nil {
		return types.Config{}, err
	}
	return cfg, nil
}

func node(path string, n ign23.Node) (types.Node, error) {
	if n.Filesystem != "" && n.Filesystem != "root" {
		return types.Node{}, fmt.Errorf("%s.filesystem: %q: only the root file system can be translated", path, n.Filesystem)
	}
	out := types.Node{Path: n.Path, Overwrite: n.Overwrite}
	if n.User != nil {
		out.User = types.NodeUser{ID: n.User.ID, Name: strPtr(n.User.Name)}
	}
	if n.Group != nil {
		out.Group = types.NodeGroup{ID: n.Group.ID, Name: strPtr(n.Group.Name)}
	}
	return out, nil
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func boolPtr(b bool) *bool {
	if !b {
		return nil
	}
	return &b
}
