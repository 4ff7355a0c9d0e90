package redfish

import (
	"strings"
	"testing"
)

func TestParseAddress(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Address
	}{
		{"redfish+https://bmc1.example/redfish/v1/Systems/1", Address{"https", "bmc1.example", "/redfish/v1/Systems/1"}},
		{"redfish+https://10.0.0.5:8443/redfish/v1/Systems/System.Embedded.1/", Address{"https", "10.0.0.5:8443", "/redfish/v1/Systems/System.Embedded.1"}},
		{"REDFISH+HTTP://[::1]:8000/redfish/v1/Systems/abc", Address{"http", "[::1]:8000", "/redfish/v1/Systems/abc"}},
	} {
		got, err := ParseAddress(tc.in)
		if err != nil {
			t.Errorf("ParseAddress(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseAddress(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		again, err := ParseAddress(got.String())
		if err != nil || again != got {
			t.Errorf("ParseAddress(%q) = %+v, %v: does not round-trip", got.String(), again, err)
		}
	}
	if id := (Address{SystemPath: "/redfish/v1/Systems/1"}).SystemID(); id != "1" {
		t.Errorf("SystemID = %q", id)
	}
}

func TestParseAddressErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"https://bmc/redfish/v1/Systems/1", "write redfish+https"},
		{"ipmi://bmc/redfish/v1/Systems/1", `scheme "ipmi"`},
		{"redfish+https:///redfish/v1/Systems/1", "no host"},
		{"redfish+https://bmc/redfish/v1/Systems", "want /redfish/v1/Systems/ID"},
		{"redfish+https://bmc/redfish/v1/Systems/1/Bios", "want /redfish/v1/Systems/ID"},
		{"redfish+https://bmc/redfish/v1/Managers/1", "want /redfish/v1/Systems/ID"},
		{"redfish+https://bmc/redfish/v1/Systems/1?x=1", "query"},
		{"redfish+https://bmc:http/redfish/v1/Systems/1", "not a URL"},
		{"redfish+https://admin:hunter2@bmc/redfish/v1/Systems/1", "user information"},
		{"redfish+https://admin:hunter2@bmc%zz/redfish/v1/Systems/1", "not a URL"},
	} {
		_, err := ParseAddress(tc.in)
		if err == nil {
			t.Errorf("ParseAddress(%q): no error", tc.in)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseAddress(%q) = %v, want it to say %q", tc.in, err, tc.want)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseAddress(%q) = %v: the error shows the password", tc.in, err)
		}
	}
}
