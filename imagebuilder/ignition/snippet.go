package ignition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"reflect"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_3"
	"github.com/coreos/ignition/v2/config/v3_3/types"
	"github.com/coreos/vcontext/tree"
	ct "github.com/flatcar/container-linux-config-transpiler/config"
	ctreport "github.com/flatcar/ignition/config/validate/report"
	"gopkg.in/yaml.v3"
)

// A snippet is a user's piece of Ignition config that Roost merges into
// a config it renders: the enrollment image's --user-config, a
// MachineClass's spec.ignition and spec.containerLinuxConfig. Every
// snippet goes through CheckSnippet (parse, then Allowed, then the
// Reserved paths and units, then the file names of checkSettingsFiles)
// and MergeSnippets; Render runs both.

// MaxSnippetBytes bounds a snippet's text: 128 KiB, half of what the hub
// stores of one object (resource.MaxObjectBytes), since a snippet's
// content grows by a third as the base64 data URLs of the rendered
// config.
const MaxSnippetBytes = 128 << 10

// SnippetFormat says how a Snippet is written.
type SnippetFormat int

const (
	// FormatAuto is Ignition JSON when the text starts with '{', else a
	// Container Linux Config: what the enrollment --user-config takes.
	FormatAuto SnippetFormat = iota
	// FormatIgnition is an Ignition config, spec 3.0.0 to 3.3.0, as JSON,
	// or as YAML of the same structure (converted to JSON).
	FormatIgnition
	// FormatCLC is a Flatcar Container Linux Config (YAML), transpiled by
	// flatcar/container-linux-config-transpiler (Ignition spec 2.3) and
	// translated to spec 3.3 (translate23).
	FormatCLC
)

// Snippet is one user config. Name says where it comes from in errors
// (a file name, "spec.ignition").
type Snippet struct {
	Name   string
	Data   []byte
	Format SnippetFormat
}

// format is s.Format with FormatAuto resolved.
func (s Snippet) format() SnippetFormat {
	if s.Format != FormatAuto {
		return s.Format
	}
	if t := bytes.TrimSpace(s.Data); len(t) > 0 && t[0] == '{' {
		return FormatIgnition
	}
	return FormatCLC
}

// Problem is one reason a snippet is refused.
type Problem struct {
	// Path is the field in the snippet, e.g. "storage.files[2].path"
	// (spec 3 names; for a Container Linux Config the spec 3 field it
	// becomes); "" when the problem is with the whole text.
	Path string
	// Line is the 1-based line of the snippet's text the problem is at
	// (the field's, or its nearest written ancestor's); 0 when unknown.
	Line int
	// Message says what is wrong; Hint, when set, what to do.
	Message, Hint string

	at fieldPath // Path, while the problem is built
}

// String renders p as `line 7: storage.files[2].path: message (hint)`,
// leaving out what is unknown.
func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Path != "" {
		b.WriteString(p.Path + ": ")
	}
	b.WriteString(p.Message)
	if p.Hint != "" {
		b.WriteString(" (" + p.Hint + ")")
	}
	return b.String()
}

// SnippetError is every problem found in one snippet.
type SnippetError struct {
	// Snippet is the snippet's Name.
	Snippet  string
	Problems []Problem
}

// Error is `user config NAME: PROBLEM; PROBLEM…`.
func (e *SnippetError) Error() string {
	s := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		s[i] = p.String()
	}
	return fmt.Sprintf("user config %s: %s", e.Snippet, strings.Join(s, "; "))
}

// SnippetErrors is what MergeSnippets refuses, per snippet.
type SnippetErrors []*SnippetError

