package sysext

import (
	"fmt"
	"regexp"
)

// MaxNameLen and MaxVersionLen bound extension names and versions (in
// bytes): together they make a file name NAME-VERSION.raw well under the
// 255 bytes a Linux file name may have.
const (
	MaxNameLen    = 64
	MaxVersionLen = 64
)

var (
	nameRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+~-]*$`)
	// osFieldRE is what os-release allows in ID, VERSION_ID and
	// SYSEXT_LEVEL: lower-case letters, digits and . _ -.
	osFieldRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
)

// ValidateName checks an extension name: 1–64 characters of ASCII
// letters, digits and . _ -, starting with a letter or digit (so it is a
// safe file name: no '/', no leading '.', no "..", and systemd-sysext
// accepts it as an image name). The error says what is wrong and how a
// good name looks.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("name is empty: give the extension a name such as kubelet")
	case len(name) > MaxNameLen:
		return fmt.Errorf("name %q is %d characters long, at most %d are allowed", name, len(name), MaxNameLen)
	case !nameRE.MatchString(name):
		return fmt.Errorf("name %q: use letters, digits and . _ - only, starting with a letter or digit (kubelet, roost-agent)", name)
	}
	return nil
}

// ValidateVersion checks an extension version: 1–64 characters of ASCII
// letters, digits and . _ + ~ -, starting with a letter or digit
// (v1.34.4, 1.34.4-1, 2026.11.0+site1).
func ValidateVersion(version string) error {
	switch {
	case version == "":
		return fmt.Errorf("version is empty: give a version such as v1.34.4")
	case len(version) > MaxVersionLen:
		return fmt.Errorf("version %q is %d characters long, at most %d are allowed", version, len(version), MaxVersionLen)
	case !versionRE.MatchString(version):
		return fmt.Errorf("version %q: use letters, digits and . _ + ~ - only, starting with a letter or digit (v1.34.4, 1.0.2-1)", version)
	}
	return nil
}

// validateOSField checks the value of an os-release field that
// systemd-sysext compares with the host's (ID, VERSION_ID, SYSEXT_LEVEL):
// lower-case letters, digits and . _ -, starting with a letter or digit.
// field names the value in the error ("--os-id", "ID").
func validateOSField(field, v string) error {
	if !osFieldRE.MatchString(v) {
		return fmt.Errorf("%s %q: use lower-case letters, digits and . _ - only, starting with a letter or digit (as the OS's os-release has it)", field, v)
	}
	return nil
}
