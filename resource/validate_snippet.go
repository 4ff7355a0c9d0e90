package resource

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/imagebuilder/ignition"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// The fields of a MachineClass that hold snippets of Ignition config.
const (
	FieldIgnition             = "spec.ignition"
	FieldContainerLinuxConfig = "spec.containerLinuxConfig"
)

// MachineClassSnippets are the snippets of a MachineClass spec, in the
// order they merge into its Revisions: spec.containerLinuxConfig (a
// Container Linux Config), then spec.ignition (Ignition spec 3.0 to 3.3,
// JSON or YAML). Each is named by its field path; unset fields give none.
func MachineClassSnippets(s *roostv1.MachineClassSpec) []ignition.Snippet {
	var out []ignition.Snippet
	if c := s.GetContainerLinuxConfig(); c != "" {
		out = append(out, ignition.Snippet{Name: FieldContainerLinuxConfig, Data: []byte(c), Format: ignition.FormatCLC})
	}
	if c := s.GetIgnition(); c != "" {
		out = append(out, ignition.Snippet{Name: FieldIgnition, Data: []byte(c), Format: ignition.FormatIgnition})
	}
	return out
}

// validateSnippets checks a MachineClass's snippets as the hub renders
// them into every Revision of the class (hub/revisions): together at most
// ignition.MaxSnippetBytes, each accepted by ignition.CheckSnippet with
// ignition.RevisionReserved (syntax, version, the allow-list, nothing the
// hub writes itself), and no file, directory, link, unit or user in both
// (ignition.MergeSnippets). Each problem is a violation of the snippet's
// field; its message starts with "line N: ", N counting the snippet's own
// lines, when the line is known, then the path inside the snippet:
//
//	spec.ignition: line 3: storage.files[0].path: "/etc/kubernetes/x": the hub writes … (remove the entry; …)
//
// (ValidateManifests moves such a violation to its line in the manifest
// when the snippet is written as a literal block, "|").
func validateSnippets(e *violations, s *roostv1.MachineClassSpec) {
	snips := MachineClassSnippets(s)
	if len(snips) == 2 {
		if n := len(snips[0].Data) + len(snips[1].Data); n > ignition.MaxSnippetBytes {
			e.addf(FieldIgnition, "keep large files out of the snippets: ship them as an Extension, or fetch them from a unit at boot",
				"%s and %s take %d bytes together, more than the limit of %d", FieldContainerLinuxConfig, FieldIgnition, n, ignition.MaxSnippetBytes)
			return
		}
	}
	reserved := ignition.RevisionReserved()
	var parsed []*ignition.Parsed
	for _, sn := range snips {
		p, err := ignition.CheckSnippet(sn, reserved)
		if err != nil {
			addSnippetError(e, err)
			continue
		}
		parsed = append(parsed, p)
	}
	if len(parsed) == len(snips) && len(parsed) > 1 {
		if _, err := ignition.MergeSnippets(parsed); err != nil {
			addSnippetError(e, err)
		}
	}
}

// addSnippetError adds the problems of a *ignition.SnippetError or
// ignition.SnippetErrors as violations of the snippets' fields (their
// names).
func addSnippetError(e *violations, err error) {
	var list ignition.SnippetErrors
	var one *ignition.SnippetError
	switch {
	case errors.As(err, &list):
	case errors.As(err, &one):
		list = ignition.SnippetErrors{one}
	default:
		e.add("spec", err.Error(), "")
		return
	}
	for _, se := range list {
		for _, p := range se.Problems {
			msg := p.Message
			if p.Path != "" {
				msg = p.Path + ": " + msg
			}
			if p.Line > 0 {
				msg = fmt.Sprintf("line %d: %s", p.Line, msg)
			}
			e.add(se.Snippet, msg, p.Hint)
		}
	}
}

// textLine matches the "line N: " a violation inside a block of text
// starts with (see validateSnippets).
var textLine = regexp.MustCompile(`^line (\d+): `)

// locate is where violation v is in m, and v as a diagnostic there says
// it: at its field (Pos); but a violation inside a block of text whose
// message starts with "line N: " is at line N of that text, when the
// field was written as a literal block scalar (TextLines), its message
// then without the "line N: ".
func (m *Manifest) locate(v apierror.Violation) (Position, apierror.Violation) {
	pos := m.Pos(v.Field)
	first, ok := m.TextLines[v.Field]
	if !ok {
		return pos, v
	}
	match := textLine.FindStringSubmatch(v.Message)
	if match == nil {
		return pos, v
	}
	n, err := strconv.Atoi(match[1])
	if err != nil || n < 1 {
		return pos, v
	}
	v.Message = v.Message[len(match[0]):]
	return Position{Line: first + n - 1}, v
}
