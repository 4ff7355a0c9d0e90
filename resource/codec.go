package resource

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"gopkg.in/yaml.v3"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Manifest is one object read from a YAML (or JSON) manifest.
type Manifest struct {
	// Object is the decoded object.
	Object *roostv1.Object
	// Kind is the object's kind.
	Kind *Kind
	// Source is the file name given to Decode.
	Source string
	// Doc is the 0-based index of the YAML document in Source (items of a
	// kind: List document share their document's index).
	Doc int
	// Positions maps the field path (see the package's field path
	// convention) of every field written in the manifest to where it was
	// written: the key for fields and map entries, the item for list items.
	// The path "" is the object's own mapping.
	Positions map[string]Position
	// TextLines maps the field path of every string field written as a
	// literal block scalar ("|") to the line of the value's first line:
	// line k of the value is line TextLines[path]+k-1 of the source.
	TextLines map[string]int
}

// Name returns the object's metadata.name.
func (m *Manifest) Name() string { return NameOf(m.Object) }

// Pos returns the position of path, or of its nearest ancestor that was
// written in the manifest (at worst the object itself) when the path has no
// position of its own, e.g. a required field that is missing.
func (m *Manifest) Pos(path string) Position {
	for {
		if p, ok := m.Positions[path]; ok {
			return p
		}
		if path == "" {
			return Position{}
		}
		path = parentPath(path)
	}
}

// DecodeOption changes how Decode reads manifests.
type DecodeOption func(*decodeConfig)

type decodeConfig struct {
	apply     bool
	namesOnly bool
}

// ForApply makes Decode read manifests as input to `roostctl apply`: it
// refuses kinds that are not appliable (Server, Machine, ImageRelease,
// EnrollmentToken, Lease are written by the hub). What the hub writes of an
// appliable object, so that the output of `roostctl get -o yaml` applies
// as it is: a status section and the metadata fields generation,
// createIndex and creationTimestamp are checked like any field (types,
// unknown fields) and then dropped from the decoded object. metadata.uid
// and metadata.modifyIndex are kept: when set, the hub applies the object
// only if the stored object still has them (modifyIndex: not changed since
// it was read, like Kubernetes' resourceVersion; uid: not deleted and
// created again since; a uid is ignored for a create). Without ForApply
// Decode reads anything Encode writes and keeps all of it.
func ForApply() DecodeOption { return func(c *decodeConfig) { c.apply = true } }

// NamesOnly makes Decode read only what identifies each object: apiVersion,
// kind and metadata.name (a non-empty string). Everything else in the
// documents is ignored, not even checked, and the objects returned carry
// just their name. `roostctl delete -f` uses it, so that a manifest whose
// spec no longer validates still names what to delete.
func NamesOnly() DecodeOption { return func(c *decodeConfig) { c.namesOnly = true } }

// dropIgnoredOnApply clears what an apply ignores in r: its status and the
// metadata only the hub writes that plays no part in the preconditions
// (createIndex, creationTimestamp). uid, modifyIndex and generation stay:
// the hub checks them (see hub/state checkPreconditions).
func dropIgnoredOnApply(r Resource) {
	m := r.ProtoReflect()
	m.Clear(m.Descriptor().Fields().ByName("status"))
	if md := r.GetMetadata(); md != nil {
		md.CreateIndex = 0
		md.CreationTimestamp = nil
	}
}

// maxDecodeNodes bounds the YAML nodes one document may expand to through
// aliases, so that "billion laughs" documents fail instead of exhausting
// memory.
const maxDecodeNodes = 1 << 20

