package ignition

import (
	"encoding/json"
	"fmt"

	"github.com/coreos/ignition/v2/config/v3_3/types"
	ign23 "github.com/flatcar/ignition/config/v2_3/types"
)

// The Flatcar Container Linux Config transpiler (ct v0.9.4) emits
// Ignition spec 2.3; Debian's and Flatcar's Ignition 2.14 read spec 3.x,
// and no library reachable from here translates 2.x to 3.x (coreos'
// and Flatcar's ign-converter are not on the module proxy). translate23
// does it for what a snippet may hold (see allowed in allow.go) and
// nothing else.

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

// translate23 converts the Ignition 2.3 config that ct emits into spec 3.3,
// for files, directories, links, units, drop-ins and users (translatable).
// A field outside translatable, or a file system other than "root", is a
// problem at its 2.3 path (the Container Linux Config's, in camelCase);
// nothing is translated then.
func translate23(old ign23.Config) (types.Config, []Problem) {
	raw, err := json.Marshal(old)
	if err != nil {
		return types.Config{}, []Problem{{Message: err.Error()}}
	}
	var probs []Problem
	for _, p := range outside(raw, translatable) {
		probs = append(probs, Problem{at: p, Message: "is not allowed in a snippet",
			Hint: reasonFor(p, "a snippet holds files, directories, links, systemd units and users")})
	}
	cfg := types.Config{Ignition: types.Ignition{Version: SpecVersion}}
	for i, f := range old.Storage.Files {
		n, bad := node(fieldPath{"storage", "files", i}, f.Node)
		probs = append(probs, bad...)
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
		n, bad := node(fieldPath{"storage", "directories", i}, d.Node)
		probs = append(probs, bad...)
		cfg.Storage.Directories = append(cfg.Storage.Directories, types.Directory{Node: n, DirectoryEmbedded1: types.DirectoryEmbedded1{Mode: d.Mode}})
	}
	for i, l := range old.Storage.Links {
		n, bad := node(fieldPath{"storage", "links", i}, l.Node)
		probs = append(probs, bad...)
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
	if len(probs) > 0 {
		return types.Config{}, probs
	}
	return cfg, nil
}

// node translates a 2.3 file system node; only the root file system
// translates.
func node(at fieldPath, n ign23.Node) (types.Node, []Problem) {
	out := types.Node{Path: n.Path, Overwrite: n.Overwrite}
	if n.User != nil {
		out.User = types.NodeUser{ID: n.User.ID, Name: strPtr(n.User.Name)}
	}
	if n.Group != nil {
		out.Group = types.NodeGroup{ID: n.Group.ID, Name: strPtr(n.Group.Name)}
	}
	if n.Filesystem != "" && n.Filesystem != "root" {
		return out, []Problem{{at: at.with("filesystem"), Message: fmt.Sprintf("file system %q: only the root file system can be written", n.Filesystem),
			Hint: `write "filesystem: root" with an absolute path; the agent owns the disks`}}
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