func (es SnippetErrors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Parsed is a snippet CheckSnippet accepted, with its config in spec 3.3.
type Parsed struct {
	Snippet
	Config types.Config
	lines  lineIndex
}

// ParseSnippet is CheckSnippet reserving nothing: it returns s's config in
// spec 3.3, or a *SnippetError.
func ParseSnippet(s Snippet) (types.Config, error) {
	p, err := CheckSnippet(s, nil)
	if err != nil {
		return types.Config{}, err
	}
	return p.Config, nil
}

// CheckSnippet parses s and checks it, in this order, stopping after the
// first step that finds problems:
//
//  1. its size (at most MaxSnippetBytes) and syntax: JSON or YAML for
//     FormatIgnition, a Container Linux Config for FormatCLC (unknown
//     fields included);
//  2. for Ignition, the version (3.0.0 to 3.3.0) and the Ignition
//     library's validation (types, absolute and clean paths, nothing
//     under a link the snippet creates, unit names, duplicate entries…);
//     for a Container Linux Config, the transpiler's validation, no
//     Flatcar-only section (flatcarSections), the translation to spec 3.3
//     (translate23) and the library's validation of the result;
//  3. the allow-list (Allowed, checkAllowed: inline content only), the
//     paths and units r reserves (nil reserves nothing), and names
//     systemd would not read (checkSettingsFiles).
//
// It returns the config in spec 3.3, or a *SnippetError listing every
// problem of the failing step, each with the field path and line it is at
// when known.
func CheckSnippet(s Snippet, r *Reserved) (*Parsed, error) {
	p := &Parsed{Snippet: s}
	probs := p.parse()
	if len(probs) == 0 {
		probs = append(probs, checkAllowed(p.Config)...)
		probs = append(probs, checkReserved(p.Config, r)...)
		probs = append(probs, checkSettingsFiles(p.Config)...)
	}
	if len(probs) > 0 {
		return nil, p.fail(probs)
	}
	return p, nil
}

// fail places probs (Path, Line) and wraps them.
func (p *Parsed) fail(probs []Problem) *SnippetError {
	for i := range probs {
		if probs[i].at != nil {
			probs[i].Path = probs[i].at.String()
			if probs[i].Line == 0 {
				probs[i].Line = p.lines.line(probs[i].at)
			}
		}
	}
	return &SnippetError{Snippet: p.Name, Problems: probs}
}

// parse sets p.Config (and p.lines) from p.Data.
func (p *Parsed) parse() []Problem {
	if len(bytes.TrimSpace(p.Data)) == 0 {
		return []Problem{{Message: "is empty", Hint: "remove the field, or give a config"}}
	}
	if n := len(p.Data); n > MaxSnippetBytes {
		return []Problem{{Message: fmt.Sprintf("is %d bytes, more than the limit of %d", n, MaxSnippetBytes),
			Hint: "keep large files out of the snippet: ship them as an Extension, or fetch them from a unit at boot"}}
	}
	if p.format() == FormatCLC {
		return p.parseCLC()
	}
	return p.parseIgnition()
}

// versions are the Ignition spec versions v3_3.ParseCompatibleVersion
// reads.
var versions = []string{"3.0.0", "3.1.0", "3.2.0", "3.3.0"}

func (p *Parsed) parseIgnition() []Problem {
	raw := p.Data
	if bytes.TrimSpace(raw)[0] == '{' {
		p.lines = jsonLines(raw)
	} else {
		var doc any
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			return yamlProblems(err, "YAML syntax error: ")
		}
		m, ok := doc.(map[string]any)
		if !ok {
			return []Problem{{Line: 1, Message: fmt.Sprintf("must be a JSON object or YAML mapping (ignition, storage, systemd, passwd), got %s", describe(doc))}}
		}
		p.lines = yamlLines(raw)
		if _, butane := m["variant"]; butane {
			return []Problem{{at: fieldPath{"variant"}, Message: "this is a Butane config, not an Ignition config",
				Hint: "transpile it with butane and give the Ignition JSON, or write a Container Linux Config in containerLinuxConfig"}}
		}
		var err error
		if raw, err = json.Marshal(doc); err != nil {
			return []Problem{{Message: "cannot convert the YAML to JSON: " + err.Error(), Hint: "use strings for every mapping key"}}
		}
	}
	// Go's decoder first, for syntax and type errors with places.
	var probe types.Config
	if err := json.Unmarshal(raw, &probe); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return []Problem{{Line: lineAt(raw, syn.Offset), Message: "JSON syntax error: " + syn.Error()}}
		case errors.As(err, &typ):
			at := typeErrorPath(jsonLines(raw).pathAt(typ.Offset), typ.Field)
			return []Problem{{at: at, Message: fmt.Sprintf("expected %s, got %s", jsonKind(typ.Type), article(typ.Value))}}
		default:
			return []Problem{{Message: err.Error()}}
		}
	}
	version := fieldPath{"ignition", "version"}
	switch v := probe.Ignition.Version; {
	case v == "":
		hint := `start with "ignition": {"version": "3.3.0"}`
		if p.Format == FormatIgnition {
			hint += "; a Container Linux Config goes into containerLinuxConfig"
		}
		return []Problem{{at: version, Message: "is required", Hint: hint}}
	case !contains(versions, v):
		hint := "write the snippet for spec 3.3.0, the newest Debian's and Flatcar's Ignition 2.14 read"
		if strings.HasPrefix(v, "2.") {
			hint = "spec 2.x is what a Container Linux Config transpiles to: give the Container Linux Config in containerLinuxConfig, or write the snippet for spec 3.3.0"
		}
		return []Problem{{at: version, Message: fmt.Sprintf("unknown Ignition config version %q: Roost reads %s", v, strings.Join(versions, ", ")), Hint: hint}}
	}
	cfg, rpt, err := v3_3.ParseCompatibleVersion(raw)
	var probs []Problem
	for _, e := range rpt.Entries {
		at := contextPath(e.Context.Path)
		switch {
		case e.Kind.IsFatal():
			probs = append(probs, Problem{at: at, Message: e.Message})
		case strings.HasPrefix(e.Message, "unused key "):
			key := strings.TrimPrefix(e.Message, "unused key ")
			probs = append(probs, Problem{at: at, Message: fmt.Sprintf("unknown field %q", key), Hint: unknownFieldHint(key)})
		}
	}
	if err != nil && len(probs) == 0 {
		probs = append(probs, Problem{Message: err.Error()})
	}
	if len(probs) > 0 {
		return probs
	}
	p.Config = cfg
	return nil
}

