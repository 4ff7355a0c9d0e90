package resource

import "testing"

func TestParentPath(t *testing.T) {
	for in, want := range map[string]string{
		"":                                "",
		"spec":                            "",
		"spec.rollout.maxUnavailable":     "spec.rollout",
		"spec.bonds[0].members[1]":        "spec.bonds[0].members",
		"spec.bonds[0]":                   "spec.bonds",
		"metadata.labels[roost.io/rack]":  "metadata.labels",
		"metadata.labels[a.b].x":          "metadata.labels[a.b]",
		"spec.nodeLabels[x]":              "spec.nodeLabels",
		"spec.vlans[2].routes[0].gateway": "spec.vlans[2].routes[0]",
	} {
		if got := parentPath(in); got != want {
			t.Errorf("parentPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSuggest(t *testing.T) {
	cands := []string{"cluster", "machineClass", "replicas", "rollout", "maintenanceWindows"}
	for in, want := range map[string]string{
		"replica":             "replicas",
		"Replicas":            "replicas",
		"clsuter":             "cluster",
		"machine_class":       "machineClass",
		"maintenance-windows": "maintenanceWindows",
		"rolout":              "rollout",
		"zzz":                 "",
		"image":               "",
	} {
		if got := suggest(in, cands); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}
