package ignition

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_3/types"
)

var update = flag.Bool("update", false, "rewrite golden files")

const agentYAML = `apiVersion: roost.io/v1
kind: AgentConfig
hubs:
- 10.0.2.2:7443
caBundle: |
  -----BEGIN CERTIFICATE-----
  MIIB
  -----END CERTIFICATE-----
token: abcdef.0123456789abcdef
stateDir: /var/lib/roost
`

const networkYAML = `apiVersion: roost.io/v1
kind: NetworkProfile
metadata:
  name: enroll
spec:
  bonds:
  - name: bond0
    mode: 802.3ad
`

const userJSON = `{
  "ignition": {"version": "3.2.0"},
  "storage": {"files": [{"path": "/etc/motd", "contents": {"source": "data:,hello%0A"}, "mode": 420}]},
  "systemd": {"units": [{"name": "roost-agent.service", "dropins": [{"name": "10-env.conf", "contents": "[Service]\nEnvironment=A=1\n"}]}]}
}`

const userCLC = `storage:
  files:
    - path: /etc/hostname
      filesystem: root
      mode: 0644
      contents:
        inline: testbed
  directories:
    - path: /var/lib/extra
      filesystem: root
      mode: 0755
  links:
    - path: /etc/localtime
      filesystem: root
      target: /usr/share/zoneinfo/UTC
systemd:
  units:
    - name: hello.service
      enabled: true
      contents: |
        [Service]
        ExecStart=/bin/true
        [Install]
        WantedBy=multi-user.target
    - name: systemd-networkd.service
      dropins:
        - name: 10-debug.conf
          contents: |
            [Service]
            Environment=SYSTEMD_LOG_LEVEL=debug
passwd:
  users:
    - name: ops
      groups: [wheel]
      ssh_authorized_keys:
        - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOps ops@example
`

func params() Params {
	return Params{
		AgentConfig:    []byte(agentYAML),
		SSHKeys:        []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA admin@example\n# comment\n"},
		NetworkProfile: []byte(networkYAML),
		Snippets: []Snippet{
			{Name: "user.ign", Data: []byte(userJSON)},
			{Name: "user.clc.yaml", Data: []byte(userCLC)},
		},
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from golden (go test -update to accept):\n%s", name, got)
	}
}

func TestRenderGolden(t *testing.T) {
	got, err := RenderJSON(params())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "full.ign.json", got)
	again, err := RenderJSON(params())
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(got) {
		t.Error("rendering is not deterministic")
	}
}

func TestRenderMinimalGolden(t *testing.T) {
	got, err := RenderJSON(Params{AgentConfig: []byte(agentYAML)})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "minimal.ign.json", got)
	for _, want := range []string{`"version": "3.3.0"`, `"path": "/etc/roost/agent.yaml"`, `"mode": 384`, `"enabled": true`, `ExecStart=/usr/bin/roost-agent --config /etc/roost/agent.yaml`, `Restart=always`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("rendered config lacks %q", want)
		}
	}
}