// Decode reads a stream of YAML documents (JSON is YAML too) separated by
// "---". Each document is one object (apiVersion roost.io/v1, a kind from
// Kinds, metadata, spec, optionally status), or a kind: List whose items are
// objects, as kubectl writes them. Empty documents are skipped. source names
// the input in diagnostics (a file name, "-" for standard input).
//
// Field names are the proto fields' JSON (lowerCamel) names; values are
// typed strictly (a quoted "3" is not an integer, an unquoted 1.30 is not a
// string). google.protobuf.Duration is a Go duration string ("30s", "4h"),
// google.protobuf.Timestamp an RFC 3339 string, IntOrString a plain integer
// or string scalar; a null value leaves a field unset; optional fields keep
// an explicit zero.
//
// Decode returns the objects that decoded without problems, and, when any
// document had problems, a Diagnostics error listing every problem found
// (not just the first): YAML syntax errors (which end the stream), unknown
// or missing kind and apiVersion, unknown fields (with the closest known
// field name), duplicate keys, wrong types, integers out of range, malformed
// durations and timestamps, and with ForApply the refusals it describes.
// Decode does not validate values (see Validate and ValidateManifests).
func Decode(data []byte, source string, opts ...DecodeOption) ([]*Manifest, error) {
	var cfg decodeConfig
	for _, o := range opts {
		o(&cfg)
	}
	var (
		out   []*Manifest
		diags Diagnostics
	)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for doc := 0; ; doc++ {
		var n yaml.Node
		err := decodeNode(dec, &n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			diags = append(diags, syntaxDiagnostic(source, doc, err))
			break
		}
		root := &n
		if n.Kind == yaml.DocumentNode {
			if len(n.Content) == 0 {
				continue
			}
			root = n.Content[0]
		}
		if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
			continue // empty document, or only comments
		}
		d := &decoder{cfg: cfg, source: source, doc: doc}
		out = append(out, d.document(root)...)
		diags = append(diags, d.diags...)
	}
	if len(diags) > 0 {
		return out, diags
	}
	return out, nil
}

// decodeNode reads the next document, turning a panic in the YAML parser
// into an error.
func decodeNode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	return dec.Decode(n)
}

var yamlLineError = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlParserProblems are the problems yaml.v3's parser (as opposed to its
// scanner) reports. For these, yaml.v3 v3.0.1 prints a 0-based line number
// (the line where the enclosing flow or block collection starts, or where
// the problem is), while scanner errors carry a 1-based one.
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

// syntaxDiagnostic turns a yaml.v3 parse error ("yaml: line 4: ...") into a
// Diagnostic at that (1-based) line.
func syntaxDiagnostic(source string, doc int, err error) Diagnostic {
	d := Diagnostic{Source: source, Doc: doc}
	msg := err.Error()
	if m := yamlLineError.FindStringSubmatch(msg); m != nil {
		d.Line, _ = strconv.Atoi(m[1])
		msg = m[2]
		if yamlParserProblems[msg] {
			d.Line++
		}
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	d.Message = "YAML syntax error: " + msg
	return d
}

// decoder decodes one YAML document.
type decoder struct {
	cfg        decodeConfig
	source     string
	doc        int
	diags      Diagnostics
	kind, name string              // of the object being decoded, for diagnostics
	pos        map[string]Position // of the object being decoded
	text       map[string]int      // of the object being decoded: Manifest.TextLines
	nodes      int                 // nodes visited, against maxDecodeNodes
	exhausted  bool
}

func posOf(n *yaml.Node) Position { return Position{Line: n.Line, Column: n.Column} }

// errorf records a problem at node n (which may be nil).
func (d *decoder) errorf(n *yaml.Node, path, hint, format string, a ...any) {
	diag := Diagnostic{
		Source: d.source, Doc: d.doc, Kind: d.kind, Name: d.name,
		Violation: apierror.Violation{Field: path, Message: fmt.Sprintf(format, a...), Hint: hint},
	}
	if n != nil {
		diag.Position = posOf(n)
	}
	d.diags = append(d.diags, diag)
}

// deref follows aliases and counts nodes; it returns nil once the budget is
// spent (after reporting it once).
func (d *decoder) deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n == nil || n.Kind == yaml.AliasNode {
		return nil
	}
	d.nodes++
	if d.nodes > maxDecodeNodes {
		if !d.exhausted {
			d.exhausted = true
			d.errorf(n, "", "split the document or expand fewer aliases",
				"document expands to more than %d YAML nodes", maxDecodeNodes)
		}
		return nil
	}
	return n
}

// lookup returns the value of key in mapping n, and the key node.
func lookup(n *yaml.Node, key string) (k, v *yaml.Node) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Kind == yaml.ScalarNode && n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

