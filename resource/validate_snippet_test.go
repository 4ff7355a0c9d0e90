package resource

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/imagebuilder/ignition"
)

// TestValidateSnippets pins the violations of MachineClass snippets as
// the hub's API reports them (no manifest: each message starts with the
// snippet's own line).
func TestValidateSnippets(t *testing.T) {
	const good = "ignition: {version: 3.3.0}\nstorage:\n  files:\n    - {path: /etc/sysctl.d/90-a.conf, contents: {source: \"data:,vm.swappiness%3D1\"}}\n"
	const clc = "storage:\n  files:\n    - path: /etc/motd\n      filesystem: root\n      contents: {inline: hi}\n"
	for _, tc := range []struct {
		name     string
		ign, clc string
		want     []apierror.Violation
	}{
		{"none", "", "", nil},
		{"ignition", good, "", nil},
		{"clc", "", clc, nil},
		{"both", good, clc, nil},
		{"ignition json", `{"ignition": {"version": "3.3.0"}, "passwd": {"users": [{"name": "ops"}]}}`, "", nil},
		{"hub file", "ignition: {version: 3.3.0}\nstorage:\n  files:\n    - path: /etc/roost/agent.yaml\n", "", []apierror.Violation{{
			Field:   "spec.ignition",
			Message: `line 4: storage.files[0].path: "/etc/roost/agent.yaml": the hub writes the agent's configuration, the Machine's facts and its network profile under /etc/roost`,
			Hint:    "remove the entry"}}},
		{"unknown version", `{"ignition": {"version": "2.2.0"}}`, "", []apierror.Violation{{
			Field:   "spec.ignition",
			Message: `line 1: ignition.version: unknown Ignition config version "2.2.0": Roost reads 3.0.0, 3.1.0, 3.2.0, 3.3.0`,
			Hint:    "spec 2.x is what a Container Linux Config transpiles to: give the Container Linux Config in containerLinuxConfig, or write the snippet for spec 3.3.0"}}},
		{"clc in ignition", clc, "", []apierror.Violation{{
			Field:   "spec.ignition",
			Message: "ignition.version: is required",
			Hint:    `start with "ignition": {"version": "3.3.0"}; a Container Linux Config goes into containerLinuxConfig`}}},
		{"clc networkd", "", "networkd:\n  units:\n    - name: 10-eth0.network\n      contents: x\n", []apierror.Violation{{
			Field:   "spec.containerLinuxConfig",
			Message: "line 3: networkd.units[0]: is not allowed in a snippet",
			Hint:    "host networking is the NetworkProfile's: describe links, bonds, VLANs and addresses there"}}},
		{"both bad", "ignition: {version: 3.3.0}\nstorage:\n  disks: [{device: /dev/sdb}]\n", "systemd:\n  units:\n    - name: kubelet.service\n      enabled: false\n", []apierror.Violation{
			{Field: "spec.containerLinuxConfig", Message: "line 3: systemd.units[0]: unit kubelet.service: the hub renders it in every Revision: a snippet may not set its enabled",
				Hint: "remove them; to change the unit, give it only drop-ins"},
			{Field: "spec.ignition", Message: "line 3: storage.disks[0]: is not allowed in a snippet", Hint: "the agent owns the disks: partitions cannot be set in a snippet"}}},
		{"overlap", "ignition: {version: 3.3.0}\nstorage:\n  files:\n    - path: /etc/motd\n", clc, []apierror.Violation{{
			Field:   "spec.ignition",
			Message: `line 4: storage.files[0]: "/etc/motd" is also in spec.containerLinuxConfig (storage.files[0])`,
			Hint:    "give each file, directory, link, unit and user in one of them only"}}},
		{"too big together", "ignition: {version: 3.3.0}\n#" + strings.Repeat("x", ignition.MaxSnippetBytes/2), "#" + strings.Repeat("x", ignition.MaxSnippetBytes/2), []apierror.Violation{{
			Field:   "spec.ignition",
			Message: "spec.containerLinuxConfig and spec.ignition take 131101 bytes together, more than the limit of 131072",
			Hint:    "keep large files out of the snippets: ship them as an Extension, or fetch them from a unit at boot"}}},
		{"too big", strings.Repeat(" ", ignition.MaxSnippetBytes) + "{}", "", []apierror.Violation{{
			Field:   "spec.ignition",
			Message: "is 131074 bytes, more than the limit of 131072",
			Hint:    "keep large files out of the snippet: ship them as an Extension, or fetch them from a unit at boot"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc := validClass()
			mc.Spec.Ignition, mc.Spec.ContainerLinuxConfig = tc.ign, tc.clc
			got := Validate(Wrap(mc))
			if violationsText(got) != violationsText(tc.want) {
				t.Errorf("violations:\n%s\nwant:\n%s", violationsText(got), violationsText(tc.want))
			}
		})
	}
}

// TestMachineClassSnippets: the Container Linux Config merges first, then
// the Ignition snippet; each is named by its field and has its format.
func TestMachineClassSnippets(t *testing.T) {
	mc := validClass()
	if got := MachineClassSnippets(mc.Spec); got != nil {
		t.Errorf("class without snippets: %v", got)
	}
	mc.Spec.Ignition, mc.Spec.ContainerLinuxConfig = "{}", "storage: {}"
	got := MachineClassSnippets(mc.Spec)
	if len(got) != 2 || got[0].Name != FieldContainerLinuxConfig || got[0].Format != ignition.FormatCLC || string(got[0].Data) != "storage: {}" ||
		got[1].Name != FieldIgnition || got[1].Format != ignition.FormatIgnition || string(got[1].Data) != "{}" {
		t.Errorf("snippets %+v", got)
	}
}

// TestSnippetLines: a problem inside a snippet written as a literal block
// is placed on its manifest line, whatever the block's chomping and the
// blank lines in it; a snippet written otherwise keeps the snippet's line
// in the message, placed at the field.
func TestSnippetLines(t *testing.T) {
	const head = "apiVersion: roost.io/v1\nkind: MachineClass\nmetadata:\n  name: mc\nspec:\n"
	for _, tc := range []struct {
		name, spec string
		want       string
	}{
		{"literal", "  ignition: |\n    ignition: {version: 3.3.0}\n\n    storage:\n      files:\n        - path: /etc/hostname\n",
			`x.yaml:11: MachineClass "mc": spec.ignition: storage.files[0].path: "/etc/hostname": the hub sets`},
		{"literal, strip, indicator below", "  ignition:\n    |-\n      ignition: {version: 3.3.0}\n      storage:\n        files:\n          - path: /etc/hostname",
			`x.yaml:11: MachineClass "mc": spec.ignition: storage.files[0].path: "/etc/hostname": the hub sets`},
		{"folded", "  ignition: >\n    {\"ignition\": {\"version\": \"3.3.0\"},\n    \"storage\": {\"files\": [{\"path\": \"/etc/hostname\"}]}}\n",
			`x.yaml:6:3: MachineClass "mc": spec.ignition: line 1: storage.files[0].path: "/etc/hostname": the hub sets`},
		{"clc", "  containerLinuxConfig: |\n    storage:\n      files:\n        - path: /etc/hostname\n          filesystem: root\n",
			`x.yaml:9: MachineClass "mc": spec.containerLinuxConfig: storage.files[0].path: "/etc/hostname": the hub sets`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := Decode([]byte(head+tc.spec), "x.yaml", ForApply())
			if err != nil {
				t.Fatal(err)
			}
			ds := ValidateManifests(ms)
			if len(ds) != 1 || !strings.HasPrefix(ds[0].String(), tc.want) {
				t.Errorf("diagnostics:\n%s\nwant one starting %q", FormatViolations(ds), tc.want)
			}
		})
	}
}

