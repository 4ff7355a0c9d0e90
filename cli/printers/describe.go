package printers

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/duration"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Describe writes a kubectl-describe-like text about obj: Name, Kind,
// Labels, Annotations, the hub-set metadata (UID, Generation, Create Index,
// Modify Index, Created with its age against now), then the Spec and Status
// sections as indented "Key: value" lines found by reflection, fields in
// proto declaration order with unset fields left out. Keys are the field
// names in words ("maxUnavailable" → "Max Unavailable"); lists of scalars
// and maps of strings put one item per line; lists of objects put "- " before
// each item; Conditions are a small table; timestamps are RFC 3339 UTC
// with their age or time left; secrets (a Cluster's kubeconfig, which reads
// never return anyway, and an EnrollmentToken's secret hash) show as
// "<redacted>". The output depends only on the arguments.
// Errors are those of w, or an empty Object envelope.
func Describe(w io.Writer, obj *roostv1.Object, now time.Time) error {
	r, k := resource.Unwrap(obj)
	if r == nil {
		return fmt.Errorf("describe: empty object (no kind set)")
	}
	d := &describer{now: now}
	if srv, ok := r.(*roostv1.Server); ok {
		d.server = srv
	}
	md := r.GetMetadata()
	d.kv("", "Name", orNone(md.GetName()))
	d.kv("", "Kind", k.Name)
	d.stringMap("", "Labels", md.GetLabels())
	d.stringMap("", "Annotations", md.GetAnnotations())
	d.kv("", "UID", orNone(md.GetUid()))
	d.kv("", "Generation", strconv.FormatInt(md.GetGeneration(), 10))
	d.kv("", "Create Index", strconv.FormatUint(md.GetCreateIndex(), 10))
	d.kv("", "Modify Index", strconv.FormatUint(md.GetModifyIndex(), 10))
	if ts := md.GetCreationTimestamp(); ts != nil {
		d.kv("", "Created", d.timestamp(ts))
	} else {
		d.kv("", "Created", "<unknown>")
	}
	m := r.ProtoReflect()
	for _, name := range []protoreflect.Name{"spec", "status"} {
		fd := m.Descriptor().Fields().ByName(name)
		if fd == nil || !m.Has(fd) {
			continue
		}
		sub := m.Get(fd).Message()
		if isEmptyMessage(sub) {
			d.kv("", fieldLabel(fd), none)
			continue
		}
		d.header("", fieldLabel(fd))
		d.message(sub, "  ")
	}
	if mw, ok := r.(*roostv1.MaintenanceWindow); ok {
		d.kv("", "Next Opening", windowNextLine(mw, now))
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
	for _, l := range d.lines {
		io.WriteString(tw, l+"\n") // writes to a buffer cannot fail
	}
	tw.Flush()
	var out strings.Builder
	for _, l := range strings.SplitAfter(buf.String(), "\n") {
		if l != "" {
			out.WriteString(strings.TrimRight(l, " \n") + "\n")
		}
	}
	_, err := io.WriteString(w, out.String())
	return err
}

// redacted are the fields Describe does not show: secrets (every
// write-only field too, see resource.IsWriteOnly).
var redacted = map[protoreflect.FullName]bool{
	"roost.v1.ClusterSpec.kubeconfig":            true,
	"roost.v1.EnrollmentTokenSpec.secret_sha256": true,
}

// describer collects the lines of a description; a tab separates a key
// from its value, and tabwriter aligns the values.
type describer struct {
	now   time.Time
	lines []string
	// server is the Server described, for the lines whose meaning depends
	// on its state (serverField); nil for other kinds.
	server *roostv1.Server
}

// serverField is the value of a Server field whose raw value would mislead
// (see ServerLastSeen, ServerReachability and ServerPoolCell), and true;
// "" with true leaves the field out. Other fields: false.
func (d *describer) serverField(fd protoreflect.FieldDescriptor) (string, bool) {
	s := d.server
	switch fd.FullName() {
	case "roost.v1.ServerStatus.last_seen":
		_, detail := ServerLastSeen(s, d.now)
		return detail, true
	case "roost.v1.ServerStatus.reachability":
		if s.GetStatus().GetState() == serverDecommissioned {
			return "- (not tracked while " + serverDecommissioned + ": the hub refuses its agent)", true
		}
		return s.GetStatus().GetReachability(), true
	case "roost.v1.ServerSpec.pool":
		p := s.GetSpec().GetPool()
		if p != "" && ServerPoolCell(s) == "" {
			return p + " (pre-assigned by its enrollment token; no effect while " + s.GetStatus().GetState() + ")", true
		}
		return p, true
	}
	return "", false
}

// header writes "key:" before nested lines. Its empty value cell keeps it
// in the tabwriter's column block, so one value column runs through the
// whole description.
func (d *describer) header(prefix, key string) { d.lines = append(d.lines, prefix+key+":\t") }

// kv writes "key: value"; a multi-line value continues in the value column.
func (d *describer) kv(prefix, key, value string) {
	parts := strings.Split(strings.TrimRight(value, "\n"), "\n")
	d.lines = append(d.lines, prefix+key+":\t"+sanitize(parts[0]))
	for _, p := range parts[1:] {
		d.lines = append(d.lines, "\t"+sanitize(p))
	}
}

// values writes key with one value per line.
func (d *describer) values(prefix, key string, vals []string) {
	if len(vals) == 0 {
		d.kv(prefix, key, none)
		return
	}
	d.lines = append(d.lines, prefix+key+":\t"+sanitize(vals[0]))
	for _, v := range vals[1:] {
		d.lines = append(d.lines, "\t"+sanitize(v))
	}
}

func (d *describer) stringMap(prefix, key string, m map[string]string) {
	var vals []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		vals = append(vals, k+"="+m[k])
	}
	d.values(prefix, key, vals)
}

