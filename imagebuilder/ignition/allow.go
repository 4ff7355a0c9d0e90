package ignition

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_3/types"
)

// Allowed lists the Ignition spec 3 fields a snippet may set, as JSON
// paths where "*" stands for any list index: files, directories and
// links on the root file system, systemd units with drop-ins, and users.
// It is the one allow-list of every snippet Roost takes, the enrollment
// image's --user-config and a MachineClass's spec.ignition and
// spec.containerLinuxConfig alike (docs/customising.md lists it; a test
// keeps the two in step). A field outside it, set to anything but its
// zero value, is refused with a reason (see reasons).
var Allowed = []string{
	"ignition.version",

	"storage.files.*.path",
	"storage.files.*.overwrite",
	"storage.files.*.mode",
	"storage.files.*.user.id",
	"storage.files.*.user.name",
	"storage.files.*.group.id",
	"storage.files.*.group.name",
	"storage.files.*.contents.source",
	"storage.files.*.contents.compression",
	"storage.files.*.contents.verification.hash",
	"storage.files.*.append.*.source",
	"storage.files.*.append.*.compression",
	"storage.files.*.append.*.verification.hash",

	"storage.directories.*.path",
	"storage.directories.*.overwrite",
	"storage.directories.*.mode",
	"storage.directories.*.user.id",
	"storage.directories.*.user.name",
	"storage.directories.*.group.id",
	"storage.directories.*.group.name",

	"storage.links.*.path",
	"storage.links.*.overwrite",
	"storage.links.*.target",
	"storage.links.*.hard",
	"storage.links.*.user.id",
	"storage.links.*.user.name",
	"storage.links.*.group.id",
	"storage.links.*.group.name",

	"systemd.units.*.name",
	"systemd.units.*.enabled",
	"systemd.units.*.mask",
	"systemd.units.*.contents",
	"systemd.units.*.dropins.*.name",
	"systemd.units.*.dropins.*.contents",

	"passwd.users.*.name",
	"passwd.users.*.passwordHash",
	"passwd.users.*.sshAuthorizedKeys",
	"passwd.users.*.uid",
	"passwd.users.*.gecos",
	"passwd.users.*.homeDir",
	"passwd.users.*.noCreateHome",
	"passwd.users.*.primaryGroup",
	"passwd.users.*.groups",
	"passwd.users.*.noUserGroup",
	"passwd.users.*.noLogInit",
	"passwd.users.*.shell",
	"passwd.users.*.system",
}

var allowed = func() map[string]bool {
	m := map[string]bool{}
	for _, p := range Allowed {
		m[p] = true
	}
	return m
}()

// reasons say why a part of a config is not allowed, by the pattern of
// the field (as in Allowed) or of an ancestor; the first, longest match
// wins.
var reasons = map[string]string{
	"ignition.config":   "a Revision carries its whole config: paste the other config's entries into this snippet instead of referencing it",
	"ignition.timeouts": "it only tunes fetching remote resources, and a snippet holds its content inline",
	"ignition.security": "it only concerns fetching remote resources, and a snippet holds its content inline",
	"ignition.proxy":    "it only concerns fetching remote resources, and a snippet holds its content inline",
	"kernelArguments":   "set the MachineClass's spec.kernelArgs instead",
	"storage.disks":     "the agent owns the disks: partitions cannot be set in a snippet",
	"storage.raid":      "the agent owns the disks: RAID arrays cannot be set in a snippet",
	"storage.filesystems": "the agent owns the disks and the OS runs from RAM: write files on the root file system " +
		"(in a Container Linux Config, filesystem: root)",
	"storage.luks":                         "the agent owns the disks: LUKS volumes cannot be set in a snippet",
	"storage.files.*.contents.httpHeaders": "headers are for remote sources; give the content inline (a data: URL, or contents.inline in a Container Linux Config)",
	"storage.files.*.append.*.httpHeaders": "headers are for remote sources; give the content inline (a data: URL, or contents.inline in a Container Linux Config)",
	"passwd.groups":                        "groups cannot be created by a snippet: use a group the OS image has",
	"passwd.users.*.shouldExist":           "leave it out: a snippet adds or changes users and cannot delete them",
	// Container Linux Config (Ignition spec 2.3) sections without a
	// spec 3 counterpart.
	"networkd": "host networking is the NetworkProfile's: describe links, bonds, VLANs and addresses there",
}