// document decodes one document's root node into zero or more manifests.
func (d *decoder) document(root *yaml.Node) []*Manifest {
	root = d.deref(root)
	if root == nil {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		d.errorf(root, "", "", "a manifest must be a map with apiVersion, kind, metadata and spec, got %s", describeNode(root))
		return nil
	}
	if _, kv := lookup(root, "kind"); kv != nil && kv.Kind == yaml.ScalarNode && kv.Value == "List" {
		return d.list(root)
	}
	if m := d.object(root); m != nil {
		return []*Manifest{m}
	}
	return nil
}

// list decodes a kind: List document. Its apiVersion is APIVersion, or
// "v1" as kubectl writes a List (its items still need APIVersion).
func (d *decoder) list(root *yaml.Node) []*Manifest {
	d.kind = "List"
	if _, v := lookup(root, "apiVersion"); v == nil || v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" || v.Value != "v1" {
		d.checkAPIVersion(root)
	}
	var items *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "apiVersion", "kind":
		case "items":
			items = d.deref(v)
		case "metadata":
			// kubectl writes an empty metadata on lists.
		default:
			d.errorf(k, k.Value, `a List has only apiVersion, kind and items`, "unknown field %q", k.Value)
		}
	}
	if items == nil || (items.Kind == yaml.ScalarNode && items.ShortTag() == "!!null") {
		return nil
	}
	if items.Kind != yaml.SequenceNode {
		d.errorf(items, "items", "", "expected list, got %s", describeNode(items))
		return nil
	}
	var out []*Manifest
	for _, item := range items.Content {
		item = d.deref(item)
		if item == nil {
			break
		}
		d.kind = ""
		if item.Kind != yaml.MappingNode {
			d.errorf(item, "", "", "a List item must be a map with apiVersion, kind, metadata and spec, got %s", describeNode(item))
			continue
		}
		if m := d.object(item); m != nil {
			out = append(out, m)
		}
	}
	return out
}

// checkAPIVersion reports a missing or wrong apiVersion; it says whether
// the apiVersion is right.
func (d *decoder) checkAPIVersion(root *yaml.Node) bool {
	k, v := lookup(root, "apiVersion")
	if k == nil {
		d.errorf(root, "apiVersion", "add \"apiVersion: "+APIVersion+"\"", "is required")
		return false
	}
	if v = d.deref(v); v == nil {
		return false
	}
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		d.errorf(v, "apiVersion", "use \""+APIVersion+"\"", "expected string, got %s", describeNode(v))
		return false
	}
	if v.Value != APIVersion {
		d.errorf(v, "apiVersion", "use \""+APIVersion+"\"", "unsupported apiVersion %q", v.Value)
		return false
	}
	return true
}

// object decodes one object's mapping; it returns nil when it had problems.
func (d *decoder) object(root *yaml.Node) *Manifest {
	before := len(d.diags)
	d.kind, d.name = "", ""
	if _, md := lookup(root, "metadata"); md != nil && md.Kind == yaml.MappingNode {
		if _, nv := lookup(md, "name"); nv != nil && nv.Kind == yaml.ScalarNode {
			d.name = nv.Value
		}
	}
	kk, kv := lookup(root, "kind")
	var kind *Kind
	switch {
	case kk == nil:
		d.errorf(root, "kind", "one of "+strings.Join(KindNames(), ", "), "is required")
	case kv.Kind != yaml.ScalarNode || kv.ShortTag() != "!!str":
		d.errorf(kv, "kind", "one of "+strings.Join(KindNames(), ", "), "expected string, got %s", describeNode(kv))
	default:
		kind = kindByName(kv.Value)
		if kind == nil {
			hint := "known kinds: " + strings.Join(KindNames(), ", ")
			if s := suggest(kv.Value, KindNames()); s != "" {
				hint = fmt.Sprintf("did you mean %q? %s", s, hint)
			}
			d.errorf(kv, "kind", hint, "unknown kind %q", kv.Value)
		} else {
			d.kind = kind.Name
		}
	}
	d.checkAPIVersion(root)
	if kind == nil {
		return nil
	}
	if d.cfg.apply && !kind.Appliable {
		var names []string
		for _, k := range kinds {
			if k.Appliable {
				names = append(names, k.Name)
			}
		}
		if kind.Name == "Extension" {
			d.errorf(kv, "kind", "push the image with 'roostctl extension push NAME-VERSION.raw'",
				"Extensions are pushed with their signed image, not applied")
			return nil
		}
		d.errorf(kv, "kind", "appliable kinds: "+strings.Join(names, ", "),
			"%s objects are written by the hub and cannot be applied", kind.Name)
		return nil
	}
	d.pos = map[string]Position{"": posOf(root)}
	d.text = map[string]int{}
	r := kind.New()
	if d.cfg.namesOnly {
		d.nameOnly(root, r)
	} else {
		d.message(root, r.ProtoReflect(), "")
	}
	if len(d.diags) > before {
		return nil
	}
	if d.cfg.apply && !d.cfg.namesOnly {
		dropIgnoredOnApply(r)
	}
	return &Manifest{Object: kind.Wrap(r), Kind: kind, Source: d.source, Doc: d.doc, Positions: d.pos, TextLines: d.text}
}

