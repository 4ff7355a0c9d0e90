package ignition

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	vjson "github.com/coreos/vcontext/json"
	"github.com/coreos/vcontext/tree"
	vyaml "github.com/coreos/vcontext/yaml"
)

// fieldPath is a place inside a snippet: field names (string) and list
// indexes (int), e.g. {"storage", "files", 2, "path"}.
type fieldPath []any

// String renders p the way Roost's field paths read:
// "storage.files[2].path".
func (p fieldPath) String() string {
	var b strings.Builder
	for _, e := range p {
		if i, ok := e.(int); ok {
			fmt.Fprintf(&b, "[%d]", i)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		fmt.Fprint(&b, e)
	}
	return b.String()
}

// with returns p followed by more, without sharing p's array.
func (p fieldPath) with(more ...any) fieldPath {
	return append(append(fieldPath(nil), p...), more...)
}

// lineIndex finds where a field path is written in a snippet's text.
// The zero lineIndex knows no lines.
type lineIndex struct{ root tree.Node }

// jsonLines indexes JSON text; nil root when it does not parse.
func jsonLines(data []byte) lineIndex {
	n, err := vjson.UnmarshalToContext(data)
	if err != nil {
		return lineIndex{}
	}
	return lineIndex{n}
}

// yamlLines indexes YAML text; nil root when it does not parse.
func yamlLines(data []byte) lineIndex {
	n, err := vyaml.UnmarshalToContext(data)
	if err != nil {
		return lineIndex{}
	}
	return lineIndex{n}
}

// line is the 1-based line where p is written: the line of its key
// (field) or item (list index), or of its deepest ancestor written when p
// itself is not (a default, or a field a translation added). A field
// missing under its name is looked up in snake_case too, as a Container
// Linux Config spells it ("sshAuthorizedKeys" as "ssh_authorized_keys").
// 0 when not even p's first element is written.
func (x lineIndex) line(p fieldPath) int {
	n, line := x.root, 0
	for _, e := range p {
		switch t := n.(type) {
		case tree.MapNode:
			k, ok := e.(string)
			if !ok {
				return line
			}
			c, found := t.Children[k]
			if !found {
				k = snakeCase(k)
				if c, found = t.Children[k]; !found {
					return line
				}
			}
			if l := startLine(t.Keys[k].Marker); l > 0 {
				line = l
			} else if c != nil {
				line = startLine(c.GetMarker())
			}
			n = c
		case tree.SliceNode:
			i, ok := e.(int)
			if !ok || i < 0 || i >= len(t.Children) || t.Children[i] == nil {
				return line
			}
			n = t.Children[i]
			if l := startLine(n.GetMarker()); l > 0 {
				line = l
			}
		default:
			return line
		}
	}
	return line
}

// pathAt is the path of the deepest value whose text spans byte offset
// off of JSON text x was built from (jsonLines); nil when none.
func (x lineIndex) pathAt(off int64) fieldPath {
	var p fieldPath
	n := x.root
	for n != nil {
		var next tree.Node
		switch t := n.(type) {
		case tree.MapNode:
			for k, c := range t.Children {
				if c != nil && spans(c.GetMarker(), off) {
					p, next = append(p, k), c
					break
				}
			}
		case tree.SliceNode:
			for i, c := range t.Children {
				if c != nil && spans(c.GetMarker(), off) {
					p, next = append(p, i), c
					break
				}
			}
		}
		n = next
	}
	return p
}

func spans(m tree.Marker, off int64) bool {
	return m.StartP != nil && m.EndP != nil && m.StartP.Index <= off && off <= m.EndP.Index
}

func startLine(m tree.Marker) int {
	l, _ := m.Start()
	return int(l)
}

// snakeCase is "sshAuthorizedKeys" as "ssh_authorized_keys".
func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// yamlErrorLine matches the line in gopkg.in/yaml.v3's error texts:
// "yaml: line 3: did not find …" and, in an unmarshal error's list,
// "line 4: cannot unmarshal …".
var yamlErrorLine = regexp.MustCompile(`^(yaml: )?line (\d+): (.*)$`)

// yamlParserProblems are the syntax errors for which yaml.v3 v3.0.1 prints
// a 0-based line number (its parser's, as opposed to its scanner's, which
// are 1-based); resource/codec.go corrects them the same way.
var yamlParserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"found duplicate %YAML directive":        true,
	"found duplicate %TAG directive":         true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// yamlUnmarshal matches yaml.v3's type errors:
// "cannot unmarshal !!str `nope` into int", "cannot unmarshal !!seq into
// int".
var yamlUnmarshal = regexp.MustCompile("^cannot unmarshal !!(\\w+)( `(.*)`)? into (.+)$")

// goKind names what a Go type (as yaml.v3 prints it) is written as.
func goKind(t string) string {
	switch {
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"), strings.HasPrefix(t, "float"), strings.HasPrefix(t, "*int"):
		return "a number"
	case t == "bool", t == "*bool":
		return "true or false"
	case t == "string", t == "*string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	}
	return "a mapping"
}

// yamlProblems turns a gopkg.in/yaml.v3 error into problems, one per line
// of its text, each at the line it names; prefix starts the message of a
// syntax error.
func yamlProblems(err error, prefix string) []Problem {
	var out []Problem
	for _, l := range strings.Split(err.Error(), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l == "yaml: unmarshal errors:" {
			continue
		}
		p := Problem{Message: prefix + strings.TrimPrefix(l, "yaml: ")}
		if m := yamlErrorLine.FindStringSubmatch(l); m != nil {
			p.Line, _ = strconv.Atoi(m[2])
			p.Message = m[3]
			if m[1] != "" { // "yaml: line N: …", a syntax error
				p.Message = prefix + m[3]
			}
			if m[1] != "" && yamlParserProblems[m[3]] {
				p.Line++
			}
			if u := yamlUnmarshal.FindStringSubmatch(m[3]); u != nil {
				// a type error, not a syntax error
				got := fmt.Sprintf("%q", u[3])
				switch u[1] {
				case "seq":
					got = "a list"
				case "map":
					got = "a mapping"
				}
				p.Message = fmt.Sprintf("expected %s, got %s", goKind(u[4]), got)
			}
		}
		out = append(out, p)
	}
	return out
}