// TestBadSnippets: Render refuses a bad --user-config with the snippet's
// name, the field path and the line.
func TestBadSnippets(t *testing.T) {
	cases := []struct {
		name, data string
		want       []string
	}{
		{"bad.ign", `{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"relative/x"}]}}`, []string{"user config bad.ign: line 1: storage.files[0].path: path not absolute"}},
		{"unknown-version.ign", `{"ignition":{"version":"9.9.0"}}`, []string{"unknown-version.ign", `ignition.version: unknown Ignition config version "9.9.0"`}},
		{"syntax.ign", `{"ignition":`, []string{"syntax.ign: line 1: JSON syntax error"}},
		{"disk.yaml", "storage:\n  disks:\n    - device: /dev/sda\n      wipe_table: true\n", []string{"disk.yaml: line 3: storage.disks[0]: is not allowed in a snippet"}},
		{"networkd.yaml", "networkd:\n  units:\n    - name: 00-eth.network\n      contents: \"[Match]\\nName=eth0\\n\"\n", []string{"networkd.yaml: line 3: networkd.units[0]: is not allowed", "NetworkProfile"}},
		{"groups.yaml", "passwd:\n  groups:\n    - name: ops\n", []string{"groups.yaml: line 3: passwd.groups[0]: is not allowed"}},
		{"fs.yaml", "storage:\n  filesystems:\n    - name: data\n      mount:\n        device: /dev/sdb\n        format: ext4\n  files:\n    - path: /x\n      filesystem: data\n      contents:\n        inline: x\n", []string{"fs.yaml", "line 3: storage.filesystems[0]", `line 9: storage.files[0].filesystem: file system "data"`}},
		{"clc-syntax.yaml", "storage: [\n", []string{"clc-syntax.yaml: line 2: YAML syntax error"}},
		{"owned.ign", `{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/etc/roost/agent.yaml","contents":{"source":"data:,x"}}]}}`, []string{"owned.ign", `storage.files[0].path: "/etc/roost/agent.yaml": Roost writes it itself`}},
		{"owned-unit.ign", `{"ignition":{"version":"3.3.0"},"systemd":{"units":[{"name":"roost-agent.service","contents":"[Service]\n"}]}}`, []string{"owned-unit.ign", "systemd.units[0]: unit roost-agent.service: Roost writes it itself: a snippet may not set its contents"}},
		{"remote.ign", `{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"https://example.com/x"}}]}}`, []string{"remote.ign", "storage.files[0].contents.source: https source"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Params{AgentConfig: []byte(agentYAML), Snippets: []Snippet{{Name: c.name, Data: []byte(c.data)}}}
			_, err := Render(p)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestUserConfigAsBefore: the enrollment --user-config keeps what it could
// do before MachineClass snippets shared its code: Ignition JSON or a
// Container Linux Config told apart by the first character, a drop-in for
// the agent's unit, files the hub reserves in Revisions but an enrollment
// image does not write (/etc/hostname, /usr), and Roost's own entries
// applied last. TestRenderGolden pins the bytes.
func TestUserConfigAsBefore(t *testing.T) {
	p := Params{AgentConfig: []byte(agentYAML), Snippets: []Snippet{
		{Name: "user.ign", Data: []byte(userJSON)},
		{Name: "user.clc.yaml", Data: []byte(userCLC)},
		{Name: "usr.ign", Data: []byte(`{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/usr/local/bin/tool","mode":493,"contents":{"source":"data:,x"}}]}}`)},
	}}
	cfg, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	for _, f := range cfg.Storage.Files {
		files[f.Path] = true
	}
	for _, want := range []string{"/etc/hostname", "/etc/motd", "/usr/local/bin/tool", AgentConfigPath} {
		if !files[want] {
			t.Errorf("rendered config lacks %s", want)
		}
	}
	for _, u := range cfg.Systemd.Units {
		switch u.Name {
		case AgentUnitName:
			if len(u.Dropins) != 1 || u.Dropins[0].Name != "10-env.conf" || u.Contents == nil || *u.Contents != AgentUnit {
				t.Errorf("agent unit %+v", u)
			}
		case SettingsUnit:
			t.Errorf("%s rendered without a sysctl, modules or tmpfiles file", SettingsUnit)
		}
	}
	// The same snippet in a Revision may not write /etc/hostname.
	p.Reserved = RevisionReserved()
	if _, err := Render(p); err == nil || !strings.Contains(err.Error(), `user config user.clc.yaml: line 3: storage.files[0].path: "/etc/hostname": the hub sets the host name`) {
		t.Errorf("with RevisionReserved: %v", err)
	}
}

func TestEmptyAgentConfig(t *testing.T) {
	if _, err := Render(Params{}); err == nil {
		t.Fatal("no error")
	}
}

// An invalid config is refused with Ignition's report and the field path.
func TestMarshalRefusesAnInvalidConfig(t *testing.T) {
	cfg := types.Config{Ignition: types.Ignition{Version: "3.3.0"}}
	cfg.Systemd.Units = []types.Unit{{Name: "roost.notaunit"}}
	_, err := Marshal(cfg)
	if err == nil || !strings.Contains(err.Error(), "ignition: invalid config") || !strings.Contains(err.Error(), "systemd.units.0.name") {
		t.Fatalf("Marshal of a unit named roost.notaunit: %v; want an invalid config error at systemd.units.0.name", err)
	}
}
