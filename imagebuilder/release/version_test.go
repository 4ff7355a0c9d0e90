package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateVersion(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    string // a part of the error; "" for valid
	}{
		{"2026.11.0", ""},
		{"2026.11.0-134c2bcbe4bdea3e", ""},    // images/testbed/build.sh
		{"2026.11.0-134c2bcbe4bdea3e-v2", ""}, // the e2e test's second release
		{"4230.2.1", ""},                      // Flatcar
		{"2026.12.0-rc.1", ""},
		{"2026.11.0-rc1", ""},
		{"2026.08.0", ""},
		{"1", ""},
		{"1.2.3+build_7", ""},
		{strings.Repeat("1", 64), ""},
		{"", "is empty"},
		{strings.Repeat("1", 65), "more than 64"},
		{"bad version", `holds " " at byte 3`},
		{"a/b", `holds "/" at byte 1`},
		{"2026/11", `holds "/"`},
		{"2026..1", `".." in a row`},
		{"2026.-1", `".-" in a row`},
		{"V2026.11.0", `starts with "V": drop it`},
		{"v2026.11.0", `starts with "v": drop it`},
		{"2026.11.0-RC1", `use "2026.11.0-rc1"`},
		{"latest", "does not start with a digit"},
		{".2026", "does not start with a digit"},
		{"2026.11.", "does not end with a letter or digit"},
		{"2026.11.0é", `holds "é"`},
		{"2026\n", `holds "\n"`},
	} {
		err := ValidateVersion(tc.version)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("ValidateVersion(%q) = %v, want nil", tc.version, err)
		case tc.want != "" && err == nil:
			t.Errorf("ValidateVersion(%q) = nil, want an error with %q", tc.version, tc.want)
		case tc.want != "" && (!strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), VersionRule)):
			t.Errorf("ValidateVersion(%q) = %v, want %q and the rule", tc.version, err, tc.want)
		}
		// A valid version's name is a DNS label (what the hub requires).
		if err == nil {
			n := Name(tc.version)
			if len(n) > 63 && len(tc.version) < 63 || strings.Contains(n, "--") || strings.HasSuffix(n, "-") {
				t.Errorf("Name(%q) = %q: not a clean DNS label", tc.version, n)
			}
		}
	}
}

func TestName(t *testing.T) {
	for v, want := range map[string]string{"2026.11.0": "v2026-11-0", "2026-11-0": "v2026-11-0", "2026.12.0-rc.1": "v2026-12-0-rc-1"} {
		if got := Name(v); got != want {
			t.Errorf("Name(%q) = %q, want %q", v, got, want)
		}
	}
}

func TestDefinitionVersionAndDate(t *testing.T) {
	d, p := definition(t)
	good, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{"version: 2026.11.0", "version: bad version", `version "bad version" holds " "`},
		{"version: 2026.11.0", "version: a/b", `version "a/b" holds "/"`},
		{"version: 2026.11.0", "version: 2026..1", `in a row`},
		{"version: 2026.11.0", "version: V2026.11.0", `drop it`},
		{"date: 2026-11-01T00:00:00Z", "date: 2026-11-01", `date: "2026-11-01" is not a valid time: want an RFC 3339 date and time such as 2026-11-01T00:00:00Z`},
		{"date: 2026-11-01T00:00:00Z", "date: 'yesterday'", `date: "yesterday" is not a valid time: want an RFC 3339`},
		{"date: 2026-11-01T00:00:00Z", "date: 5", `date: 5 is not a valid time: want an RFC 3339`},
	} {
		bad := filepath.Join(d, "bad.yaml")
		if err := os.WriteFile(bad, []byte(strings.Replace(string(good), tc.from, tc.to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadDefinition(bad)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.to, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "unmarshaling JSON") {
			t.Errorf("%s: raw decoder error: %v", tc.to, err)
		}
	}
	if _, err := LoadDefinition(p); err != nil {
		t.Fatal(err)
	}
}
