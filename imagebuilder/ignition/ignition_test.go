package ignition

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

func TestBadSnippets(t *testing.T) {
	cases := []struct {
		name, data string
		want       []string
	}{
		{"bad.ign", `{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"relative/x"}]}}`, []string{"bad.ign", "storage.files.0.path"}},
		{"unknown-version.ign", `{"ignition":{"version":"9.9.0"}}`, []string{"unknown-version.ign", "version"}},
		{"syntax.ign", `{"ignition":`, []string{"syntax.ign"}},
		{"disk.yaml", "storage:\n  disks:\n    - device: /dev/sda\n      wipe_table: true\n", []string{"disk.yaml", "storage.disks.0.device", "storage.disks.0.wipeTable"}},
		{"networkd.yaml", "networkd:\n  units:\n    - name: 00-eth.network\n      contents: \"[Match]\\nName=eth0\\n\"\n", []string{"networkd.yaml", "networkd.units.0.contents", "networkd.units.0.name"}},
		{"groups.yaml", "passwd:\n  groups:\n    - name: ops\n", []string{"groups.yaml", "passwd.groups.0.name"}},
		{"fs.yaml", "storage:\n  filesystems:\n    - name: data\n      mount:\n        device: /dev/sdb\n        format: ext4\n  files:\n    - path: /x\n      filesystem: data\n      contents:\n        inline: x\n", []string{"fs.yaml", "storage.filesystems.0"}},
		{"clc-syntax.yaml", "storage: [\n", []string{"clc-syntax.yaml"}},
		{"owned.ign", `{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/etc/roost/agent.yaml","contents":{"source":"data:,x"}}]}}`, []string{"owned.ign", "storage.files.0", "/etc/roost/agent.yaml"}},
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

func TestEmptyAgentConfig(t *testing.T) {
	if _, err := Render(Params{}); err == nil {
		t.Fatal("no error")
	}
}
