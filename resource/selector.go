package resource

import (
	"fmt"
	"strings"

	k8sres "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// SelectorOp is the operator of one server selector requirement.
type SelectorOp string

// The operators of MachineClass.spec.serverSelector terms.
const (
	OpEquals       SelectorOp = "="  // key=value: the label is set to value
	OpNotEquals    SelectorOp = "!=" // key!=value: the label is unset or set to another value
	OpExists       SelectorOp = ""   // key: the label is set
	OpDoesNotExist SelectorOp = "!"  // !key: the label is unset
	OpGreaterEqual SelectorOp = ">=" // key>=N: the label is a quantity ≥ N
	OpGreater      SelectorOp = ">"  // key>N
	OpLessEqual    SelectorOp = "<=" // key<=N
	OpLess         SelectorOp = "<"  // key<N
)

// Requirement is one parsed server selector term, e.g. "roost.io/cpus>=16".
type Requirement struct {
	// Key is the label key, a Kubernetes qualified name.
	Key string
	// Op is the operator.
	Op SelectorOp
	// Value is the label value for = and !=, and the quantity text for the
	// numeric comparisons ("16", "64Gi").
	Value string
	// quantity is Value parsed, for the numeric comparisons.
	quantity k8sres.Quantity
}

// String writes the requirement back in selector syntax.
func (r Requirement) String() string {
	if r.Op == OpDoesNotExist {
		return "!" + r.Key
	}
	return r.Key + string(r.Op) + r.Value
}

// ParseRequirement parses one server selector term: "key=value",
// "key!=value", "key" (set), "!key" (unset), or "key>=N", "key>N",
// "key<=N", "key<N" where N is a Kubernetes quantity: a number with an
// optional suffix (binary Ki, Mi, Gi, Ti, Pi, Ei or decimal k, M, G, T, P,
// E), e.g. "16" or "64Gi". Spaces around the key and value are ignored.
// Keys must be qualified names ("rack", "roost.io/cpus"); values of = and
// != valid label values. The error says what is wrong and how to write it.
func ParseRequirement(s string) (Requirement, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return Requirement{}, fmt.Errorf(`empty requirement: write "key=value", "key!=value", "key", "!key" or "key>=N"`)
	}
	i := strings.IndexAny(t, "=!<>")
	if i < 0 {
		return checkKey(Requirement{Key: t, Op: OpExists})
	}
	if i == 0 && t[0] == '!' && !strings.ContainsAny(t[1:], "=!<>") {
		return checkKey(Requirement{Key: strings.TrimSpace(t[1:]), Op: OpDoesNotExist})
	}
	if i == 0 && t[0] == '!' {
		return Requirement{}, fmt.Errorf(`%q: "!key" means "label unset" and takes no value; write "key!=value" to exclude one value`, t)
	}
	var op SelectorOp
	switch rest := t[i:]; {
	case strings.HasPrefix(rest, "!="):
		op = OpNotEquals
	case strings.HasPrefix(rest, ">="):
		op = OpGreaterEqual
	case strings.HasPrefix(rest, "<="):
		op = OpLessEqual
	case strings.HasPrefix(rest, "=="):
		return Requirement{}, fmt.Errorf(`%q: write "=" instead of "=="`, t)
	case strings.HasPrefix(rest, "="):
		op = OpEquals
	case strings.HasPrefix(rest, ">"):
		op = OpGreater
	case strings.HasPrefix(rest, "<"):
		op = OpLess
	default:
		return Requirement{}, fmt.Errorf(`%q: "!" must start the requirement ("!key") or be part of "!="`, t)
	}
	r := Requirement{Key: strings.TrimSpace(t[:i]), Op: op, Value: strings.TrimSpace(t[i+len(op):])}
	if r.Key == "" {
		return Requirement{}, fmt.Errorf("%q: missing label key before %q", t, string(op))
	}
	if strings.ContainsAny(r.Value, "=!<>") {
		return Requirement{}, fmt.Errorf("%q: more than one operator; write one requirement per list item", t)
	}
	if _, err := checkKey(r); err != nil {
		return Requirement{}, err
	}
	switch op {
	case OpEquals, OpNotEquals:
		if msgs := validation.IsValidLabelValue(r.Value); len(msgs) > 0 {
			return Requirement{}, fmt.Errorf("invalid label value %q: %s", r.Value, strings.Join(msgs, "; "))
		}
	default:
		if r.Value == "" {
			return Requirement{}, fmt.Errorf("%q: missing number after %q, e.g. %s%s16", t, string(op), r.Key, string(op))
		}
		q, err := k8sres.ParseQuantity(r.Value)
		if err != nil {
			return Requirement{}, fmt.Errorf("%q is not a quantity: write a number with an optional suffix, e.g. 16, 64Gi or 2Ti", r.Value)
		}
		r.quantity = q
	}
	return r, nil
}

func checkKey(r Requirement) (Requirement, error) {
	if r.Key == "" {
		return Requirement{}, fmt.Errorf("missing label key")
	}
	if msgs := validation.IsQualifiedName(r.Key); len(msgs) > 0 {
		return Requirement{}, fmt.Errorf("invalid label key %q: %s", r.Key, strings.Join(msgs, "; "))
	}
	return r, nil
}

// Matches says whether labels satisfy the requirement. A numeric
// comparison holds only when the label is set to a value that parses as a
// quantity.
func (r Requirement) Matches(labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Op {
	case OpExists:
		return ok
	case OpDoesNotExist:
		return !ok
	case OpEquals:
		return ok && v == r.Value
	case OpNotEquals:
		return !ok || v != r.Value
	}
	if !ok {
		return false
	}
	q, err := k8sres.ParseQuantity(v)
	if err != nil {
		return false
	}
	c := q.Cmp(r.quantity)
	switch r.Op {
	case OpGreaterEqual:
		return c >= 0
	case OpGreater:
		return c > 0
	case OpLessEqual:
		return c <= 0
	case OpLess:
		return c < 0
	}
	return false
}

// Selector is a parsed server selector: all requirements must hold.
type Selector []Requirement

// ParseSelector parses every term of a MachineClass server selector; the
// error names the first bad term by its index.
func ParseSelector(terms []string) (Selector, error) {
	sel := make(Selector, 0, len(terms))
	for i, t := range terms {
		r, err := ParseRequirement(t)
		if err != nil {
			return nil, fmt.Errorf("serverSelector[%d]: %w", i, err)
		}
		sel = append(sel, r)
	}
	return sel, nil
}

// Matches says whether labels satisfy every requirement; the empty
// selector matches everything.
func (s Selector) Matches(labels map[string]string) bool {
	for _, r := range s {
		if !r.Matches(labels) {
			return false
		}
	}
	return true
}
