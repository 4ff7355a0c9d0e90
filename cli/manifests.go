package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// stdinSource names standard input in messages.
const stdinSource = "<stdin>"

// manifestExts are the file name extensions read from a directory.
var manifestExts = map[string]bool{".yaml": true, ".yml": true, ".json": true}

// input is the content of one manifest file.
type input struct {
	source string
	data   []byte
}

// readInputs reads every -f argument: a file, a directory (its *.yaml,
// *.yml and *.json files, sorted by name, not recursive) or "-" for
// standard input. It reports every unreadable path at once.
func (o *options) readInputs(paths []string) ([]input, error) {
	if len(paths) == 0 {
		return nil, usageErrorf("no manifests given: pass -f FILE, -f DIR or -f - (standard input)")
	}
	var (
		out     []input
		errs    []string
		readStd bool
		// seen maps every file read to how it was named first ("-f FILE"
		// or "directory DIR"), so that a file named twice (directly, or also
		// through its directory) is reported instead of yielding every
		// object in it twice.
		seen = map[string]string{}
	)
	// once records that the file name (given as -f, or found in the
	// directory dir) is read; it reports a file read before.
	once := func(name, dir string) bool {
		key := name
		if abs, err := filepath.Abs(name); err == nil {
			key = abs
		}
		how := "-f " + name
		if dir != "" {
			how = "directory " + dir
		}
		first, dup := seen[key]
		switch {
		case !dup:
			seen[key] = how
			return true
		case first == how:
			errs = append(errs, fmt.Sprintf("%s: given twice (%s); remove one", name, how))
		default:
			errs = append(errs, fmt.Sprintf("%s: given twice, by %s and by %s; remove one", name, first, how))
		}
		return false
	}
	for _, p := range paths {
		if p == "-" {
			if readStd {
				errs = append(errs, "-f - (standard input) given more than once")
				continue
			}
			readStd = true
			data, err := io.ReadAll(o.In)
			if err != nil {
				errs = append(errs, fmt.Sprintf("read standard input: %v", err))
				continue
			}
			out = append(out, input{source: stdinSource, data: data})
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			errs = append(errs, pathError(err))
			continue
		}
		if !st.IsDir() {
			if !once(p, "") {
				continue
			}
			data, err := os.ReadFile(p)
			if err != nil {
				errs = append(errs, pathError(err))
				continue
			}
			out = append(out, input{source: p, data: data})
			continue
		}
		entries, err := os.ReadDir(p) // sorted by name
		if err != nil {
			errs = append(errs, pathError(err))
			continue
		}
		found := 0
		for _, e := range entries {
			if e.IsDir() || !manifestExts[strings.ToLower(filepath.Ext(e.Name()))] {
				continue
			}
			name := filepath.Join(p, e.Name())
			if !once(name, p) {
				found++
				continue
			}
			data, err := os.ReadFile(name)
			if err != nil {
				errs = append(errs, pathError(err))
				continue
			}
			found++
			out = append(out, input{source: name, data: data})
		}
		if found == 0 {
			errs = append(errs, fmt.Sprintf("%s: directory holds no *.yaml, *.yml or *.json files", p))
		}
	}
	if len(errs) > 0 {
		return nil, usageErrorf("%s", strings.Join(errs, "\n  "))
	}
	return out, nil
}

// manifestSources names the -f arguments in messages: "a.yaml, dir/" or
// "standard input".
func manifestSources(paths []string) string {
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = p
		if p == "-" {
			names[i] = "standard input"
		}
	}
	return strings.Join(names, ", ")
}

func pathError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s: %v", pe.Path, pe.Err)
	}
	return err.Error()
}

