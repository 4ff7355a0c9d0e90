package revisions

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_3"
	"github.com/coreos/ignition/v2/config/v3_3/types"
	"github.com/vincent-petithory/dataurl"

	"github.com/roostfleet/roost/imagebuilder/ignition"
	"github.com/roostfleet/roost/internal/golden"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// classSnippet is a MachineClass's spec.ignition with a file, an enabled
// unit, a drop-in for the hub's kubelet.service and a sysctl file.
const classSnippet = `ignition:
  version: 3.3.0
storage:
  files:
    - path: /etc/sysctl.d/90-tuning.conf
      mode: 0644
      contents:
        source: "data:,vm.swappiness%20%3D%2010%0A"
    - path: /opt/bin/report
      mode: 0755
      contents:
        source: "data:,%23!%2Fbin%2Fsh%0Aecho%20ok%0A"
systemd:
  units:
    - name: report.service
      enabled: true
      contents: |
        [Unit]
        Description=Report
        [Service]
        Type=oneshot
        ExecStart=/opt/bin/report
        [Install]
        WantedBy=multi-user.target
    - name: kubelet.service
      dropins:
        - name: 50-proxy.conf
          contents: |
            [Service]
            Environment=HTTPS_PROXY=http://proxy.example:3128
`

// classCLC is a Container Linux Config for the same class: a user.
const classCLC = `passwd:
  users:
    - name: ops
      groups: [sudo]
      ssh_authorized_keys:
        - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOps ops@example
`

// snippetInputs is fullInputs (a worker) whose MachineClass has both
// snippets.
func snippetInputs() Inputs {
	in := fullInputs()
	in.MachineClass.Spec.Ignition, in.MachineClass.Spec.ContainerLinuxConfig = classSnippet, classCLC
	return in
}

// TestClassSnippetGolden renders a worker's Revision with and without its
// class's snippets and compares what they add with
// testdata/class-snippet.golden (go test -update rewrites it): each
// file with its mode, each unit with whether it is enabled, drop-ins,
// users, and SettingsUnit for the sysctl file. Nothing the hub renders
// changes.
func TestClassSnippetGolden(t *testing.T) {
	base := parseAnyIgnition(t, mustRender(t, fullInputs(), 3).GetIgnition())
	got := parseAnyIgnition(t, mustRender(t, snippetInputs(), 3).GetIgnition())
	var b strings.Builder
	for _, f := range got.cfg.Storage.Files {
		if _, hub := base.files[f.Path]; hub {
			if base.files[f.Path] != got.files[f.Path] || base.modes[f.Path] != got.modes[f.Path] {
				t.Errorf("the snippet changed the hub's %s", f.Path)
			}
			continue
		}
		fmt.Fprintf(&b, "# file %s mode %04o\n%s", f.Path, got.modes[f.Path], got.files[f.Path])
	}
	for _, u := range got.cfg.Systemd.Units {
		was, hub := base.units[u.Name]
		var added []types.Dropin
		for _, d := range u.Dropins {
			if !slices.ContainsFunc(was.Dropins, func(x types.Dropin) bool { return x.Name == d.Name }) {
				added = append(added, d)
			}
		}
		if hub {
			if !ptrEqual(was.Contents, u.Contents) || !ptrEqual(was.Enabled, u.Enabled) || !ptrEqual(was.Mask, u.Mask) {
				t.Errorf("the snippet changed the hub's unit %s", u.Name)
			}
		} else {
			fmt.Fprintf(&b, "# unit %s enabled %v\n%s", u.Name, u.Enabled != nil && *u.Enabled, deref(u.Contents))
		}
		for _, d := range added {
			fmt.Fprintf(&b, "# drop-in %s of %s\n%s", d.Name, u.Name, deref(d.Contents))
		}
	}
	for _, u := range got.cfg.Passwd.Users {
		if u.Name == "core" {
			continue
		}
		fmt.Fprintf(&b, "# user %s groups %v keys %v\n", u.Name, u.Groups, u.SSHAuthorizedKeys)
	}
	golden.Check(t, filepath.Join("testdata", "class-snippet.golden"), []byte(b.String()))
	if got.units[ignition.SettingsUnit].Enabled == nil {
		t.Errorf("%s not enabled", ignition.SettingsUnit)
	}
}

// parseAnyIgnition is parseIgnition for configs with data URLs of any
// encoding (a snippet's are kept as it writes them).
func parseAnyIgnition(t *testing.T, data []byte) parsed {
	t.Helper()
	cfg, rpt, err := v3_3.Parse(data)
	if err != nil {
		t.Fatalf("Ignition config does not parse: %v: %s", err, rpt)
	}
	p := parsed{cfg: cfg, files: map[string]string{}, modes: map[string]int{}, units: map[string]types.Unit{}}
	for _, f := range cfg.Storage.Files {
		d, err := dataurl.DecodeString(*f.Contents.Source)
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		p.files[f.Path] = string(d.Data)
		p.modes[f.Path] = *f.Mode
	}
	for _, u := range cfg.Systemd.Units {
		p.units[u.Name] = u
	}
	return p
}