func (p *Parsed) parseCLC() []Problem {
	p.lines = yamlLines(p.Data)
	looksIgnition := bytes.TrimSpace(p.Data)[0] == '{'
	clc, ast, rpt := ct.Parse(p.Data)
	var probs []Problem
	for _, e := range rpt.Entries {
		switch msg := e.Message; {
		case e.Line == 0 && strings.HasPrefix(msg, "yaml: "):
			probs = append(probs, yamlProblems(errors.New(msg), "YAML syntax error: ")...)
			if looksIgnition {
				probs[len(probs)-1].Hint = "this looks like an Ignition config: give it in spec.ignition"
			}
		case strings.HasPrefix(msg, "Config has unrecognized key: "):
			key := strings.TrimPrefix(msg, "Config has unrecognized key: ")
			hint := unknownFieldHint(key)
			if looksIgnition {
				hint = "this looks like an Ignition config: give it in spec.ignition"
			}
			probs = append(probs, Problem{Line: e.Line, Message: fmt.Sprintf("unknown field %q", key), Hint: hint})
		case e.Kind == ctreport.EntryError:
			probs = append(probs, Problem{Line: e.Line, Message: msg})
		}
	}
	if len(probs) > 0 {
		return probs
	}
	for _, k := range flatcarSections {
		if _, set := p.lines.root.(tree.MapNode).Children[k]; set {
			probs = append(probs, Problem{at: fieldPath{k}, Message: "is not allowed in a snippet",
				Hint: "it configures " + flatcarServices[k] + ", which only Flatcar runs; write the unit or drop-in you need under systemd.units"})
		}
	}
	if len(probs) > 0 {
		return probs
	}
	old, rpt := ct.Convert(clc, "", ast)
	for _, e := range rpt.Entries {
		if e.Kind == ctreport.EntryError {
			probs = append(probs, Problem{Line: e.Line, Message: e.Message})
		}
	}
	if len(probs) > 0 {
		return probs
	}
	cfg, probs := translate23(old)
	if len(probs) > 0 {
		return probs
	}
	// The spec 3.3 library's validation, for what the transpiler lets
	// through (its rules are older).
	if bad := validateProblems(cfg); len(bad) > 0 {
		return bad
	}
	p.Config = cfg
	return nil
}

// flatcarSections are the Container Linux Config sections that configure
// services of Flatcar's own (as drop-ins and files the transpiler
// writes): on another OS they would do nothing, without a word.
var flatcarSections = []string{"docker", "etcd", "flannel", "locksmith", "update"}

var flatcarServices = map[string]string{
	"docker":    "Flatcar's docker.service",
	"etcd":      "Flatcar's etcd-member.service",
	"flannel":   "Flatcar's flanneld.service",
	"locksmith": "Flatcar's locksmithd (reboot coordination, which the hub does)",
	"update":    "Flatcar's update-engine (updates, which the hub rolls out as Revisions)",
}

// validateProblems runs the Ignition library's validation of cfg and
// returns its fatal entries.
func validateProblems(cfg types.Config) []Problem {
	var probs []Problem
	for _, e := range validateReport(cfg).Entries {
		if e.Kind.IsFatal() {
			probs = append(probs, Problem{at: contextPath(e.Context.Path), Message: e.Message})
		}
	}
	return probs
}

