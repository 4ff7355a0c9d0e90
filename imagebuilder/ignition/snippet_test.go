package ignition

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_3/types"
	"github.com/vincent-petithory/dataurl"
)

// TestCheckSnippetRefusals pins the exact problems CheckSnippet reports
// for bad snippets of each format, against the Revision reservations.
func TestCheckSnippetRefusals(t *testing.T) {
	big := `{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/etc/big","contents":{"source":"data:,` + strings.Repeat("x", MaxSnippetBytes) + `"}}]}}`
	cases := []struct {
		name   string
		format SnippetFormat
		data   string
		want   []string
	}{
		// syntax, types, versions
		{"json syntax", FormatIgnition, "{\"ignition\": {\"version\": \"3.3.0\"},\n \"storage\": {}\n,}", []string{
			"line 3: JSON syntax error: invalid character '}' looking for beginning of object key string"}},
		{"json type", FormatIgnition, "{\"ignition\": {\"version\": \"3.3.0\"},\n \"storage\": {\"files\": [\n  {\"path\": \"/etc/a\",\n   \"mode\": \"0644\"}]}}", []string{
			"line 4: storage.files[0].mode: expected a number, got a string"}},
		{"yaml syntax", FormatIgnition, "ignition:\n  version: 3.3.0\nstorage: [\n", []string{
			"line 4: YAML syntax error: did not find expected node content"}},
		{"yaml type", FormatIgnition, "ignition:\n  version: 3.3.0\nsystemd:\n  units:\n    - name: a.service\n      enabled: [yes]\n", []string{
			"line 6: systemd.units[0].enabled: expected true or false, got an array"}},
		{"yaml list", FormatIgnition, "- a\n- b\n", []string{
			"line 1: must be a JSON object or YAML mapping (ignition, storage, systemd, passwd), got a list"}},
		{"butane", FormatIgnition, "variant: flatcar\nversion: 1.0.0\n", []string{
			"line 1: variant: this is a Butane config, not an Ignition config (transpile it with butane and give the Ignition JSON, or write a Container Linux Config in containerLinuxConfig)"}},
		{"no version", FormatIgnition, "storage:\n  files:\n    - path: /etc/a\n", []string{
			`ignition.version: is required (start with "ignition": {"version": "3.3.0"}; a Container Linux Config goes into containerLinuxConfig)`}},
		{"version 2", FormatIgnition, `{"ignition": {"version": "2.3.0"}}`, []string{
			`line 1: ignition.version: unknown Ignition config version "2.3.0": Roost reads 3.0.0, 3.1.0, 3.2.0, 3.3.0 (spec 2.x is what a Container Linux Config transpiles to: give the Container Linux Config in containerLinuxConfig, or write the snippet for spec 3.3.0)`}},
		{"version 3.4", FormatIgnition, "ignition:\n  version: 3.4.0\n", []string{
			`line 2: ignition.version: unknown Ignition config version "3.4.0": Roost reads 3.0.0, 3.1.0, 3.2.0, 3.3.0 (write the snippet for spec 3.3.0, the newest Debian's and Flatcar's Ignition 2.14 read)`}},
		{"ignition validation", FormatIgnition, "ignition: {version: 3.3.0}\nstorage:\n  files:\n    - path: etc/a\nsystemd:\n  units:\n    - name: noextension\n", []string{
			"line 4: storage.files[0].path: path not absolute",
			"line 7: systemd.units[0].name: invalid systemd unit extension"}},
		{"unknown field", FormatIgnition, "ignition: {version: 3.3.0}\nsystemd:\n  units:\n    - name: a.service\n      enable: true\n", []string{
			`line 5: systemd.units[0].enable: unknown field "enable" (spec 3 spells it "enabled")`}},
		{"empty", FormatIgnition, " \n", []string{"is empty (remove the field, or give a config)"}},
		{"too big", FormatIgnition, big, []string{
			"is 131177 bytes, more than the limit of 131072 (keep large files out of the snippet: ship them as an Extension, or fetch them from a unit at boot)"}},

		// the allow-list
		{"disks and more", FormatIgnition, `{"ignition": {"version": "3.3.0", "config": {"merge": [{"source": "https://example.com/base.ign"}]}},
 "kernelArguments": {"shouldExist": ["quiet"]},
 "storage": {"disks": [{"device": "/dev/sdb", "wipeTable": true}],
  "files": [{"path": "/etc/a", "contents": {"source": "https://example.com/a", "httpHeaders": [{"name": "X", "value": "y"}]}}]},
 "passwd": {"groups": [{"name": "ops"}], "users": [{"name": "old", "shouldExist": false}]}}`, []string{
			"line 1: ignition.config.merge[0]: is not allowed in a snippet (a Revision carries its whole config: paste the other config's entries into this snippet instead of referencing it)",
			"line 2: kernelArguments.shouldExist[0]: is not allowed in a snippet (set the MachineClass's spec.kernelArgs instead)",
			"line 5: passwd.groups[0]: is not allowed in a snippet (groups cannot be created by a snippet: use a group the OS image has)",
			"line 3: storage.disks[0]: is not allowed in a snippet (the agent owns the disks: partitions cannot be set in a snippet)",
			"line 4: storage.files[0].contents.httpHeaders[0]: is not allowed in a snippet (headers are for remote sources; give the content inline (a data: URL, or contents.inline in a Container Linux Config))",
			`line 4: storage.files[0].contents.source: https source "https://example.com/a": a snippet's content must be inline (give it as a data: URL ("data:,text%0A" or "data:;base64,…"), or as contents.inline in a Container Linux Config: a Revision carries all of its content and is applied before the network is up)`,
			"line 5: passwd.users[0].shouldExist: is not allowed in a snippet (leave it out: a snippet adds or changes users and cannot delete them)"}},

		// what the hub writes, and what does not survive the boot
		{"hub paths", FormatIgnition, `{"ignition": {"version": "3.3.0"},
 "storage": {
  "files": [
   {"path": "/etc/roost/agent.yaml"},
   {"path": "/etc/kubernetes/pki/ca.crt"},
   {"path": "/etc/hostname"},
   {"path": "/etc/containerd/config.toml"},
   {"path": "/etc/systemd/network/10-roost-eno1.network"},
   {"path": "/usr/local/bin/tool"},
   {"path": "/etc/systemd/system/kubelet.service"},
   {"path": "/etc/sysctl.d/90-x"}],
  "directories": [{"path": "/var/lib/kubelet/pods"}]}}`, []string{
			`line 4: storage.files[0].path: "/etc/roost/agent.yaml": the hub writes the agent's configuration, the Machine's facts and its network profile under /etc/roost (remove the entry)`,
			`line 5: storage.files[1].path: "/etc/kubernetes/pki/ca.crt": the hub writes the kubelet's configuration and the cluster's CA, and the agent the bootstrap kubeconfig, under /etc/kubernetes (remove the entry; the kubelet takes its settings from the Cluster and the Pool)`,
			`line 6: storage.files[2].path: "/etc/hostname": the hub sets the host name (the Machine's spec.hostname, else its name) (remove the entry; set the Machine's spec.hostname)`,
			`line 7: storage.files[3].path: "/etc/containerd/config.toml": the hub renders containerd's configuration (remove the entry)`,
			`line 8: storage.files[4].path: "/etc/systemd/network/10-roost-eno1.network": the hub writes the 10-roost-* networkd files that keep systemd-networkd off the NetworkProfile's links (remove the entry; describe host networking in the Pool's NetworkProfile)`,
			`line 9: storage.files[5].path: "/usr/local/bin/tool": /usr is read-only on Flatcar, and system extensions are merged over it at boot (ship files under /usr as an Extension (spec.extensions), or write them under /opt or /etc)`,
			`line 10: storage.files[6].path: "/etc/systemd/system/kubelet.service" is the unit file of kubelet.service: the hub renders it in every Revision (remove the entry; to change the unit, give it a drop-in (systemd.units[].dropins))`,
			`line 12: storage.directories[0].path: "/var/lib/kubelet/pods": /var/lib/kubelet is bind-mounted from the STATE partition at boot and would hide it (remove the entry, or write it elsewhere (under /etc, /opt or /var))`,
			`line 11: storage.files[7].path: "/etc/sysctl.d/90-x": systemd reads files named NAME.conf there, NAME of letters, digits and . _ @ + - (rename it, e.g. /etc/sysctl.d/90-local.conf)`}},
		{"through a link", FormatIgnition, "ignition: {version: 3.3.0}\nstorage:\n  links:\n    - path: /etc/app\n      target: /etc/roost\n  files:\n    - path: /etc/app/agent.yaml\n    - path: /etc/./x\n", []string{
			"line 7: storage.files[0]: file path includes link in config",
			"line 8: storage.files[1].path: path is not fully simplified"}},
		{"hub units", FormatIgnition, "ignition: {version: 3.3.0}\nsystemd:\n  units:\n    - name: kubelet.service\n      enabled: false\n    - name: roost-agent.service\n      dropins:\n        - name: 10-state.conf\n          contents: \"[Unit]\\n\"\n    - name: roost-mine.service\n      mask: true\n", []string{
			"line 4: systemd.units[0]: unit kubelet.service: the hub renders it in every Revision: a snippet may not set its enabled (remove them; to change the unit, give it only drop-ins)",
			"line 8: systemd.units[1].dropins[0].name: drop-in 10-state.conf of unit roost-agent.service: the hub writes this drop-in (give your drop-in another name)",
			"line 10: systemd.units[2]: unit roost-mine.service: unit names starting with roost- are Roost's: a snippet may not set its mask (remove them; to change the unit, give it only drop-ins)"}},

		// Container Linux Configs
		{"clc syntax", FormatCLC, "storage:\n  files:\n    - path: /etc/a\n     filesystem: root\n", []string{
			"line 3: YAML syntax error: did not find expected '-' indicator"}},
		{"clc type", FormatCLC, "storage:\n  files:\n    - path: /etc/a\n      filesystem: root\n      mode: rw\n", []string{
			`line 5: expected a number, got "rw"`}},
		{"clc unknown", FormatCLC, "systemd:\n  units:\n    - name: a.service\n      enabled: true\n      command: start\n", []string{
			`line 5: unknown field "command" (check the spelling: docs/customising.md lists the fields a snippet may set)`}},
		{"clc given json", FormatCLC, `{"ignition": {"version": "3.3.0"}}`, []string{
			`line 1: unknown field "version" (this looks like an Ignition config: give it in spec.ignition)`}},
		{"clc validation", FormatCLC, "storage:\n  files:\n    - path: relative\n      filesystem: root\n", []string{
			"line 3: path not absolute"}},
		{"clc sections", FormatCLC, "networkd:\n  units:\n    - name: 00-eth0.network\n      contents: \"[Match]\\nName=eth0\\n\"\nupdate:\n  group: stable\nstorage:\n  disks:\n    - device: /dev/sdb\n      wipe_table: true\n", []string{
			"line 5: update: is not allowed in a snippet (it configures Flatcar's update-engine (updates, which the hub rolls out as Revisions), which only Flatcar runs; write the unit or drop-in you need under systemd.units)"}},
		{"clc untranslatable", FormatCLC, "networkd:\n  units:\n    - name: 00-eth0.network\n      contents: \"[Match]\\nName=eth0\\n\"\nstorage:\n  disks:\n    - device: /dev/sdb\n      wipe_table: true\n  files:\n    - path: /data/x\n      filesystem: data\n      contents: {inline: x}\n  filesystems:\n    - name: data\n      mount: {device: /dev/sdb1, format: ext4}\n", []string{
			"line 3: networkd.units[0]: is not allowed in a snippet (host networking is the NetworkProfile's: describe links, bonds, VLANs and addresses there)",
			"line 7: storage.disks[0]: is not allowed in a snippet (the agent owns the disks: partitions cannot be set in a snippet)",
			"line 14: storage.filesystems[0]: is not allowed in a snippet (the agent owns the disks and the OS runs from RAM: write files on the root file system (in a Container Linux Config, filesystem: root))",
			`line 11: storage.files[0].filesystem: file system "data": only the root file system can be written (write "filesystem: root" with an absolute path; the agent owns the disks)`}},
		{"clc remote and hub path", FormatCLC, "storage:\n  files:\n    - path: /etc/hostname\n      filesystem: root\n      contents:\n        inline: x\n    - path: /opt/tool\n      filesystem: root\n      contents:\n        remote:\n          url: http://example.com/tool\n", []string{
			`line 9: storage.files[1].contents.source: http source "http://example.com/tool": a snippet's content must be inline (give it as a data: URL ("data:,text%0A" or "data:;base64,…"), or as contents.inline in a Container Linux Config: a Revision carries all of its content and is applied before the network is up)`,
			`line 3: storage.files[0].path: "/etc/hostname": the hub sets the host name (the Machine's spec.hostname, else its name) (remove the entry; set the Machine's spec.hostname)`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := CheckSnippet(Snippet{Name: "s", Format: c.format, Data: []byte(c.data)}, RevisionReserved())
			var se *SnippetError
			if !errors.As(err, &se) {
				t.Fatalf("error %v, want a *SnippetError", err)
			}
			var got []string
			for _, p := range se.Problems {
				got = append(got, p.String())
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// The same customisation in each format a snippet may take: a sysctl
// file, a script, a directory, a link, an enabled unit, a drop-in on a
// hub unit (allowed: it has a name of its own) and a user.
const (
	customJSON = `{
  "ignition": {"version": "3.2.0"},
  "storage": {
    "files": [
      {"path": "/etc/sysctl.d/90-tuning.conf", "mode": 420, "contents": {"source": "data:,vm.swappiness%20%3D%2010%0A"}},
      {"path": "/opt/bin/hello", "mode": 493, "overwrite": true, "contents": {"source": "data:;base64,IyEvYmluL3NoCmVjaG8gaGVsbG8K"}}
    ],
    "directories": [{"path": "/opt/bin", "mode": 493}],
    "links": [{"path": "/etc/localtime", "target": "/usr/share/zoneinfo/UTC"}]
  },
  "systemd": {
    "units": [
      {"name": "hello.service", "enabled": true, "contents": "[Service]\nType=oneshot\nExecStart=/opt/bin/hello\n\n[Install]\nWantedBy=multi-user.target\n"},
      {"name": "kubelet.service", "dropins": [{"name": "50-proxy.conf", "contents": "[Service]\nEnvironment=HTTPS_PROXY=http://proxy:3128\n"}]}
    ]
  },
  "passwd": {"users": [{"name": "ops", "groups": ["sudo"], "sshAuthorizedKeys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOps ops@example"]}]}
}`
	customYAML = `ignition:
  version: 3.3.0
storage:
  files:
    - path: /etc/sysctl.d/90-tuning.conf
      mode: 0644
      contents:
        source: "data:,vm.swappiness%20%3D%2010%0A"
    - path: /opt/bin/hello
      mode: 0755
      overwrite: true
      contents:
        source: data:;base64,IyEvYmluL3NoCmVjaG8gaGVsbG8K
  directories:
    - {path: /opt/bin, mode: 0755}
  links:
    - {path: /etc/localtime, target: /usr/share/zoneinfo/UTC}
systemd:
  units:
    - name: hello.service
      enabled: true
      contents: |
        [Service]
        Type=oneshot
        ExecStart=/opt/bin/hello

        [Install]
        WantedBy=multi-user.target
    - name: kubelet.service
      dropins:
        - name: 50-proxy.conf
          contents: |
            [Service]
            Environment=HTTPS_PROXY=http://proxy:3128
passwd:
  users:
    - name: ops
      groups: [sudo]
      sshAuthorizedKeys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOps ops@example"]
`
	customCLC = `storage:
  files:
    - path: /etc/sysctl.d/90-tuning.conf
      filesystem: root
      mode: 0644
      contents:
        inline: |
          vm.swappiness = 10
    - path: /opt/bin/hello
      filesystem: root
      mode: 0755
      overwrite: true
      contents:
        inline: |
          #!/bin/sh
          echo hello
  directories:
    - {path: /opt/bin, filesystem: root, mode: 0755}
  links:
    - {path: /etc/localtime, filesystem: root, target: /usr/share/zoneinfo/UTC}
systemd:
  units:
    - name: hello.service
      enabled: true
      contents: |
        [Service]
        Type=oneshot
        ExecStart=/opt/bin/hello

        [Install]
        WantedBy=multi-user.target
    - name: kubelet.service
      dropins:
        - name: 50-proxy.conf
          contents: |
            [Service]
            Environment=HTTPS_PROXY=http://proxy:3128
passwd:
  users:
    - name: ops
      groups: [sudo]
      ssh_authorized_keys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOps ops@example"]
`
)

// TestSnippetFormatsAgree: Ignition JSON (spec 3.2, translated by the
// library), Ignition YAML (octal modes as YAML writes them) and a
// Container Linux Config (translated by translate23) of the same
// customisation give the same spec 3.3 config, accepted against the
// Revision reservations; file contents compare decoded.
func TestSnippetFormatsAgree(t *testing.T) {
	var want string
	for _, s := range []Snippet{
		{Name: "custom.json", Format: FormatIgnition, Data: []byte(customJSON)},
		{Name: "custom.json (auto)", Data: []byte(customJSON)},
		{Name: "custom.yaml", Format: FormatIgnition, Data: []byte(customYAML)},
		{Name: "custom.clc", Format: FormatCLC, Data: []byte(customCLC)},
		{Name: "custom.clc (auto)", Data: []byte(customCLC)},
	} {
		p, err := CheckSnippet(s, RevisionReserved())
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		got := normalized(t, p.Config)
		if want == "" {
			want = got
			for _, w := range []string{`"version": "3.3.0"`, `"mode": 420`, `"mode": 493`, `"source": "vm.swappiness = 10\n"`, `"enabled": true`, `"name": "50-proxy.conf"`, `"name": "ops"`} {
				if !strings.Contains(got, w) {
					t.Errorf("%s: config lacks %q:\n%s", s.Name, w, got)
				}
			}
			continue
		}
		if got != want {
			t.Errorf("%s differs from %s:\n%s\nwant:\n%s", s.Name, "custom.json", got, want)
		}
	}
}

// normalized is cfg sorted, with each file's data URL replaced by the
// text it holds, as indented JSON.
func normalized(t *testing.T, cfg types.Config) string {
	t.Helper()
	Sort(&cfg)
	for i, f := range cfg.Storage.Files {
		if src := f.Contents.Source; src != nil {
			d, err := dataurl.DecodeString(*src)
			if err != nil {
				t.Fatalf("%s: %v", f.Path, err)
			}
			text := string(d.Data)
			cfg.Storage.Files[i].Contents.Source = &text
		}
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMergeSnippets: snippets merge in order; an entry given by two is a
// problem of the later one, at its line.
func TestMergeSnippets(t *testing.T) {
	parse := func(name string, f SnippetFormat, data string) *Parsed {
		p, err := CheckSnippet(Snippet{Name: name, Format: f, Data: []byte(data)}, RevisionReserved())
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	clc := parse("spec.containerLinuxConfig", FormatCLC, "storage:\n  files:\n    - path: /etc/motd\n      filesystem: root\n      contents: {inline: hi}\nsystemd:\n  units:\n    - name: a.service\n      mask: true\n")
	ign := parse("spec.ignition", FormatIgnition, "ignition: {version: 3.3.0}\nstorage:\n  files:\n    - path: /etc/issue\n    - path: /etc/motd\nsystemd:\n  units:\n    - name: a.service\n      dropins: [{name: x.conf, contents: \"\"}]\n    - name: b.service\n      enabled: true\n")
	_, err := MergeSnippets([]*Parsed{clc, ign})
	var errs SnippetErrors
	if !errors.As(err, &errs) || len(errs) != 1 {
		t.Fatalf("error %v, want SnippetErrors of one snippet", err)
	}
	if got, want := errs.Error(), `user config spec.ignition: line 5: storage.files[1]: "/etc/motd" is also in spec.containerLinuxConfig (storage.files[0]) (give each file, directory, link, unit and user in one of them only); `+
		`line 8: systemd.units[0]: unit a.service is also in spec.containerLinuxConfig (systemd.units[0]) (give each file, directory, link, unit and user in one of them only)`; got != want {
		t.Errorf("error:\n%s\nwant:\n%s", got, want)
	}

	ign = parse("spec.ignition", FormatIgnition, "ignition: {version: 3.3.0}\nstorage:\n  files:\n    - path: /etc/issue\nsystemd:\n  units:\n    - name: b.service\n      enabled: true\n")
	cfg, err := MergeSnippets([]*Parsed{clc, ign})
	if err != nil {
		t.Fatal(err)
	}
	Sort(&cfg)
	var paths, units []string
	for _, f := range cfg.Storage.Files {
		paths = append(paths, f.Path)
	}
	for _, u := range cfg.Systemd.Units {
		units = append(units, u.Name)
	}
	if strings.Join(paths, " ") != "/etc/issue /etc/motd" || strings.Join(units, " ") != "a.service b.service" || cfg.Ignition.Version != SpecVersion {
		t.Errorf("merged %v %v %s", paths, units, cfg.Ignition.Version)
	}
}

// TestAllowedDocumented: docs/customising.md lists every field of the
// allow-list (as storage.files[].path), and names no other.
func TestAllowedDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/customising.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("`((?:ignition|storage|systemd|passwd)\\.[A-Za-z.\\[\\]]+)`").FindAllStringSubmatch(string(doc), -1) {
		listed[m[1]] = true
	}
	for _, a := range Allowed {
		d := strings.ReplaceAll(a, ".*", "[]")
		if !listed[d] {
			t.Errorf("docs/customising.md does not list %s", d)
		}
		delete(listed, d)
	}
	for d := range listed {
		if strings.Contains(d, "[]") {
			t.Errorf("docs/customising.md lists %s, which is not in Allowed", d)
		}
	}
}
