package release

import (
	"fmt"
	"strings"
)

// MaxVersionLen is the longest release version, in bytes.
const MaxVersionLen = 64

// VersionRule says in words what ValidateVersion accepts; error messages
// and help text quote it.
const VersionRule = "1–64 characters of lower-case letters, digits and . + _ -, starting with a digit, " +
	"ending with a letter or digit, with no two of . + _ - in a row (e.g. 2026.11.0 or 2026.11.0-rc.1)"

// ValidateVersion checks a release version (Definition.Version,
// Manifest.Version, ImageReleaseSpec.version) against the one rule that
// roost-image, roostctl and the hub share (VersionRule). The rule keeps
// the ImageRelease name ("v" and the version with every separator
// replaced by "-", see Name) a DNS label and keeps versions that differ
// only in case or by a leading "v" from looking alike. The error
// describes what is wrong, without naming the field.
func ValidateVersion(v string) error {
	switch {
	case v == "":
		return fmt.Errorf("is empty: want %s", VersionRule)
	case len(v) > MaxVersionLen:
		return fmt.Errorf("%q is %d characters, more than %d: want %s", v, len(v), MaxVersionLen, VersionRule)
	case (v[0] == 'v' || v[0] == 'V') && len(v) > 1 && isDigit(v[1]):
		return fmt.Errorf("%q starts with %q: drop it, the ImageRelease name adds a v (%s → %s); want %s",
			v, v[:1], strings.ToLower(v[1:]), Name(strings.ToLower(v[1:])), VersionRule)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'A' && c <= 'Z':
			return fmt.Errorf("%q holds upper-case letters: use %q (ImageRelease names are lower-case, so case cannot tell versions apart); want %s",
				v, strings.ToLower(v), VersionRule)
		case isAlnum(c):
		case isSeparator(c):
			if i > 0 && isSeparator(v[i-1]) {
				return fmt.Errorf("%q has %q in a row at byte %d: want %s", v, v[i-1:i+1], i-1, VersionRule)
			}
		default:
			return fmt.Errorf("%q holds %q at byte %d: want %s", v, printable(v, i), i, VersionRule)
		}
	}
	switch {
	case !isDigit(v[0]):
		return fmt.Errorf("%q does not start with a digit: want %s", v, VersionRule)
	case !isAlnum(v[len(v)-1]):
		return fmt.Errorf("%q does not end with a letter or digit: want %s", v, VersionRule)
	}
	return nil
}

// Name is the name of the ImageRelease of version: "v" and the lower-cased
// version, with every character that is not a letter or a digit replaced
// by "-" ("2026.11.0" → "v2026-11-0"). Distinct valid versions may share a
// name ("2026.11.0" and "2026-11-0"); the hub refuses the second.
func Name(version string) string {
	var b strings.Builder
	b.WriteByte('v')
	for _, c := range strings.ToLower(version) {
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

func isDigit(c byte) bool     { return c >= '0' && c <= '9' }
func isAlnum(c byte) bool     { return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isSeparator(c byte) bool { return c == '.' || c == '+' || c == '_' || c == '-' }

// printable is the character of v at byte i, whole if it is UTF-8.
func printable(v string, i int) string {
	for j, r := range v {
		if j == i {
			return string(r)
		}
	}
	return v[i : i+1]
}
