package resource

import (
	"strings"
	"testing"
)

func TestParseRequirement(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Requirement
	}{
		{"rack=r12", Requirement{Key: "rack", Op: OpEquals, Value: "r12"}},
		{" rack = r12 ", Requirement{Key: "rack", Op: OpEquals, Value: "r12"}},
		{"rack=", Requirement{Key: "rack", Op: OpEquals, Value: ""}},
		{"gpu!=none", Requirement{Key: "gpu", Op: OpNotEquals, Value: "none"}},
		{"roost.io/ssd", Requirement{Key: "roost.io/ssd", Op: OpExists}},
		{"!maintenance", Requirement{Key: "maintenance", Op: OpDoesNotExist}},
		{"roost.io/cpus>=16", Requirement{Key: "roost.io/cpus", Op: OpGreaterEqual, Value: "16"}},
		{"memory>64Gi", Requirement{Key: "memory", Op: OpGreater, Value: "64Gi"}},
		{"disks<=4", Requirement{Key: "disks", Op: OpLessEqual, Value: "4"}},
		{"temp<1.5", Requirement{Key: "temp", Op: OpLess, Value: "1.5"}},
	} {
		got, err := ParseRequirement(tc.in)
		if err != nil {
			t.Errorf("ParseRequirement(%q): %v", tc.in, err)
			continue
		}
		if got.Key != tc.want.Key || got.Op != tc.want.Op || got.Value != tc.want.Value {
			t.Errorf("ParseRequirement(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		if back, err := ParseRequirement(got.String()); err != nil || back.String() != got.String() {
			t.Errorf("String() of %q = %q does not parse back: %v", tc.in, got.String(), err)
		}
	}
	for _, tc := range []struct{ in, err string }{
		{"", "empty requirement"},
		{"!", "missing label key"},
		{">=3", "missing label key before"},
		{"a>=", "missing number"},
		{"a>=x", `"x" is not a quantity`},
		{"a==b", `write "=" instead of "=="`},
		{"a!b", `"!" must start the requirement`},
		{"a=b=c", "more than one operator"},
		{"a b=c", `invalid label key "a b"`},
		{"a=b c", `invalid label value "b c"`},
		{"!a=b", `"!key" means "label unset" and takes no value`},
	} {
		_, err := ParseRequirement(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseRequirement(%q) error = %v, want %q", tc.in, err, tc.err)
		}
	}
}

func TestSelectorMatches(t *testing.T) {
	labels := map[string]string{"rack": "r12", "roost.io/cpus": "32", "roost.io/memory": "128Gi", "gpu": "none", "bogus": "lots"}
	for _, tc := range []struct {
		terms []string
		want  bool
	}{
		{nil, true},
		{[]string{"rack=r12"}, true},
		{[]string{"rack=r13"}, false},
		{[]string{"rack!=r13", "gpu!=a100", "zone!=x"}, true},
		{[]string{"gpu!=none"}, false},
		{[]string{"rack"}, true},
		{[]string{"zone"}, false},
		{[]string{"!zone"}, true},
		{[]string{"!rack"}, false},
		{[]string{"roost.io/cpus>=32", "roost.io/cpus>16", "roost.io/cpus<=32", "roost.io/cpus<64"}, true},
		{[]string{"roost.io/cpus>32"}, false},
		{[]string{"roost.io/memory>=64Gi"}, true},
		{[]string{"roost.io/memory>=129Gi"}, false},
		{[]string{"roost.io/memory>100G"}, true},
		{[]string{"missing>=1"}, false},
		{[]string{"bogus>=1"}, false},
	} {
		sel, err := ParseSelector(tc.terms)
		if err != nil {
			t.Fatal(err)
		}
		if got := sel.Matches(labels); got != tc.want {
			t.Errorf("%q.Matches = %v, want %v", tc.terms, got, tc.want)
		}
	}
	if _, err := ParseSelector([]string{"a", "b=="}); err == nil || !strings.HasPrefix(err.Error(), "serverSelector[1]: ") {
		t.Errorf("ParseSelector error = %v", err)
	}
}