func ptrEqual[T comparable](a, b *T) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestClassSnippetCannotOverrideHub: everything the hub renders into a
// Revision (a worker with a network profile, every file, directory, link,
// unit and drop-in) is refused when a MachineClass snippet writes it,
// at apply (resource.Validate) as at render. A new file or unit the hub
// renders fails this test until ignition.RevisionReserved covers it.
func TestClassSnippetCannotOverrideHub(t *testing.T) {
	in := fullInputs()
	p := parseIgnition(t, mustRender(t, in, 3).GetIgnition())
	var snippets []string
	add := func(format string, a ...any) {
		snippets = append(snippets, `{"ignition": {"version": "3.3.0"}, `+fmt.Sprintf(format, a...)+`}`)
	}
	for _, f := range p.cfg.Storage.Files {
		add(`"storage": {"files": [{"path": %q, "contents": {"source": "data:,x"}}]}`, f.Path)
	}
	for _, d := range p.cfg.Storage.Directories {
		add(`"storage": {"directories": [{"path": %q}]}`, d.Path)
	}
	for _, l := range p.cfg.Storage.Links {
		add(`"storage": {"links": [{"path": %q, "target": "/dev/null"}]}`, l.Path)
	}
	for _, u := range p.cfg.Systemd.Units {
		if u.Contents != nil || u.Enabled != nil {
			add(`"systemd": {"units": [{"name": %q, "contents": "[Unit]\n"}]}`, u.Name)
			add(`"storage": {"files": [{"path": %q, "contents": {"source": "data:,x"}}]}`, ignition.UnitDir+"/"+u.Name)
		}
		for _, d := range u.Dropins {
			add(`"systemd": {"units": [{"name": %q, "dropins": [{"name": %q, "contents": "[Unit]\n"}]}]}`, u.Name, d.Name)
		}
	}
	if len(snippets) < 15 {
		t.Fatalf("only %d entries rendered", len(snippets))
	}
	for _, s := range snippets {
		mc := &roostv1.MachineClass{Metadata: &roostv1.ObjectMeta{Name: "standard"}, Spec: &roostv1.MachineClassSpec{Ignition: s}}
		vs := resource.Validate(resource.Wrap(mc))
		if len(vs) != 1 || vs[0].Field != "spec.ignition" {
			t.Errorf("apply of a snippet writing what the hub renders: %v\n%s", vs, s)
		}
		in := fullInputs()
		in.MachineClass.Spec.Ignition = s
		if _, err := Render(in, 3); err == nil || !strings.Contains(err.Error(), "user config MachineClass standard spec.ignition: line 1: ") {
			t.Errorf("render of a snippet writing what the hub renders: %v\n%s", err, s)
		}
	}
}

// TestClassSnippetRender: a class stored with a snippet validation would
// refuse (an older hub's) renders no Revision; the error names the class,
// the field, the line and the path.
func TestClassSnippetRender(t *testing.T) {
	in := fullInputs()
	in.MachineClass.Spec.ContainerLinuxConfig = "storage:\n  files:\n    - path: /etc/hostname\n      filesystem: root\n      contents: {inline: evil}\n"
	_, err := Render(in, 3)
	want := `render Ignition config: user config MachineClass standard spec.containerLinuxConfig: line 3: storage.files[0].path: "/etc/hostname": the hub sets the host name`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Render error\n%v\nwant one starting\n%s", err, want)
	}
}

// TestClassSnippetHash: a class without snippets hashes as before the
// fields existed (the values TestHashStable pins), so upgrading the hub
// renders nothing; adding, changing or removing a snippet changes Hash and
// LegacyHash alike, so it renders a new Revision (plan), which rolls out
// by reboot, also for a Revision an older hub hashed.
func TestClassSnippetHash(t *testing.T) {
	in := fullInputs()
	in.Cluster, in.Pool.Spec.Cluster = nil, ""
	in.MachineClass.Spec.Ignition, in.MachineClass.Spec.ContainerLinuxConfig = "", ""
	const hash, legacy = "6deb81f719c7c8b66ac2e1a34fe863dacd09e1d6908ee04d67ed59d0dbbb1cb3", "007b2043e5ed82e77bae9c72cf702142cd4bc22613727370ab3c7490e0492b14"
	if in.Hash() != hash || in.LegacyHash() != legacy {
		t.Fatalf("a class without snippets hashes %s (legacy %s), want %s (%s)", in.Hash(), in.LegacyHash(), hash, legacy)
	}
	latest := &roostv1.Revision{Spec: &roostv1.RevisionSpec{Number: 4, Machine: in.Machine.GetMetadata().GetName(), InputsSha256: legacy}}
	if spec, _, note := plan(in, latest, ""); spec != nil || note != "" {
		t.Fatalf("plan for a class without snippets rendered %v (note %q)", spec, note)
	}
	seen := map[string]bool{hash: true, legacy: true}
	for _, mod := range []func(*roostv1.MachineClassSpec){
		func(s *roostv1.MachineClassSpec) { s.Ignition = classSnippet },
		func(s *roostv1.MachineClassSpec) { s.Ignition = strings.Replace(classSnippet, "%2010", "%2020", 1) },
		func(s *roostv1.MachineClassSpec) { s.Ignition, s.ContainerLinuxConfig = "", classCLC },
	} {
		mod(in.MachineClass.Spec)
		for _, h := range []string{in.Hash(), in.LegacyHash()} {
			if seen[h] {
				t.Errorf("class %q / %q: hash %s seen before", in.MachineClass.Spec.Ignition, in.MachineClass.Spec.ContainerLinuxConfig, h)
			}
			seen[h] = true
		}
		spec, _, _ := plan(in, latest, "")
		if spec.GetNumber() != 5 || spec.GetInputsSha256() != in.Hash() {
			t.Errorf("plan after a snippet change: %v, want Revision 5", spec)
		}
	}
}