// nameOnly sets r's metadata.name from the object's mapping root, for
// NamesOnly, and reports a missing or malformed name.
func (d *decoder) nameOnly(root *yaml.Node, r Resource) {
	const hint = "name the object to delete with metadata.name"
	mk, md := lookup(root, "metadata")
	md = d.deref(md)
	if md == nil || md.Kind != yaml.MappingNode {
		at := root
		if mk != nil {
			at = mk
		}
		d.errorf(at, "metadata.name", hint, "is required")
		return
	}
	d.pos["metadata"] = posOf(mk)
	nk, nv := lookup(md, "name")
	nv = d.deref(nv)
	switch {
	case nv == nil:
		d.errorf(mk, "metadata.name", hint, "is required")
		return
	case nv.Kind != yaml.ScalarNode || nv.ShortTag() != "!!str" || nv.Value == "":
		d.errorf(nv, "metadata.name", hint, "expected a name, got %s", describeNode(nv))
		return
	}
	d.pos["metadata.name"] = posOf(nk)
	m := r.ProtoReflect()
	fd := m.Descriptor().Fields().ByJSONName("metadata")
	m.Set(fd, protoreflect.ValueOfMessage((&roostv1.ObjectMeta{Name: nv.Value}).ProtoReflect()))
}

// kindByName finds a kind by its exact CamelCase name.
func kindByName(name string) *Kind {
	for _, k := range kinds {
		if k.Name == name {
			return k
		}
	}
	return nil
}

// message decodes mapping n into m.
func (d *decoder) message(n *yaml.Node, m protoreflect.Message, path string) {
	n = d.deref(n)
	if n == nil || isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "", "expected object, got %s", describeNode(n))
		return
	}
	fields := m.Descriptor().Fields()
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content) && !d.exhausted; i += 2 {
		k, v := d.deref(n.Content[i]), n.Content[i+1]
		if k == nil {
			return
		}
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "", "field names must be strings, got %s", describeNode(k))
			continue
		}
		fpath := joinField(path, k.Value)
		if prev, dup := seen[k.Value]; dup {
			d.errorf(k, fpath, "remove one of them", "field %q is given twice (first at line %d)", k.Value, prev.Line)
			continue
		}
		seen[k.Value] = k
		fd := fields.ByJSONName(k.Value)
		if fd == nil {
			d.unknownField(k, fields, path, fpath)
			continue
		}
		d.pos[fpath] = posOf(k)
		// With ForApply, status and the hub-set metadata are read (and
		// checked) like the rest; object drops what an apply ignores.
		d.field(m, fd, v, fpath)
	}
}

// removedFields are fields of older versions of the API, per message, with
// what to do instead: a manifest written for an older hub fails with a
// message that says how to update it.
var removedFields = map[protoreflect.FullName]map[string]string{
	"roost.v1.ClusterSpec": {
		"bootstrapToken": "remove it: the hub now creates a short-lived bootstrap token for each joining worker; " +
			"give the hub credentials for the cluster with 'roostctl cluster set-credentials NAME --kubeconfig FILE'",
	},
}

