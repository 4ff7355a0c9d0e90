package sysext

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// Where an extension's release file lives inside the image (relative to
// its root, as in the image; an absolute path on the host after merging).
const (
	ReleaseDir    = "usr/lib/extension-release.d"
	ReleasePrefix = "extension-release."
	// AnyOS is the ID that lets an extension merge on any OS.
	AnyOS = "_any"
)

// ReleasePath is where the release file of extension name sits inside the
// image: usr/lib/extension-release.d/extension-release.NAME.
func ReleasePath(name string) string { return ReleaseDir + "/" + ReleasePrefix + name }

// Release is the content of an extension-release file: the os-release
// fields systemd-sysext compares with the host's before it merges an
// image, and the extension's own name and version.
type Release struct {
	// ID is the OS the extension is for ("flatcar", "debian"), or AnyOS.
	ID string
	// SysextLevel and VersionID pin the OS release the extension fits;
	// one of them is needed when ID is not AnyOS.
	SysextLevel, VersionID string
	// Architecture is systemd's architecture name ("x86-64", "arm64");
	// empty merges on any architecture.
	Architecture string
	// SysextID and SysextVersionID are the extension's name and version.
	SysextID, SysextVersionID string
}

// releaseFields are the keys Marshal writes, in order.
func (r Release) fields() [][2]string {
	return [][2]string{
		{"ID", r.ID}, {"SYSEXT_LEVEL", r.SysextLevel}, {"VERSION_ID", r.VersionID},
		{"ARCHITECTURE", r.Architecture}, {"SYSEXT_ID", r.SysextID}, {"SYSEXT_VERSION_ID", r.SysextVersionID},
	}
}

var plainValueRE = regexp.MustCompile(`^[A-Za-z0-9._+~:/-]*$`)

// Marshal renders r as an os-release style file: one KEY=VALUE line per
// non-empty field in a fixed order, values double-quoted only when they
// hold characters a shell would interpret.
func (r Release) Marshal() []byte {
	var b bytes.Buffer
	for _, f := range r.fields() {
		if f[1] == "" {
			continue
		}
		v := f[1]
		if !plainValueRE.MatchString(v) {
			v = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`, "`", "\\`").Replace(v) + `"`
		}
		fmt.Fprintf(&b, "%s=%s\n", f[0], v)
	}
	return b.Bytes()
}

var keyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseRelease reads an os-release style file (os-release(5)): KEY=VALUE
// lines, values unquoted or in single or double quotes with shell
// escapes, blank lines and lines starting with '#' ignored, the last of a
// repeated key winning. Unknown keys are ignored. Errors name the line.
func ParseRelease(data []byte) (Release, error) {
	vals := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !keyRE.MatchString(k) {
			return Release{}, fmt.Errorf("line %d: %q is not KEY=VALUE", n, line)
		}
		val, err := unquote(v)
		if err != nil {
			return Release{}, fmt.Errorf("line %d: %s: %w", n, k, err)
		}
		vals[k] = val
	}
	if err := sc.Err(); err != nil {
		return Release{}, err
	}
	return Release{
		ID: vals["ID"], SysextLevel: vals["SYSEXT_LEVEL"], VersionID: vals["VERSION_ID"],
		Architecture: vals["ARCHITECTURE"], SysextID: vals["SYSEXT_ID"], SysextVersionID: vals["SYSEXT_VERSION_ID"],
	}, nil
}

// unquote reads one os-release value the way a shell reads a word:
// 'single quotes' literally, "double quotes" with \" \\ \$ \` escapes,
// unquoted text with \ escaping the next character. Nothing may follow
// the closing quote.
func unquote(v string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\'':
			end := strings.IndexByte(v[i+1:], '\'')
			if end < 0 {
				return "", fmt.Errorf("unterminated single quote in %s", v)
			}
			b.WriteString(v[i+1 : i+1+end])
			i += end + 1
		case '"':
			closed := false
			for i++; i < len(v); i++ {
				if v[i] == '"' {
					closed = true
					break
				}
				if v[i] == '\\' && i+1 < len(v) && strings.IndexByte("\"\\$`", v[i+1]) >= 0 {
					i++
				}
				b.WriteByte(v[i])
			}
			if !closed {
				return "", fmt.Errorf("unterminated double quote in %s", v)
			}
		case '\\':
			if i+1 < len(v) {
				i++
				b.WriteByte(v[i])
			}
		case ' ', '\t':
			return "", fmt.Errorf("unquoted white space in %s: quote the value", v)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