// TestCustomisingDoc: docs/customising.md shows
// examples/machineclass-custom.yaml as it is, and its other snippets (the
// JSON form, the Container Linux Config) are valid MachineClass snippets.
func TestCustomisingDoc(t *testing.T) {
	doc, err := os.ReadFile("../docs/customising.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join(examplesDir, "machineclass-custom.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```yaml\n"+string(example)+"```\n") {
		t.Error("docs/customising.md does not show examples/machineclass-custom.yaml as it is: copy it there")
	}
	blocks := regexp.MustCompile("(?s)```(json|yaml)\n(.*?)```\n").FindAllStringSubmatch(string(doc), -1)
	var checked int
	for _, b := range blocks {
		mc := validClass()
		switch {
		case b[1] == "json":
			mc.Spec.Ignition = b[2]
		case strings.HasPrefix(b[2], "storage:"):
			mc.Spec.ContainerLinuxConfig = b[2]
		default:
			continue
		}
		checked++
		if vs := Validate(Wrap(mc)); len(vs) > 0 {
			t.Errorf("docs/customising.md snippet:\n%s\n%s", b[2], violationsText(vs))
		}
	}
	if checked != 2 {
		t.Errorf("checked %d snippets of docs/customising.md, want 2 (the JSON one, the Container Linux Config)", checked)
	}
}