// unknownField reports key k, which names no field of the message.
func (d *decoder) unknownField(k *yaml.Node, fields protoreflect.FieldDescriptors, path, fpath string) {
	var names []string
	for i := 0; i < fields.Len(); i++ {
		names = append(names, fields.Get(i).JSONName())
	}
	var hint string
	var msg protoreflect.FullName
	if fields.Len() > 0 {
		msg = fields.Get(0).ContainingMessage().FullName()
	}
	if why, ok := removedFields[msg][k.Value]; ok {
		d.errorf(k, fpath, why, "field %q was removed", k.Value)
		return
	}
	switch s := suggest(k.Value, names); {
	case s != "":
		hint = fmt.Sprintf("did you mean %q?", s)
	case path == "":
		hint = "known fields: " + strings.Join(names, ", ")
	default:
		hint = "known fields of " + path + ": " + strings.Join(names, ", ")
	}
	d.errorf(k, fpath, hint, "unknown field %q", k.Value)
}

// field decodes value node v into field fd of m.
func (d *decoder) field(m protoreflect.Message, fd protoreflect.FieldDescriptor, v *yaml.Node, path string) {
	v = d.deref(v)
	if v == nil || isNull(v) {
		return // null leaves the field unset
	}
	switch {
	case fd.IsList():
		if v.Kind != yaml.SequenceNode {
			d.errorf(v, path, "", "expected list, got %s", describeNode(v))
			return
		}
		l := m.Mutable(fd).List()
		for i, item := range v.Content {
			ipath := joinIndex(path, i)
			item = d.deref(item)
			if item == nil {
				return
			}
			d.pos[ipath] = posOf(item)
			if val, ok := d.value(item, fd, l.NewElement, ipath); ok {
				l.Append(val)
			}
		}
	case fd.IsMap():
		if v.Kind != yaml.MappingNode {
			d.errorf(v, path, "", "expected map, got %s", describeNode(v))
			return
		}
		mp := m.Mutable(fd).Map()
		seen := map[string]*yaml.Node{}
		for i := 0; i+1 < len(v.Content); i += 2 {
			k, val := d.deref(v.Content[i]), d.deref(v.Content[i+1])
			if k == nil || val == nil {
				return
			}
			if k.Kind != yaml.ScalarNode {
				d.errorf(k, path, "", "map keys must be strings, got %s", describeNode(k))
				continue
			}
			kpath := joinKey(path, k.Value)
			if prev, dup := seen[k.Value]; dup {
				d.errorf(k, kpath, "remove one of them", "key %q is given twice (first at line %d)", k.Value, prev.Line)
				continue
			}
			seen[k.Value] = k
			d.pos[kpath] = posOf(k)
			key, ok := d.mapKey(k, fd.MapKey(), kpath)
			if !ok {
				continue
			}
			if isNull(val) && fd.MapValue().Kind() == protoreflect.StringKind {
				d.errorf(val, kpath, `write "" for an empty value`, "expected string, got null")
				continue
			}
			if x, ok := d.value(val, fd.MapValue(), mp.NewValue, kpath); ok {
				mp.Set(key, x)
			}
		}
	default:
		if x, ok := d.value(v, fd, func() protoreflect.Value { return m.NewField(fd) }, path); ok {
			m.Set(fd, x)
			if fd.Kind() == protoreflect.StringKind && v.Style&yaml.LiteralStyle != 0 {
				d.text[path] = v.Line + 1 // the text starts below the "|"
			}
		}
	}
}

// mapKey decodes a map key.
func (d *decoder) mapKey(k *yaml.Node, fd protoreflect.FieldDescriptor, path string) (protoreflect.MapKey, bool) {
	if fd.Kind() == protoreflect.StringKind {
		return protoreflect.ValueOfString(k.Value).MapKey(), true
	}
	v, ok := d.scalar(k, fd, path)
	if !ok {
		return protoreflect.MapKey{}, false
	}
	return v.MapKey(), true
}

// Full names of the messages written as scalars.
const (
	durationName    protoreflect.FullName = "google.protobuf.Duration"
	timestampName   protoreflect.FullName = "google.protobuf.Timestamp"
	intOrStringName protoreflect.FullName = "roost.v1.IntOrString"
)