// timestamp renders a timestamp with its age ("(3d ago)") or the time
// left ("(in 2h)").
func (d *describer) timestamp(ts *timestamppb.Timestamp) string {
	t := ts.AsTime()
	rel := ""
	if dt := d.now.Sub(t); dt >= 0 {
		rel = duration.HumanDuration(dt) + " ago"
	} else {
		rel = "in " + duration.HumanDuration(-dt)
	}
	return resource.FormatTimestamp(ts) + " (" + rel + ")"
}

const conditionName protoreflect.FullName = "roost.v1.Condition"

// message writes the set fields of m at prefix.
func (d *describer) message(m protoreflect.Message, prefix string) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if d.server != nil {
			if v, ok := d.serverField(fd); ok {
				if v != "" {
					d.kv(prefix, fieldLabel(fd), v)
				}
				continue
			}
		}
		if !m.Has(fd) {
			continue
		}
		key := fieldLabel(fd)
		v := m.Get(fd)
		switch {
		case fd.IsList() && fd.Message() != nil && fd.Message().FullName() == conditionName:
			d.conditions(prefix, key, v.List())
		case fd.IsList():
			l := v.List()
			if _, ok := d.scalar(fd, l.Get(0)); ok {
				vals := make([]string, l.Len())
				for j := range vals {
					vals[j], _ = d.scalar(fd, l.Get(j))
				}
				d.values(prefix, key, vals)
				continue
			}
			d.header(prefix, key)
			for j := 0; j < l.Len(); j++ {
				start := len(d.lines)
				item := l.Get(j).Message()
				if isEmptyMessage(item) {
					d.lines = append(d.lines, prefix+"    {}")
				} else {
					d.message(item, prefix+"    ")
				}
				// Mark the item's first line with "- ".
				first := d.lines[start]
				d.lines[start] = prefix + "  - " + strings.TrimPrefix(first, prefix+"    ")
			}
		case fd.IsMap():
			mp := v.Map()
			var keys []string
			vals := map[string]protoreflect.Value{}
			mp.Range(func(mk protoreflect.MapKey, mv protoreflect.Value) bool {
				keys = append(keys, mk.String())
				vals[mk.String()] = mv
				return true
			})
			sort.Strings(keys)
			if _, ok := d.scalar(fd.MapValue(), vals[keys[0]]); ok {
				var lines []string
				for _, k := range keys {
					s, _ := d.scalar(fd.MapValue(), vals[k])
					lines = append(lines, k+"="+s)
				}
				d.values(prefix, key, lines)
				continue
			}
			d.header(prefix, key)
			for _, k := range keys {
				d.header(prefix+"  ", k)
				d.message(vals[k].Message(), prefix+"    ")
			}
		case redacted[fd.FullName()] || resource.IsWriteOnly(fd):
			d.kv(prefix, key, "<redacted>")
		default:
			if s, ok := d.scalar(fd, v); ok {
				d.kv(prefix, key, s)
				continue
			}
			sub := v.Message()
			if isEmptyMessage(sub) {
				d.kv(prefix, key, none)
				continue
			}
			d.header(prefix, key)
			d.message(sub, prefix+"  ")
		}
	}
}

// scalar renders a scalar (or Duration, Timestamp, IntOrString) value.
func (d *describer) scalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) (string, bool) {
	if fd.Message() != nil && fd.Message().FullName() == timestampName {
		return d.timestamp(v.Message().Interface().(*timestamppb.Timestamp)), true
	}
	// Sizes in bytes (inventory memory and disks) are written for humans too.
	if fd.Kind() == protoreflect.Int64Kind && strings.HasSuffix(string(fd.Name()), "_bytes") && !fd.IsList() {
		if n := v.Int(); n >= 1024 {
			return fmt.Sprintf("%s (%d bytes)", bytesCell(n), n), true
		}
	}
	return resource.FormatScalarForHumans(fd, v)
}

