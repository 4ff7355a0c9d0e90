package ignition

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	ign23 "github.com/flatcar/ignition/config/v2_3/types"
)

// TestTranslate23 converts every field translate23 carries from spec 2.3
// to spec 3.3 and compares with the spec 3.3 JSON written out by hand.
func TestTranslate23(t *testing.T) {
	mode, uid, gid := 0o640, 1000, 1001
	enabled := false
	overwrite := true
	sum := sha512.Sum512([]byte("a"))
	old := ign23.Config{Ignition: ign23.Ignition{Version: "2.3.0"}}
	old.Storage.Files = []ign23.File{
		{Node: ign23.Node{Filesystem: "root", Path: "/etc/a", Overwrite: &overwrite, User: &ign23.NodeUser{ID: &uid}, Group: &ign23.NodeGroup{Name: "adm"}},
			FileEmbedded1: ign23.FileEmbedded1{Mode: &mode, Contents: ign23.FileContents{Source: "data:,a", Compression: "gzip",
				Verification: ign23.Verification{Hash: strPtr("sha512-" + hex.EncodeToString(sum[:]))}}}},
		{Node: ign23.Node{Path: "/etc/b"}, FileEmbedded1: ign23.FileEmbedded1{Append: true, Contents: ign23.FileContents{Source: "data:,b"}}},
	}
	old.Storage.Directories = []ign23.Directory{{Node: ign23.Node{Filesystem: "root", Path: "/opt/d", Group: &ign23.NodeGroup{ID: &gid}}, DirectoryEmbedded1: ign23.DirectoryEmbedded1{Mode: &mode}}}
	old.Storage.Links = []ign23.Link{
		{Node: ign23.Node{Filesystem: "root", Path: "/etc/l"}, LinkEmbedded1: ign23.LinkEmbedded1{Target: "/etc/a", Hard: true}},
		{Node: ign23.Node{Path: "/etc/s", User: &ign23.NodeUser{Name: "core"}}, LinkEmbedded1: ign23.LinkEmbedded1{Target: "/etc/a"}},
	}
	old.Systemd.Units = []ign23.Unit{
		{Name: "a.service", Enable: true, Contents: "[Install]\nWantedBy=multi-user.target\n"},
		{Name: "b.service", Enabled: &enabled, Mask: true},
		{Name: "c.service", Dropins: []ign23.SystemdDropin{{Name: "10-x.conf", Contents: "[Unit]\n"}}},
	}
	old.Passwd.Users = []ign23.PasswdUser{{Name: "ops", PasswordHash: strPtr("$6$x"), SSHAuthorizedKeys: []ign23.SSHAuthorizedKey{"ssh-ed25519 A"},
		UID: &uid, Gecos: "Ops", HomeDir: "/home/ops", NoCreateHome: true, PrimaryGroup: "ops", Groups: []ign23.Group{"sudo", "adm"},
		NoUserGroup: true, NoLogInit: true, Shell: "/bin/bash", System: true}}

	cfg, probs := translate23(old)
	if probs != nil {
		t.Fatal(probs)
	}
	got, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ignition":{"config":{"replace":{"verification":{}}},"proxy":{},"security":{"tls":{}},"timeouts":{},"version":"3.3.0"},"kernelArguments":{},` +
		`"passwd":{"users":[{"gecos":"Ops","groups":["sudo","adm"],"homeDir":"/home/ops","name":"ops","noCreateHome":true,"noLogInit":true,"noUserGroup":true,` +
		`"passwordHash":"$6$x","primaryGroup":"ops","sshAuthorizedKeys":["ssh-ed25519 A"],"shell":"/bin/bash","system":true,"uid":1000}]},` +
		`"storage":{"directories":[{"group":{"id":1001},"path":"/opt/d","user":{},"mode":416}],` +
		`"files":[{"group":{"name":"adm"},"overwrite":true,"path":"/etc/a","user":{"id":1000},"contents":{"compression":"gzip","source":"data:,a","verification":{"hash":"sha512-` + hex.EncodeToString(sum[:]) + `"}},"mode":416},` +
		`{"group":{},"path":"/etc/b","user":{},"append":[{"source":"data:,b","verification":{}}],"contents":{"verification":{}}}],` +
		`"links":[{"group":{},"path":"/etc/l","user":{},"hard":true,"target":"/etc/a"},{"group":{},"path":"/etc/s","user":{"name":"core"},"target":"/etc/a"}]},` +
		`"systemd":{"units":[{"contents":"[Install]\nWantedBy=multi-user.target\n","enabled":true,"name":"a.service"},{"enabled":false,"mask":true,"name":"b.service"},` +
		`{"dropins":[{"contents":"[Unit]\n","name":"10-x.conf"}],"name":"c.service"}]}}`
	if string(got) != want {
		t.Errorf("translated:\n%s\nwant:\n%s", got, want)
	}
	if err := Validate(cfg); err != nil {
		t.Error(err)
	}
}

// TestTranslate23Refuses: what has no counterpart Roost renders is a
// problem at its spec 2.3 path, and nothing is translated.
func TestTranslate23Refuses(t *testing.T) {
	old := ign23.Config{Ignition: ign23.Ignition{Version: "2.3.0", Config: ign23.IgnitionConfig{Append: []ign23.ConfigReference{{Source: "http://x/y.ign"}}}}}
	old.Storage.Files = []ign23.File{{Node: ign23.Node{Filesystem: "oem", Path: "/grub.cfg"}}}
	old.Storage.Disks = []ign23.Disk{{Device: "/dev/sda", WipeTable: true}}
	old.Networkd.Units = []ign23.Networkdunit{{Name: "00-eth0.network", Contents: "[Match]\n"}}
	old.Passwd.Users = []ign23.PasswdUser{{Name: "ops", Create: &ign23.Usercreate{Shell: "/bin/sh"}}}
	old.Passwd.Groups = []ign23.PasswdGroup{{Name: "ops"}}
	cfg, probs := translate23(old)
	if cfg.Ignition.Version != "" {
		t.Errorf("translated %+v despite problems", cfg)
	}
	var got []string
	for _, p := range probs {
		got = append(got, p.at.String()+": "+p.Message)
	}
	want := []string{
		"ignition.config.append[0]: is not allowed in a snippet",
		"networkd.units[0]: is not allowed in a snippet",
		"passwd.groups[0]: is not allowed in a snippet",
		"passwd.users[0].create.shell: is not allowed in a snippet",
		"storage.disks[0]: is not allowed in a snippet",
		`storage.files[0].filesystem: file system "oem": only the root file system can be written`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