// value decodes one (non-list, non-map) value of field fd; newMsg makes an
// empty message for message fields.
func (d *decoder) value(n *yaml.Node, fd protoreflect.FieldDescriptor, newMsg func() protoreflect.Value, path string) (protoreflect.Value, bool) {
	if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
		return d.scalar(n, fd, path)
	}
	switch fd.Message().FullName() {
	case durationName:
		return d.duration(n, path)
	case timestampName:
		return d.timestamp(n, path)
	case intOrStringName:
		return d.intOrString(n, fd, path)
	}
	v := newMsg()
	d.message(n, v.Message(), path)
	return v, true
}

func (d *decoder) duration(n *yaml.Node, path string) (protoreflect.Value, bool) {
	const hint = `use a Go duration such as "30s", "15m" or "4h"`
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!str" && !(n.ShortTag() == "!!int" && n.Value == "0")) {
		d.errorf(n, path, hint, "expected duration, got %s", describeNode(n))
		return protoreflect.Value{}, false
	}
	dur, err := time.ParseDuration(n.Value)
	if err != nil {
		d.errorf(n, path, hint, "invalid duration %q", n.Value)
		return protoreflect.Value{}, false
	}
	return protoreflect.ValueOfMessage(durationpb.New(dur).ProtoReflect()), true
}

func (d *decoder) timestamp(n *yaml.Node, path string) (protoreflect.Value, bool) {
	const hint = `use RFC 3339, e.g. "2026-11-01T02:00:00Z"`
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!str" && n.ShortTag() != "!!timestamp") {
		d.errorf(n, path, hint, "expected timestamp, got %s", describeNode(n))
		return protoreflect.Value{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, n.Value)
	if err != nil {
		d.errorf(n, path, hint, "invalid timestamp %q", n.Value)
		return protoreflect.Value{}, false
	}
	return protoreflect.ValueOfMessage(timestamppb.New(t).ProtoReflect()), true
}

func (d *decoder) intOrString(n *yaml.Node, fd protoreflect.FieldDescriptor, path string) (protoreflect.Value, bool) {
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!str":
			return protoreflect.ValueOfMessage((&roostv1.IntOrString{Value: &roostv1.IntOrString_StrVal{StrVal: n.Value}}).ProtoReflect()), true
		case "!!int":
			i, ok := d.integer(n, fd, path, math.MinInt32, math.MaxInt32, "int32")
			if !ok {
				return protoreflect.Value{}, false
			}
			return protoreflect.ValueOfMessage((&roostv1.IntOrString{Value: &roostv1.IntOrString_IntVal{IntVal: int32(i)}}).ProtoReflect()), true
		}
	}
	d.errorf(n, path, `e.g. 1 or "25%"`, "expected integer or string, got %s", describeNode(n))
	return protoreflect.Value{}, false
}