// contextPath converts a vcontext path (strings, tree.Key, ints).
func contextPath(c []any) fieldPath {
	var p fieldPath
	for _, e := range c {
		switch t := e.(type) {
		case tree.Key:
			p = append(p, string(t))
		case string, int:
			p = append(p, t)
		default:
			p = append(p, fmt.Sprint(t))
		}
	}
	return p
}

// unknownFieldHint helps with fields of the wrong dialect.
func unknownFieldHint(key string) string {
	switch key {
	case "enable":
		return `spec 3 spells it "enabled"`
	case "filesystem":
		return "spec 3 has no filesystem field: give an absolute path on the root file system"
	case "inline", "remote", "local":
		return `contents.` + key + ` is a Container Linux Config's: in Ignition give contents.source as a data: URL, or put a Container Linux Config in containerLinuxConfig`
	case "ssh_authorized_keys", "password_hash", "home_dir", "no_create_home", "primary_group", "no_user_group", "no_log_init":
		return "this is a Container Linux Config's spelling: Ignition's is camelCase"
	}
	return "check the spelling: docs/customising.md lists the fields a snippet may set"
}

// MergeSnippets merges parsed snippets, in order, into one spec 3.3
// config. No two snippets may write the same path (file, directory or
// link), unit or user: which would win is not obvious, so each entry must
// come from one snippet. A clash is a problem of the later snippet, at
// its entry; the error is a SnippetErrors.
func MergeSnippets(ps []*Parsed) (types.Config, error) {
	type owner struct {
		snippet string
		at      fieldPath
	}
	seen := map[string]owner{}
	var errs SnippetErrors
	for _, p := range ps {
		var probs []Problem
		claim := func(key, what string, at fieldPath) {
			if o, dup := seen[key]; dup && o.snippet != p.Name {
				probs = append(probs, Problem{at: at, Message: fmt.Sprintf("%s is also in %s (%s)", what, o.snippet, o.at),
					Hint: "give each file, directory, link, unit and user in one of them only"})
				return
			}
			seen[key] = owner{p.Name, at}
		}
		st := p.Config.Storage
		for i, f := range st.Files {
			claim("path "+path.Clean(f.Path), fmt.Sprintf("%q", f.Path), fieldPath{"storage", "files", i})
		}
		for i, d := range st.Directories {
			claim("path "+path.Clean(d.Path), fmt.Sprintf("%q", d.Path), fieldPath{"storage", "directories", i})
		}
		for i, l := range st.Links {
			claim("path "+path.Clean(l.Path), fmt.Sprintf("%q", l.Path), fieldPath{"storage", "links", i})
		}
		for i, u := range p.Config.Systemd.Units {
			claim("unit "+u.Name, "unit "+u.Name, fieldPath{"systemd", "units", i})
		}
		for i, u := range p.Config.Passwd.Users {
			claim("user "+u.Name, "user "+u.Name, fieldPath{"passwd", "users", i})
		}
		if len(probs) > 0 {
			errs = append(errs, p.fail(probs))
		}
	}
	if len(errs) > 0 {
		return types.Config{}, errs
	}
	cfg := types.Config{Ignition: types.Ignition{Version: SpecVersion}}
	for _, p := range ps {
		cfg = v3_3.Merge(cfg, p.Config)
	}
	cfg.Ignition.Version = SpecVersion
	return cfg, nil
}

// typeErrorPath completes near, the path of the value a JSON type error's
// offset falls in, with the fields of field (the error's path without
// list indexes, "storage.files.mode") that lie below it.
func typeErrorPath(near fieldPath, field string) fieldPath {
	var names []string
	for _, s := range strings.Split(field, ".") {
		if s != "" && !(s[0] >= 'A' && s[0] <= 'Z') { // not an embedded struct's name
			names = append(names, s)
		}
	}
	n := 0
	for _, e := range near {
		if s, ok := e.(string); ok {
			if n >= len(names) || names[n] != s {
				return near
			}
			n++
		}
	}
	out := near.with()
	for _, s := range names[n:] {
		out = append(out, s)
	}
	// The error is about the value at field, not an item inside it.
	for len(out) > 0 && len(names) > 0 {
		if _, item := out[len(out)-1].(int); !item || out[len(out)-2] != names[len(names)-1] {
			break
		}
		out = out[:len(out)-1]
	}
	return out
}

// article puts "a" or "an" before a JSON type name ("string", "number").
func article(kind string) string {
	if strings.ContainsAny(kind[:min(1, len(kind))], "aeiou") {
		return "an " + kind
	}
	return "a " + kind
}

// lineAt is the 1-based line of byte offset off in data.
func lineAt(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return t.String()
}

func describe(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int64, uint64, float64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
