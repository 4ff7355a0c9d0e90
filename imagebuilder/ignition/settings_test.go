package ignition

import (
	"strings"
	"testing"
)

// TestSettingsUnit: a snippet's sysctl, modules-load.d and tmpfiles.d
// files get SettingsUnit, enabled, running what each needs: modules
// first, then every sysctl file, then only the snippet's tmpfiles.
func TestSettingsUnit(t *testing.T) {
	render := func(snippet string) (string, bool) {
		t.Helper()
		cfg, err := Render(Params{AgentConfig: []byte(agentYAML), Snippets: []Snippet{{Name: "s", Format: FormatIgnition, Data: []byte(snippet)}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range cfg.Systemd.Units {
			if u.Name == SettingsUnit {
				if u.Enabled == nil || !*u.Enabled {
					t.Errorf("%s not enabled", SettingsUnit)
				}
				return *u.Contents, true
			}
		}
		return "", false
	}
	all := `ignition: {version: 3.3.0}
storage:
  files:
    - {path: /etc/tmpfiles.d/b.conf, contents: {source: "data:,d%20/run/b%200755%20root%20root%20-%0A"}}
    - {path: /etc/sysctl.d/90-tuning.conf, contents: {source: "data:,net.bridge.bridge-nf-call-iptables%3D1%0A"}}
    - {path: /etc/tmpfiles.d/a.conf, contents: {source: "data:,d%20/run/a%0A"}}
  links:
    - {path: /etc/modules-load.d/br_netfilter.conf, target: /opt/conf/modules}
`
	got, ok := render(all)
	if !ok {
		t.Fatalf("no %s", SettingsUnit)
	}
	want := `# Roost: apply the kernel modules, sysctl settings and tmpfiles.d entries of the
# user config on this boot: the OS may have read those directories before
# Ignition wrote them.
[Unit]
Description=Apply the user config's modules, sysctl settings and tmpfiles
DefaultDependencies=no
After=systemd-modules-load.service systemd-sysctl.service systemd-tmpfiles-setup.service
Before=sysinit.target shutdown.target
Conflicts=shutdown.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/lib/systemd/systemd-modules-load
ExecStart=/usr/lib/systemd/systemd-sysctl
ExecStart=/usr/bin/systemd-tmpfiles --create /etc/tmpfiles.d/a.conf /etc/tmpfiles.d/b.conf

[Install]
WantedBy=sysinit.target
`
	if got != want {
		t.Errorf("unit:\n%s\nwant:\n%s", got, want)
	}

	got, _ = render("ignition: {version: 3.3.0}\nstorage:\n  files:\n    - {path: /etc/sysctl.d/90-a.conf, contents: {source: \"data:,vm.swappiness%3D1\"}}\n")
	if !strings.Contains(got, "ExecStart="+sysctlBinary+"\n") || strings.Contains(got, modulesLoadBinary) || strings.Contains(got, tmpfilesBinary) {
		t.Errorf("sysctl only:\n%s", got)
	}
	if _, ok := render("ignition: {version: 3.3.0}\nstorage:\n  files:\n    - {path: /etc/sysctl.conf.d/x.conf}\n    - {path: /etc/motd}\n"); ok {
		t.Errorf("%s rendered without a settings file", SettingsUnit)
	}

	_, err := Render(Params{AgentConfig: []byte(agentYAML), Snippets: []Snippet{{Name: "s", Format: FormatIgnition,
		Data: []byte("ignition: {version: 3.3.0}\nsystemd:\n  units:\n    - {name: " + SettingsUnit + ", contents: x}\n")}}})
	if err == nil || !strings.Contains(err.Error(), "unit "+SettingsUnit+": Roost writes it itself") {
		t.Errorf("a snippet's own %s: %v", SettingsUnit, err)
	}
}
