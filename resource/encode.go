package resource

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"gopkg.in/yaml.v3"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Encode writes objects as manifests, in format "yaml" or "json".
//
// Each object is written with its fields in proto declaration order
// (apiVersion, kind, metadata, spec, status), under their JSON lowerCamel
// names. apiVersion and kind always come from the kind registry, even when
// the message leaves them empty. Fields with zero values are left out
// (optional fields that are set keep their zero), and so are nested
// objects that would be empty; Durations are written as Go duration
// strings ("30s", "1h30m0s"), Timestamps as RFC 3339 in UTC, IntOrString as
// a plain integer or string, map keys sorted. The output is byte-for-byte
// the same for equal inputs, and Decode reads it back.
//
// In yaml, each object is one document and several are separated by
// "---"; no objects give empty output. In json, one object is written as
// itself, and zero or several objects inside a kubectl-like
// {"apiVersion": "roost.io/v1", "kind": "List", "items": [...]} wrapper;
// json is indented by four spaces and ends with a newline.
//
// Encode fails for an unknown format or an empty Object envelope.
func Encode(objs []*roostv1.Object, format string) ([]byte, error) {
	nodes := make([]*yaml.Node, 0, len(objs))
	for i, o := range objs {
		r, k := Unwrap(o)
		if r == nil {
			return nil, fmt.Errorf("encode: object %d is empty (no kind set)", i)
		}
		nodes = append(nodes, objectNode(r, k))
	}
	switch format {
	case "yaml":
		if len(nodes) == 0 {
			return []byte{}, nil
		}
		var buf bytes.Buffer
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		for _, n := range nodes {
			if err := enc.Encode(n); err != nil {
				return nil, fmt.Errorf("encode: %w", err)
			}
		}
		if err := enc.Close(); err != nil {
			return nil, fmt.Errorf("encode: %w", err)
		}
		return buf.Bytes(), nil
	case "json":
		root := &yaml.Node{Kind: yaml.MappingNode}
		if len(nodes) == 1 {
			root = nodes[0]
		} else {
			root.Content = append(root.Content,
				strNode("apiVersion"), strNode(APIVersion),
				strNode("kind"), strNode("List"),
				strNode("items"), &yaml.Node{Kind: yaml.SequenceNode, Content: nodes})
		}
		var buf bytes.Buffer
		writeJSON(&buf, root, "")
		buf.WriteByte('\n')
		return buf.Bytes(), nil
	}
	return nil, fmt.Errorf("encode: unknown format %q (use yaml or json)", format)
}

// objectNode builds the mapping of one resource.
func objectNode(r Resource, k *Kind) *yaml.Node {
	n := messageNode(r.ProtoReflect())
	if n == nil {
		n = &yaml.Node{Kind: yaml.MappingNode}
	}
	// apiVersion and kind first, from the registry.
	var rest []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if key := n.Content[i].Value; key != "apiVersion" && key != "kind" {
			rest = append(rest, n.Content[i], n.Content[i+1])
		}
	}
	n.Content = append([]*yaml.Node{strNode("apiVersion"), strNode(APIVersion), strNode("kind"), strNode(k.Name)}, rest...)
	return n
}

func strNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

// messageNode builds the mapping of a message, or nil when it has no
// fields to write.
func messageNode(m protoreflect.Message) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		var v *yaml.Node
		switch {
		case fd.IsList():
			l := m.Get(fd).List()
			seq := &yaml.Node{Kind: yaml.SequenceNode}
			for j := 0; j < l.Len(); j++ {
				item := valueNode(fd, l.Get(j))
				if item == nil {
					item = &yaml.Node{Kind: yaml.MappingNode} // keep list positions
				}
				seq.Content = append(seq.Content, item)
			}
			v = seq
		case fd.IsMap():
			mp := m.Get(fd).Map()
			type entry struct {
				key string
				val protoreflect.Value
			}
			var entries []entry
			mp.Range(func(k protoreflect.MapKey, val protoreflect.Value) bool {
				entries = append(entries, entry{k.String(), val})
				return true
			})
			sort.Slice(entries, func(a, b int) bool { return entries[a].key < entries[b].key })
			mn := &yaml.Node{Kind: yaml.MappingNode}
			for _, e := range entries {
				val := valueNode(fd.MapValue(), e.val)
				if val == nil {
					val = &yaml.Node{Kind: yaml.MappingNode}
				}
				mn.Content = append(mn.Content, strNode(e.key), val)
			}
			v = mn
		default:
			v = valueNode(fd, m.Get(fd))
		}
		if v != nil {
			n.Content = append(n.Content, strNode(fd.JSONName()), v)
		}
	}
	if len(n.Content) == 0 {
		return nil
	}
	return n
}

// valueNode builds the node of one value of field fd (a list item, map
// value or singular field); nil means "nothing to write".
func valueNode(fd protoreflect.FieldDescriptor, v protoreflect.Value) *yaml.Node {
	if s, tag, ok := scalarText(fd, v); ok {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: s}
	}
	return messageNode(v.Message())
}

