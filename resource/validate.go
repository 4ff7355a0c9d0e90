package resource

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/google/uuid"

	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Validate checks one object on its own, without state: names, label
// syntax, and per kind the shape of the spec (see the validate*.go files
// for each kind's rules). References to other objects are checked for
// syntax only; whether they exist is the hub's business. Field paths follow
// the package's convention (e.g. "spec.rollout.maxUnavailable",
// "metadata.labels[roost.io/rack]"); each message says what is wrong, with
// the value found, and the Hint, when set, how to fix it. It returns nil
// for a valid object.
func Validate(obj *roostv1.Object) []apierror.Violation {
	r, k := Unwrap(obj)
	if r == nil {
		return []apierror.Violation{{Message: "empty object: no kind set"}}
	}
	var e violations
	if v := r.GetApiVersion(); v != "" && v != APIVersion {
		e.add("apiVersion", fmt.Sprintf("unsupported apiVersion %q", v), `use "`+APIVersion+`"`)
	}
	if v := r.GetKind(); v != "" && v != k.Name {
		e.add("kind", fmt.Sprintf("kind %q does not match the object, a %s", v, k.Name), `use "`+k.Name+`"`)
	}
	validateMeta(&e, r.GetMetadata())
	switch x := r.(type) {
	case *roostv1.Pool:
		validatePool(&e, x.GetSpec())
	case *roostv1.Cluster:
		validateCluster(&e, x.GetSpec())
	case *roostv1.MachineClass:
		validateMachineClass(&e, x.GetSpec())
	case *roostv1.NetworkProfile:
		validateNetworkProfile(&e, x.GetSpec())
	case *roostv1.MaintenanceWindow:
		validateMaintenanceWindow(&e, x.GetSpec())
	case *roostv1.Extension:
		validateExtension(&e, x.GetMetadata(), x.GetSpec())
	case *roostv1.ReleaseFeed:
		validateReleaseFeed(&e, x.GetSpec())
	case *roostv1.Channel:
		validateChannel(&e, x.GetMetadata().GetName(), x.GetSpec())
	}
	return e.list
}

// violations collects violations.
type violations struct{ list []apierror.Violation }

func (e *violations) add(field, msg, hint string) {
	e.list = append(e.list, apierror.Violation{Field: field, Message: msg, Hint: hint})
}

func (e *violations) addf(field, hint, format string, a ...any) {
	e.add(field, fmt.Sprintf(format, a...), hint)
}

func validateMeta(e *violations, md *roostv1.ObjectMeta) {
	switch name := md.GetName(); {
	case name == "":
		e.add("metadata.name", "is required", `set a lower-case DNS-1123 label such as "workers"`)
	default:
		checkName(e, "metadata.name", name)
	}
	// The preconditions an apply may carry (hub/state checkPreconditions)
	// must be what the hub wrote: a UUID in canonical form, a generation
	// counted from 1.
	if uid := md.GetUid(); uid != "" {
		if u, err := uuid.Parse(uid); err != nil || u.String() != uid {
			e.addf("metadata.uid", "copy it from 'roostctl get KIND NAME -o yaml', or remove it to skip the check",
				"invalid uid %q: must be the lower-case RFC 4122 UUID the hub set", uid)
		}
	}
	if g := md.GetGeneration(); g < 0 {
		e.addf("metadata.generation", "copy it from 'roostctl get KIND NAME -o yaml', or remove it", "must be ≥ 0, got %d", g)
	}
	checkLabels(e, "metadata.labels", md.GetLabels())
	for _, k := range slices.Sorted(maps.Keys(md.GetAnnotations())) {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			e.addf(joinKey("metadata.annotations", k), "", "invalid annotation key %q: %s", k, strings.Join(msgs, "; "))
		}
	}
}

// checkName checks a DNS-1123 label: an object name or a reference to one.
func checkName(e *violations, field, name string) {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		e.addf(field, "", "invalid name %q: %s", name, strings.Join(msgs, "; "))
	}
}

// checkRef checks an optional reference to another object by name.
func checkRef(e *violations, field, name string) {
	if name != "" {
		checkName(e, field, name)
	}
}

// checkLabels checks Kubernetes label syntax: qualified-name keys and
// label values.
func checkLabels(e *violations, field string, labels map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			e.addf(joinKey(field, k), "", "invalid label key %q: %s", k, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(labels[k]); len(msgs) > 0 {
			e.addf(joinKey(field, k), "", "invalid label value %q: %s", labels[k], strings.Join(msgs, "; "))
		}
	}
}

// checkDuration checks that a set duration is valid and not negative.
func checkDuration(e *violations, field string, d *durationpb.Duration) {
	if d == nil {
		return
	}
	if err := d.CheckValid(); err != nil {
		e.addf(field, "", "invalid duration: %v", err)
		return
	}
	if d.AsDuration() < 0 {
		e.addf(field, `e.g. "30s" or "10m"`, "must be ≥ 0s, got %s", d.AsDuration())
	}
}

// ValidateManifests validates decoded manifests as one apply: Validate on
// each object, plus checks across documents (the same kind and name given
// twice). Each violation is located through the manifest's position map:
// at its field, or at the nearest ancestor written in the manifest when the
// field itself is missing, or at its line inside a block of text (see
// Manifest.locate). Diagnostics come per manifest in the given order,
// sorted by position within a manifest; nil means no problems.
func ValidateManifests(ms []*Manifest) Diagnostics {
	var out Diagnostics
	seen := map[string]*Manifest{}
	for _, m := range ms {
		if m == nil {
			continue
		}
		kind := ""
		if m.Kind != nil {
			kind = m.Kind.Name
		}
		name := m.Name()
		at := func(v apierror.Violation) Diagnostic {
			pos, v := m.locate(v)
			return Diagnostic{Source: m.Source, Doc: m.Doc, Position: pos, Kind: kind, Name: name, Violation: v}
		}
		var ds Diagnostics
		for _, v := range Validate(m.Object) {
			ds = append(ds, at(v))
		}
		if name != "" {
			key := kind + "/" + name
			if prev, dup := seen[key]; dup {
				p := prev.Pos("metadata.name")
				ds = append(ds, at(apierror.Violation{
					Field:   "metadata.name",
					Message: fmt.Sprintf("%s %q is defined twice in this apply (first at %s:%d:%d)", kind, name, prev.Source, p.Line, p.Column),
					Hint:    "names are unique per kind: rename or remove one",
				}))
			} else {
				seen[key] = m
			}
		}
		sort.SliceStable(ds, func(i, j int) bool {
			if ds[i].Line != ds[j].Line {
				return ds[i].Line < ds[j].Line
			}
			return ds[i].Column < ds[j].Column
		})
		out = append(out, ds...)
	}
	return out
}