// scalar decodes a scalar field value.
func (d *decoder) scalar(n *yaml.Node, fd protoreflect.FieldDescriptor, path string) (protoreflect.Value, bool) {
	fail := func(expected, hint string) (protoreflect.Value, bool) {
		d.errorf(n, path, hint, "expected %s, got %s", expected, describeNode(n))
		return protoreflect.Value{}, false
	}
	tag := ""
	if n.Kind == yaml.ScalarNode {
		tag = n.ShortTag()
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		if tag == "!!str" || tag == "!!timestamp" {
			return protoreflect.ValueOfString(n.Value), true
		}
		hint := ""
		if n.Kind == yaml.ScalarNode && tag != "!!null" {
			hint = "quote the value: " + strconv.Quote(n.Value)
		}
		return fail("string", hint)
	case protoreflect.BoolKind:
		if tag != "!!bool" {
			return fail("bool", "write true or false")
		}
		var b bool
		if err := n.Decode(&b); err != nil {
			return fail("bool", "write true or false")
		}
		return protoreflect.ValueOfBool(b), true
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		if tag != "!!int" {
			return fail("integer", "")
		}
		i, ok := d.integer(n, fd, path, math.MinInt32, math.MaxInt32, "int32")
		return protoreflect.ValueOfInt32(int32(i)), ok
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		if tag != "!!int" {
			return fail("integer", "")
		}
		i, ok := d.integer(n, fd, path, math.MinInt64, math.MaxInt64, "int64")
		return protoreflect.ValueOfInt64(i), ok
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		if tag != "!!int" {
			return fail("integer", "")
		}
		i, ok := d.integer(n, fd, path, 0, math.MaxUint32, "uint32")
		return protoreflect.ValueOfUint32(uint32(i)), ok
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if tag != "!!int" {
			return fail("integer", "")
		}
		var u uint64
		if err := n.Decode(&u); err != nil {
			d.errorf(n, path, "", "%s is out of range for uint64 (0 to %d)", n.Value, uint64(math.MaxUint64))
			return protoreflect.Value{}, false
		}
		return protoreflect.ValueOfUint64(u), true
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		if tag != "!!float" && tag != "!!int" {
			return fail("number", "")
		}
		var f float64
		if err := n.Decode(&f); err != nil {
			return fail("number", "")
		}
		if fd.Kind() == protoreflect.FloatKind {
			return protoreflect.ValueOfFloat32(float32(f)), true
		}
		return protoreflect.ValueOfFloat64(f), true
	case protoreflect.EnumKind:
		if tag != "!!str" {
			return fail("string", "")
		}
		ev := fd.Enum().Values().ByName(protoreflect.Name(n.Value))
		if ev == nil {
			var names []string
			for i := 0; i < fd.Enum().Values().Len(); i++ {
				names = append(names, string(fd.Enum().Values().Get(i).Name()))
			}
			d.errorf(n, path, "one of "+strings.Join(names, ", "), "unknown value %q", n.Value)
			return protoreflect.Value{}, false
		}
		return protoreflect.ValueOfEnum(ev.Number()), true
	case protoreflect.BytesKind:
		if tag != "!!str" && tag != "!!binary" {
			return fail("base64 string", "")
		}
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(n.Value), ""))
		if err != nil {
			d.errorf(n, path, "", "invalid base64: %v", err)
			return protoreflect.Value{}, false
		}
		return protoreflect.ValueOfBytes(b), true
	}
	d.errorf(n, path, "", "unsupported field type %s", fd.Kind())
	return protoreflect.Value{}, false
}

// fieldRanges are the values Validate accepts for integer fields whose
// type holds more, e.g. a Pool's replicas (an int32, at least 0). A value
// outside its type's range is refused with this range, so the message
// shows what the field takes ("0 to 2147483647"), not what the type
// holds. Values inside the type's range decode, and Validate checks them.
var fieldRanges = map[protoreflect.FullName][2]int64{
	"roost.v1.PoolSpec.replicas":             {0, math.MaxInt32},
	"roost.v1.RolloutPolicy.failure_budget":  {0, math.MaxInt32},
	"roost.v1.RolloutPolicy.max_unavailable": {1, math.MaxInt32},
	"roost.v1.Bond.miimon":                   {0, MaxBondMiimon},
}

// integer parses an !!int scalar of field fd and checks it against the
// type's range [lo, hi] (typ names the type); the message gives the
// field's own range when fieldRanges has one.
func (d *decoder) integer(n *yaml.Node, fd protoreflect.FieldDescriptor, path string, lo, hi int64, typ string) (int64, bool) {
	var i int64
	if err := n.Decode(&i); err != nil || i < lo || i > hi {
		if r, ok := fieldRanges[fd.FullName()]; ok {
			d.errorf(n, path, "", "%s is out of range (%d to %d)", n.Value, r[0], r[1])
		} else {
			d.errorf(n, path, "", "%s is out of range for %s (%d to %d)", n.Value, typ, lo, hi)
		}
		return 0, false
	}
	return i, true
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describeNode names what a YAML node holds, for "expected X, got Y".
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "map"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias *" + n.Value
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 40 {
			v = v[:37] + "..."
		}
		switch n.ShortTag() {
		case "!!str":
			return "string " + strconv.Quote(v)
		case "!!int":
			return "integer " + v
		case "!!float":
			return "number " + v
		case "!!bool":
			return "bool " + v
		case "!!null":
			return "null"
		case "!!timestamp":
			return "timestamp " + v
		default:
			return fmt.Sprintf("%s %q", n.ShortTag(), v)
		}
	}
	return "nothing"
}
