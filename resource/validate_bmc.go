package resource

import (
	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/bmc/redfish"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ValidateBMC checks a Server's BMC at field path (e.g. "spec.bmc"): the
// address parses as redfish+https://HOST[:PORT]/redfish/v1/Systems/ID (or
// redfish+http), and, when needCredentials, a username and password are
// given. Messages never quote the password or the whole address (a
// mistyped address may hold one).
func ValidateBMC(path string, b *roostv1.BMC, needCredentials bool) []apierror.Violation {
	if b == nil {
		return []apierror.Violation{{Field: path, Message: "is required", Hint: "give the BMC's Redfish address and credentials"}}
	}
	var vs []apierror.Violation
	if _, err := redfish.ParseAddress(b.GetAddress()); err != nil {
		vs = append(vs, apierror.Violation{Field: path + ".address", Message: err.Error(), Hint: "e.g. redfish+https://10.20.0.17/redfish/v1/Systems/1"})
	}
	if needCredentials {
		if b.GetUsername() == "" {
			vs = append(vs, apierror.Violation{Field: path + ".username", Message: "is required", Hint: "the BMC account's user name (--bmc-username)"})
		}
		if b.GetPassword() == "" {
			vs = append(vs, apierror.Violation{Field: path + ".password", Message: "is required", Hint: "the BMC account's password (--bmc-password-file)"})
		}
	}
	if len(b.GetUsername()) > 256 {
		vs = append(vs, apierror.Violation{Field: path + ".username", Message: "at most 256 bytes"})
	}
	if len(b.GetPassword()) > 1024 {
		vs = append(vs, apierror.Violation{Field: path + ".password", Message: "at most 1024 bytes"})
	}
	return vs
}

// NameErrors are the problems of name as an object name (a DNS-1123
// label); none when it is valid.
func NameErrors(name string) []string { return validation.IsDNS1123Label(name) }

// ValidDigest says whether d is a hex sha256 digest as the hub's artifact
// store names blobs: 64 lower-case hex characters, no "sha256:" prefix.
func ValidDigest(d string) bool {
	if len(d) != 64 {
		return false
	}
	for _, c := range d {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