// reasonFor is the reason for the pattern of p or its nearest ancestor in
// reasons, else fallback.
func reasonFor(p fieldPath, fallback string) string {
	pat := pattern(p)
	for {
		if r, ok := reasons[pat]; ok {
			return r
		}
		i := strings.LastIndexByte(pat, '.')
		if i < 0 {
			return fallback
		}
		pat = pat[:i]
	}
}

// pattern is p with list indexes as "*": "storage.files.*.path".
func pattern(p fieldPath) string {
	parts := make([]string, len(p))
	for i, e := range p {
		if _, ok := e.(int); ok {
			parts[i] = "*"
		} else {
			parts[i] = fmt.Sprint(e)
		}
	}
	return strings.Join(parts, ".")
}

// outside returns the places in JSON config raw that set something
// outside list (patterns as in Allowed): under the shallowest node none
// of whose fields is listed, each list item and each scalar field that
// is not in a list, in the order of the document's fields (sorted) and
// items. Zero values (null,
// false, 0, "", empty lists and objects) set nothing.
func outside(raw []byte, list map[string]bool) []fieldPath {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil
	}
	prefixes := map[string]bool{}
	for p := range list {
		for i := range p {
			if p[i] == '.' {
				prefixes[p[:i]] = true
			}
		}
	}
	var out []fieldPath
	var walk func(v any, at fieldPath)
	walk = func(v any, at fieldPath) {
		pat := pattern(at)
		if list[pat] || isZero(v) {
			return
		}
		if len(at) > 0 && !prefixes[pat] {
			// Outside: report each item of a list, each field of an
			// object, so that every problem has a line of its own.
			switch t := v.(type) {
			case []any:
				for i, c := range t {
					if !isZero(c) {
						out = append(out, at.with(i))
					}
				}
			case map[string]any:
				for _, k := range slices.Sorted(maps.Keys(t)) {
					walk(t[k], at.with(k))
				}
			default:
				out = append(out, at)
			}
			return
		}
		switch t := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(t)) {
				walk(t[k], at.with(k))
			}
		case []any:
			for i, c := range t {
				walk(c, at.with(i))
			}
		default:
			out = append(out, at)
		}
	}
	walk(doc, nil)
	return out
}

// isZero reports whether v (decoded with UseNumber) sets nothing.
func isZero(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case bool:
		return !t
	case string:
		return t == ""
	case json.Number:
		return t.String() == "0"
	case []any:
		for _, c := range t {
			if !isZero(c) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, c := range t {
			if !isZero(c) {
				return false
			}
		}
		return true
	}
	return false
}

// checkAllowed returns a problem for each part of cfg outside Allowed,
// and for content that would not be inline: every file source must be a
// data: URL, since a Revision's digest covers its content and the
// testbed OS applies its config before the network is up.
func checkAllowed(cfg types.Config) []Problem {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return []Problem{{Message: err.Error()}}
	}
	var probs []Problem
	for _, p := range outside(raw, allowed) {
		probs = append(probs, Problem{at: p, Message: "is not allowed in a snippet",
			Hint: reasonFor(p, "a snippet holds files, directories, links, systemd units and users")})
	}
	source := func(at fieldPath, r types.Resource) {
		if r.Source == nil || *r.Source == "" {
			return
		}
		u, err := url.Parse(*r.Source)
		if err != nil || u.Scheme == "data" {
			return // Ignition's validation reports a bad URL
		}
		probs = append(probs, Problem{at: at.with("source"),
			Message: fmt.Sprintf("%s source %q: a snippet's content must be inline", u.Scheme, truncate(*r.Source, 60)),
			Hint: "give it as a data: URL (\"data:,text%0A\" or \"data:;base64,…\"), or as contents.inline in a Container Linux Config: " +
				"a Revision carries all of its content and is applied before the network is up"})
	}
	for i, f := range cfg.Storage.Files {
		at := fieldPath{"storage", "files", i}
		source(at.with("contents"), f.Contents)
		for j, a := range f.Append {
			source(at.with("append", j), a)
		}
	}
	for i, u := range cfg.Passwd.Users {
		if u.ShouldExist != nil && !*u.ShouldExist {
			at := fieldPath{"passwd", "users", i, "shouldExist"}
			probs = append(probs, Problem{at: at, Message: "is not allowed in a snippet", Hint: reasonFor(at, "")})
		}
	}
	return probs
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
