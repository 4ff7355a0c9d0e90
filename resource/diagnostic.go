package resource

import (
	"fmt"
	"strings"

	"github.com/roostfleet/roost/apierror"
)

// Position is a place in a YAML source: Line and Column are 1-based, as
// gopkg.in/yaml.v3 reports them (Column counts characters). The zero
// Position means "unknown".
type Position struct {
	Line, Column int
}

// Diagnostic is one problem found in a manifest: a field violation located
// in its source file.
type Diagnostic struct {
	// Source is the file name given to Decode, e.g. "pool.yaml".
	Source string
	// Doc is the 0-based index of the YAML document in Source.
	Doc int
	// Position is where the problem is; zero when unknown.
	Position
	// Kind and Name identify the object ("Pool", "workers"); either may be
	// empty when the document did not say.
	Kind, Name string
	// Violation holds the field path (see the package's field path
	// convention), the message and an optional hint that says how to fix it.
	apierror.Violation
}

// String renders d on one line, like a compiler:
//
//	pool.yaml:12:5: Pool "workers": spec.rollout.maxUnavailable: must be ≥ 1, got 0
//
// The line and column are left out when unknown, the kind and name when the
// document gave none, the field path when the problem is with the whole
// document; a hint follows the message in parentheses.
func (d Diagnostic) String() string {
	var b strings.Builder
	src := d.Source
	if src == "" {
		src = "<input>"
	}
	b.WriteString(src)
	if d.Line > 0 {
		fmt.Fprintf(&b, ":%d", d.Line)
		if d.Column > 0 {
			fmt.Fprintf(&b, ":%d", d.Column)
		}
	}
	b.WriteString(": ")
	if d.Kind != "" {
		b.WriteString(d.Kind)
		if d.Name != "" {
			fmt.Fprintf(&b, " %q", d.Name)
		}
		b.WriteString(": ")
	}
	if d.Field != "" {
		b.WriteString(d.Field)
		b.WriteString(": ")
	}
	b.WriteString(d.Message)
	if d.Hint != "" {
		b.WriteString(" (")
		b.WriteString(d.Hint)
		b.WriteString(")")
	}
	return b.String()
}

// Diagnostics is a list of problems; as an error it prints one problem per
// line (see FormatViolations).
type Diagnostics []Diagnostic

// Error implements error: FormatViolations without the final newline.
func (ds Diagnostics) Error() string {
	return strings.TrimSuffix(FormatViolations(ds), "\n")
}

// Violations returns the plain field violations, for apierror.Invalid;
// source positions are dropped (Error keeps them, for people).
func (ds Diagnostics) Violations() []apierror.Violation {
	out := make([]apierror.Violation, len(ds))
	for i, d := range ds {
		out[i] = d.Violation
	}
	return out
}

// FormatViolations renders every diagnostic with Diagnostic.String, each
// followed by a newline; it returns "" for none.
func FormatViolations(ds []Diagnostic) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	return b.String()
}
