package redfish

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Address schemes.
const (
	SchemeHTTPS = "redfish+https"
	// SchemeHTTP is plain HTTP, for tests and emulators only.
	SchemeHTTP = "redfish+http"
)

// systemsPrefix is where ComputerSystem resources live.
const systemsPrefix = "/redfish/v1/Systems/"

// Address is a parsed BMC address: one ComputerSystem of a Redfish service.
type Address struct {
	// Scheme is "https" or "http" (the transport under Redfish).
	Scheme string
	// Host is host or host:port.
	Host string
	// SystemPath is the ComputerSystem's @odata.id, e.g. /redfish/v1/Systems/1.
	SystemPath string
}

// addressForm is the form quoted in parse errors.
const addressForm = "redfish+https://HOST[:PORT]/redfish/v1/Systems/ID"

// ParseAddress parses redfish+https://HOST[:PORT]/redfish/v1/Systems/ID (or
// redfish+http:// for tests). Errors never quote the whole input, since a
// mistyped address may hold a password; an address with user information
// (user:password@) is refused: credentials are given apart from it.
func ParseAddress(s string) (Address, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Address{}, errors.New("bmc address is empty: want " + addressForm)
	}
	u, err := url.Parse(s)
	if err != nil {
		// url's errors quote the input; give a fixed message instead.
		return Address{}, errors.New("bmc address is not a URL: want " + addressForm)
	}
	if u.User != nil {
		return Address{}, errors.New("bmc address holds user information (USER:PASSWORD@): give credentials apart from the address")
	}
	var a Address
	switch strings.ToLower(u.Scheme) {
	case SchemeHTTPS:
		a.Scheme = "https"
	case SchemeHTTP:
		a.Scheme = "http"
	case "https", "http":
		return Address{}, fmt.Errorf("bmc address scheme %q: write %s (or %s)", u.Scheme, SchemeHTTPS, SchemeHTTP)
	default:
		return Address{}, fmt.Errorf("bmc address scheme %q: want %s", u.Scheme, addressForm)
	}
	if u.Host == "" || u.Hostname() == "" {
		return Address{}, errors.New("bmc address has no host: want " + addressForm)
	}
	if u.Port() != "" && strings.Trim(u.Port(), "0123456789") != "" {
		return Address{}, fmt.Errorf("bmc address port %q is not a number", u.Port())
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return Address{}, errors.New("bmc address has a query or fragment: want " + addressForm)
	}
	p := strings.TrimSuffix(u.Path, "/")
	id, ok := strings.CutPrefix(p, systemsPrefix)
	if !ok || id == "" || strings.Contains(id, "/") {
		return Address{}, fmt.Errorf("bmc address path %q: want /redfish/v1/Systems/ID", u.Path)
	}
	a.Host = u.Host
	a.SystemPath = p
	return a, nil
}

// String is the address in the form ParseAddress reads.
func (a Address) String() string {
	return "redfish+" + a.Scheme + "://" + a.Host + a.SystemPath
}

// SystemID is the ComputerSystem's Id, the last element of SystemPath.
func (a Address) SystemID() string {
	return strings.TrimPrefix(a.SystemPath, systemsPrefix)
}

// url is the address of the resource at path (an @odata.id) on a's service.
func (a Address) url(path string) string {
	return a.Scheme + "://" + a.Host + path
}