// decodeInputs decodes every input, returning the objects that decoded and
// the problems of all inputs.
func decodeInputs(inputs []input, opts ...resource.DecodeOption) ([]*resource.Manifest, resource.Diagnostics) {
	var (
		ms    []*resource.Manifest
		diags resource.Diagnostics
	)
	for _, in := range inputs {
		got, err := resource.Decode(in.data, in.source, opts...)
		ms = append(ms, got...)
		if err != nil {
			var ds resource.Diagnostics
			if errors.As(err, &ds) {
				diags = append(diags, ds...)
			} else {
				diags = append(diags, resource.Diagnostic{Source: in.source, Violation: apierror.Violation{Message: err.Error()}})
			}
		}
	}
	return ms, diags
}

// sortDiagnostics orders problems as the inputs were given, then by
// document, line and column, so that they read top to bottom.
func sortDiagnostics(inputs []input, diags resource.Diagnostics) {
	order := map[string]int{}
	for i, in := range inputs {
		order[in.source] = i
	}
	sort.SliceStable(diags, func(i, j int) bool {
		a, b := diags[i], diags[j]
		if order[a.Source] != order[b.Source] {
			return order[a.Source] < order[b.Source]
		}
		if a.Doc != b.Doc {
			return a.Doc < b.Doc
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}

// printDiagnostics writes the summary line and one problem per line.
func (o *options) printDiagnostics(summary string, diags resource.Diagnostics) {
	fmt.Fprintf(o.Err, "error: %s\n", summary)
	io.WriteString(o.Err, resource.FormatViolations(diags))
}

func problems(n int) string {
	if n == 1 {
		return "1 problem"
	}
	return strconv.Itoa(n) + " problems"
}

// objectsField matches the field path of a violation the hub reports about
// one object of a request: "objects[2].spec.cluster".
var objectsField = regexp.MustCompile(`^objects\[(\d+)\](?:\.(.*))?$`)

// locateViolations maps the hub's violations, whose fields are
// "objects[I].PATH", to the manifest the I-th object came from and to the
// line and column of PATH in it. Violations that name no object in range
// come back unchanged in rest.
func locateViolations(ms []*resource.Manifest, vs []apierror.Violation) (located resource.Diagnostics, rest []apierror.Violation) {
	type placed struct {
		manifest int
		d        resource.Diagnostic
	}
	var ps []placed
	for _, v := range vs {
		sub := objectsField.FindStringSubmatch(v.Field)
		if sub == nil {
			rest = append(rest, v)
			continue
		}
		i, err := strconv.Atoi(sub[1])
		if err != nil || i < 0 || i >= len(ms) {
			rest = append(rest, v)
			continue
		}
		m := ms[i]
		path := sub[2]
		d := resource.Diagnostic{
			Source:    m.Source,
			Doc:       m.Doc,
			Position:  m.Pos(path),
			Name:      m.Name(),
			Violation: apierror.Violation{Field: path, Message: v.Message, Hint: v.Hint},
		}
		if m.Kind != nil {
			d.Kind = m.Kind.Name
		}
		ps = append(ps, placed{i, d})
	}
	// In the order of the manifests, and of the lines in each (the hub
	// lists an object's violations by field name).
	sort.SliceStable(ps, func(a, b int) bool {
		pa, pb := ps[a], ps[b]
		if pa.manifest != pb.manifest {
			return pa.manifest < pb.manifest
		}
		if pa.d.Position.Line != pb.d.Position.Line {
			return pa.d.Position.Line < pb.d.Position.Line
		}
		return pa.d.Position.Column < pb.d.Position.Column
	})
	for _, p := range ps {
		located = append(located, p.d)
	}
	return located, rest
}

// objectsOf returns the objects of manifests, in order.
func objectsOf(ms []*resource.Manifest) []*roostv1.Object {
	out := make([]*roostv1.Object, len(ms))
	for i, m := range ms {
		out[i] = m.Object
	}
	return out
}

// ref renders a kind and name the way kubectl does: "pool/workers".
func ref(kind, name string) string {
	if k, err := resource.Lookup(kind); err == nil {
		kind = k.Singular
	} else {
		kind = strings.ToLower(kind)
	}
	return kind + "/" + name
}