// scalarText renders a scalar value, or a message written as a scalar
// (Duration, Timestamp, IntOrString), with its YAML tag; ok is false for
// other messages.
func scalarText(fd protoreflect.FieldDescriptor, v protoreflect.Value) (text, tag string, ok bool) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		// yaml.v3 would write invalid UTF-8 as !!binary; proto3 strings
		// must be UTF-8 anyway.
		return strings.ToValidUTF8(v.String(), "\uFFFD"), "!!str", true
	case protoreflect.BoolKind:
		return strconv.FormatBool(v.Bool()), "!!bool", true
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.FormatInt(v.Int(), 10), "!!int", true
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.FormatUint(v.Uint(), 10), "!!int", true
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return strconv.FormatFloat(f, 'g', -1, 64), "!!str", true
		}
		return strconv.FormatFloat(f, 'g', -1, 64), "!!float", true
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name()), "!!str", true
		}
		return strconv.Itoa(int(v.Enum())), "!!int", true
	case protoreflect.BytesKind:
		return base64.StdEncoding.EncodeToString(v.Bytes()), "!!str", true
	case protoreflect.MessageKind, protoreflect.GroupKind:
		switch m := v.Message().Interface().(type) {
		case *durationpb.Duration:
			return FormatDuration(m), "!!str", true
		case *timestamppb.Timestamp:
			return FormatTimestamp(m), "!!str", true
		case *roostv1.IntOrString:
			switch x := m.GetValue().(type) {
			case *roostv1.IntOrString_IntVal:
				return strconv.FormatInt(int64(x.IntVal), 10), "!!int", true
			case *roostv1.IntOrString_StrVal:
				return x.StrVal, "!!str", true
			}
			return "", "", false
		}
	}
	return "", "", false
}

// FormatDuration writes a Duration in the shortest form time.ParseDuration
// reads back: "30s", "4h", "1h30m", "1m0.5s", "500ms" (time.Duration's
// String without zero units). Durations outside time.Duration's range (±292
// years) are clamped to it.
func FormatDuration(pd *durationpb.Duration) string {
	d := pd.AsDuration()
	if d > -time.Second && d < time.Second {
		return d.String() // "0s", "500ms", "1.5µs"
	}
	var b []byte
	u := uint64(d)
	if d < 0 {
		b = append(b, '-')
		u = -u
	}
	h, rest := u/uint64(time.Hour), u%uint64(time.Hour)
	m, rest := rest/uint64(time.Minute), rest%uint64(time.Minute)
	if h > 0 {
		b = strconv.AppendUint(b, h, 10)
		b = append(b, 'h')
	}
	if m > 0 {
		b = strconv.AppendUint(b, m, 10)
		b = append(b, 'm')
	}
	if rest > 0 {
		sec := strconv.FormatUint(rest/uint64(time.Second), 10)
		if frac := rest % uint64(time.Second); frac > 0 {
			f := strconv.FormatUint(frac+uint64(time.Second), 10)[1:] // 9 digits, leading zeros kept
			sec += "." + strings.TrimRight(f, "0")
		}
		b = append(b, sec...)
		b = append(b, 's')
	}
	return string(b)
}

// FormatTimestamp writes a Timestamp as RFC 3339 in UTC, with as many
// fractional digits as needed.
func FormatTimestamp(t *timestamppb.Timestamp) string {
	return t.AsTime().UTC().Format(time.RFC3339Nano)
}

// writeJSON writes a node tree built by messageNode as indented JSON.
func writeJSON(b *bytes.Buffer, n *yaml.Node, indent string) {
	const step = "    "
	switch n.Kind {
	case yaml.MappingNode:
		if len(n.Content) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{\n")
		for i := 0; i+1 < len(n.Content); i += 2 {
			b.WriteString(indent + step)
			writeJSONString(b, n.Content[i].Value)
			b.WriteString(": ")
			writeJSON(b, n.Content[i+1], indent+step)
			if i+2 < len(n.Content) {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "}")
	case yaml.SequenceNode:
		if len(n.Content) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[\n")
		for i, item := range n.Content {
			b.WriteString(indent + step)
			writeJSON(b, item, indent+step)
			if i+1 < len(n.Content) {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "]")
	default:
		switch n.Tag {
		case "!!int", "!!bool", "!!float":
			b.WriteString(n.Value)
		default:
			writeJSONString(b, n.Value)
		}
	}
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // strings always encode
	// json.Encoder adds a newline.
	if b.Len() > 0 && b.Bytes()[b.Len()-1] == '\n' {
		b.Truncate(b.Len() - 1)
	}
}

// FormatScalarForHumans renders a scalar for tables and describe; it is
// scalarText without the tag.
func FormatScalarForHumans(fd protoreflect.FieldDescriptor, v protoreflect.Value) (string, bool) {
	s, _, ok := scalarText(fd, v)
	return s, ok
}