// conditions writes a condition list as a table.
func (d *describer) conditions(prefix, key string, l protoreflect.List) {
	d.lines = append(d.lines, prefix+key+":") // a table of its own: break the column block
	d.lines = append(d.lines, prefix+"  Type\tStatus\tReason\tLast Transition\tMessage")
	for j := 0; j < l.Len(); j++ {
		c := l.Get(j).Message().Interface().(*roostv1.Condition)
		age := "-"
		if ts := c.GetLastTransitionTime(); ts != nil {
			age = d.timestamp(ts)
		}
		d.lines = append(d.lines, prefix+"  "+strings.Join([]string{
			orDash(c.GetType()), orDash(c.GetStatus()), orDash(c.GetReason()), age, orDash(sanitize(c.GetMessage())),
		}, "\t"))
	}
}

func isEmptyMessage(m protoreflect.Message) bool {
	empty := true
	m.Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool {
		empty = false
		return false
	})
	return empty
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// sanitize keeps tabs and line breaks out of a cell.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

// acronyms are the words fieldLabel writes in capitals.
var acronyms = map[string]string{
	"api": "API", "ca": "CA", "uid": "UID", "uuid": "UUID", "mtu": "MTU", "dns": "DNS", "ssh": "SSH",
	"pci": "PCI", "mac": "MAC", "id": "ID", "dhcp4": "DHCP4", "dhcp6": "DHCP6", "lacp": "LACP",
	"stp": "STP", "sha256": "SHA256", "wwn": "WWN", "vlan": "VLAN", "vlans": "VLANs", "rrule": "RRULE", "miimon": "MII Monitor",
	"cpu": "CPU", "macs": "MACs", "nics": "NICs", "ttl": "TTL",
}

// fieldLabel turns a field's JSON name into words: "maxUnavailable" →
// "Max Unavailable", "apiEndpoint" → "API Endpoint".
func fieldLabel(fd protoreflect.FieldDescriptor) string {
	name := fd.JSONName()
	var words []string
	start := 0
	for i, r := range name {
		if i > 0 && unicode.IsUpper(r) {
			words = append(words, name[start:i])
			start = i
		}
	}
	words = append(words, name[start:])
	for i, w := range words {
		lw := strings.ToLower(w)
		if a, ok := acronyms[lw]; ok {
			words[i] = a
		} else {
			words[i] = strings.ToUpper(lw[:1]) + lw[1:]
		}
	}
	return strings.Join(words, " ")
}

// timestampName is the full name of google.protobuf.Timestamp.
var timestampName = (&timestamppb.Timestamp{}).ProtoReflect().Descriptor().FullName()

// MaxDescribeEvents is how many of an object's Events DescribeEvents
// shows: the most recently seen.
const MaxDescribeEvents = 10

// DescribeEvents writes the Events section that ends describe's output:
// the MaxDescribeEvents most recently seen of events (Event objects, any
// order), oldest first, with when each was last seen, its type, reason,
// count and message; "Events:  <none>" when there are none. Errors are
// w's.
func DescribeEvents(w io.Writer, events []*roostv1.Object, now time.Time) error {
	evs := SortEvents(events)
	if len(evs) == 0 {
		_, err := fmt.Fprintln(w, "Events:\t"+none)
		return err
	}
	if len(evs) > MaxDescribeEvents {
		evs = evs[len(evs)-MaxDescribeEvents:]
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Events:")
	fmt.Fprintln(tw, "  LAST SEEN\tTYPE\tREASON\tCOUNT\tMESSAGE")
	for _, o := range evs {
		e := o.GetEvent()
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\n", ageCell(e.GetStatus().GetLastTimestamp(), now), cell(e.GetSpec().GetType()),
			cell(e.GetSpec().GetReason()), e.GetStatus().GetCount(), cell(sanitize(e.GetSpec().GetMessage())))
	}
	return tw.Flush()
}

// SortEvents returns the Event objects of objs (others are left out)
// sorted by when they were last seen, then by when first seen and name,
// the newest last, as operators read a log.
func SortEvents(objs []*roostv1.Object) []*roostv1.Object {
	var evs []*roostv1.Object
	for _, o := range objs {
		if o.GetEvent() != nil {
			evs = append(evs, o)
		}
	}
	sort.SliceStable(evs, func(i, j int) bool {
		a, b := evs[i].GetEvent(), evs[j].GetEvent()
		if ta, tb := a.GetStatus().GetLastTimestamp().AsTime(), b.GetStatus().GetLastTimestamp().AsTime(); !ta.Equal(tb) {
			return ta.Before(tb)
		}
		if ca, cb := a.GetMetadata().GetCreateIndex(), b.GetMetadata().GetCreateIndex(); ca != cb {
			return ca < cb
		}
		return a.GetMetadata().GetName() < b.GetMetadata().GetName()
	})
	return evs
}
