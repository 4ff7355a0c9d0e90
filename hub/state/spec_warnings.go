package state

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	k8sres "k8s.io/apimachinery/pkg/api/resource"
	kubeletapis "k8s.io/kubelet/pkg/apis"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Warnings about specs that are valid but do not do what they say: a
// MachineClass selector term that no Server will match as meant, and Pool
// node labels the workers' kubelets may not set. They depend on the object
// alone (see referenceWarnings for those that need the state).

// derivedLabel describes a derived label for the selector warnings.
type derivedLabel struct {
	// what it holds, e.g. "the memory in GiB".
	what string
	// scale is how many of a quantity's base unit one unit of the label is,
	// for numeric labels: 1<<30 for a count of GiB (of bytes), 1e6 for
	// Mbit/s (of bit/s), 1 for plain counts; 0 for text labels.
	scale int64
	// unit names the unit of a scaled label ("GiB", "Mbit/s").
	unit string
}

// derivedLabels describes every key of DerivedLabelKeys.
var derivedLabels = map[string]derivedLabel{
	LabelArch:        {what: "the architecture, e.g. amd64"},
	LabelCPUs:        {what: "the number of hardware threads", scale: 1},
	LabelCPUCores:    {what: "the number of physical CPU cores", scale: 1},
	LabelCPUSockets:  {what: "the number of CPU sockets", scale: 1},
	LabelMemoryGiB:   {what: "the memory in GiB", scale: derivedLabelGiB, unit: "GiB"},
	LabelFirmware:    {what: "the firmware type, uefi or bios"},
	LabelDisks:       {what: "the number of non-removable disks", scale: 1},
	LabelDiskGiB:     {what: "the total size of non-removable disks in GiB", scale: derivedLabelGiB, unit: "GiB"},
	LabelLargestDisk: {what: "the size of the largest non-removable disk in GiB", scale: derivedLabelGiB, unit: "GiB"},
	LabelSSDs:        {what: "the number of non-rotational, non-removable disks", scale: 1},
	LabelNICs:        {what: "the number of physical NICs", scale: 1},
	LabelMaxNICSpeed: {what: "the speed of the fastest physical NIC in Mbit/s", scale: 1_000_000, unit: "Mbit/s"},
	LabelVendor:      {what: "the system vendor"},
	LabelProduct:     {what: "the system product name"},
}

// derivedPrefix is the namespace of the derived labels.
const derivedPrefix = "roost.io/"

// unitWords are unit suffixes of label names: a key that differs from a
// derived label only in its unit ("roost.io/memory-gb") names that label.
var unitWords = map[string]bool{
	"b": true, "bytes": true, "kb": true, "kib": true, "mb": true, "mib": true, "gb": true, "gib": true,
	"tb": true, "tib": true, "bps": true, "kbps": true, "mbps": true, "gbps": true, "mbit": true, "gbit": true,
}

// selectorWarnings warns about MachineClass serverSelector terms that
// cannot match as meant:
//
//   - a roost.io/ key the hub does not derive but that names a derived
//     label with a part missing or another unit ("roost.io/memory" for
//     roost.io/memory-gib, "roost.io/disk" for roost.io/disks or
//     roost.io/disk-gib, "roost.io/memory-gb"): no Server has it unless
//     an operator sets it. Other roost.io/ keys (roost.io/maintenance)
//     are operators' labels and not warned about;
//   - a numeric derived label compared with a quantity that has a suffix
//     ("roost.io/memory-gib>=64Gi"): the label is a plain count (of GiB,
//     Mbit/s, threads…), so the term compares 64 with 68719476736.
//
// Terms that do not parse are refused at the edge and skipped here.
func selectorWarnings(mc *roostv1.MachineClass) []string {
	name := mc.GetMetadata().GetName()
	var out []string
	for i, term := range mc.GetSpec().GetServerSelector() {
		r, err := resource.ParseRequirement(term)
		if err != nil {
			continue
		}
		at := fmt.Sprintf("machineclass/%s: spec.serverSelector[%d] %q", name, i, strings.TrimSpace(term))
		if IsDerivedLabel(r.Key) {
			if w := suffixWarning(r); w != "" {
				out = append(out, at+": "+w)
			}
			continue
		}
		if cands := nearDerivedLabels(r.Key); len(cands) > 0 {
			out = append(out, at+": "+nearMissWarning(r, cands))
		}
	}
	return out
}

// nearDerivedLabels returns, in DerivedLabelKeys order, the derived labels
// key (not one itself) probably means: one that differs only in case, one
// key is a prefix of up to a '-' or a plural 's' ("roost.io/memory",
// "roost.io/disk", "roost.io/cpu-core"), or one with the same stem and
// another unit ("roost.io/memory-gb"). Keys outside roost.io/ mean none.
func nearDerivedLabels(key string) []string {
	if !strings.HasPrefix(key, derivedPrefix) {
		return nil
	}
	k := strings.ToLower(key)
	var out []string
	for _, d := range DerivedLabelKeys {
		rest, isPrefix := strings.CutPrefix(d, k)
		stem, _, hasUnit := cutUnit(d)
		otherStem, word, keyHasUnit := cutLastDash(k)
		switch {
		case k == d, // differs in case only
			isPrefix && (strings.HasPrefix(rest, "-") || rest == "s"),
			hasUnit && keyHasUnit && otherStem == stem && unitWords[word]:
			out = append(out, d)
		}
	}
	return out
}

// cutUnit splits a derived label with a unit suffix ("roost.io/memory-gib")
// into its stem and unit word.
func cutUnit(d string) (stem, unit string, ok bool) {
	stem, unit, ok = cutLastDash(d)
	return stem, unit, ok && unitWords[unit]
}

// cutLastDash splits s at its last '-'.
func cutLastDash(s string) (before, after string, ok bool) {
	i := strings.LastIndexByte(s, '-')
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

// nearMissWarning says which derived labels r.Key probably means, with the
// term rewritten when there is one.
func nearMissWarning(r resource.Requirement, cands []string) string {
	msg := fmt.Sprintf("the hub derives no label %s, and no Server has it unless an operator sets it: ", r.Key)
	if len(cands) == 1 {
		d := cands[0]
		fixed := resource.Requirement{Key: d, Op: r.Op, Value: r.Value}
		note := ""
		if v, n, ok := plainValue(d, r.Value); ok {
			fixed.Value, note = v, n
		}
		return msg + fmt.Sprintf("did you mean %s, %s? write %q%s", d, derivedLabels[d].what, fixed.String(), note)
	}
	parts := make([]string, len(cands))
	for i, d := range cands {
		parts[i] = fmt.Sprintf("%s (%s)", d, derivedLabels[d].what)
	}
	return msg + "did you mean one of " + strings.Join(parts, ", ") + "?"
}

// suffixWarning warns about a numeric derived label compared with (or set
// equal to) a quantity with a suffix, or returns "".
func suffixWarning(r resource.Requirement) string {
	info := derivedLabels[r.Key]
	if info.scale == 0 || r.Op == resource.OpExists || r.Op == resource.OpDoesNotExist || quantitySuffix(r.Value) == "" {
		return ""
	}
	q, err := k8sres.ParseQuantity(r.Value)
	if err != nil {
		return "" // a label value such as "many": simply unequal
	}
	shown := r.Value
	if n, exact := q.AsInt64(); exact {
		shown = fmt.Sprintf("%s = %d", r.Value, n)
	}
	msg := fmt.Sprintf("%s is %s, a plain number, so this compares it with %s", r.Key, info.what, shown)
	if v, note, ok := plainValue(r.Key, r.Value); ok {
		return msg + fmt.Sprintf(": write %q%s", resource.Requirement{Key: r.Key, Op: r.Op, Value: v}.String(), note)
	}
	return msg + ": write the plain number, without a suffix"
}

// plainValue rewrites value, a quantity with a suffix compared with
// derived label d, as the number of d's unit: "64Gi" is 64 for a GiB
// label, "10G" is 10000 for an Mbit/s one. note, when the number is
// rounded, says so. ok is false when d is not a label with a unit (plain
// counts have none to convert to), or value is not a quantity with a
// suffix, is negative or too large.
func plainValue(d, value string) (plain, note string, ok bool) {
	info := derivedLabels[d]
	q, err := k8sres.ParseQuantity(value)
	if info.unit == "" || quantitySuffix(value) == "" || err != nil || q.Sign() < 0 {
		return "", "", false
	}
	n, exact := q.AsInt64()
	if !exact {
		return "", "", false
	}
	whole, rest := n/info.scale, n%info.scale
	if rest == 0 {
		return strconv.FormatInt(whole, 10), "", true
	}
	if rest >= info.scale/2 {
		whole++
	}
	return strconv.FormatInt(whole, 10), fmt.Sprintf(" (%s is about %d %s)", value, whole, info.unit), true
}

// quantitySuffix returns the suffix of a quantity ("Gi" of "64Gi", "m" of
// "500m"), "" for a plain number ("64", "1.5", "1e3").
func quantitySuffix(v string) string {
	i := len(v)
	for i > 0 && (v[i-1] >= 'a' && v[i-1] <= 'z' || v[i-1] >= 'A' && v[i-1] <= 'Z') {
		i--
	}
	return v[i:]
}

// nodeLabelWarnings warns, in key order, about each node label of a Pool
// of a Cluster that a kubelet may not set on its own Node
// (KubeletLabelError): the hub leaves it out of the workers'
// --node-labels. A Pool without a cluster has no Nodes; invalid keys are
// refused at the edge.
func nodeLabelWarnings(p *roostv1.Pool) []string {
	if p.GetSpec().GetCluster() == "" {
		return nil
	}
	labels := p.GetSpec().GetNodeLabels()
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		if KubeletLabelError(k) == nil {
			continue
		}
		out = append(out, fmt.Sprintf("pool/%s: spec.nodeLabels[%s]: a kubelet may not set this label on its own Node (NodeRestriction), "+
			"so it is left out of the workers' Node labels: of the kubernetes.io and k8s.io namespaces a kubelet may set only labels under %s/ "+
			"and the well-known topology, instance-type, os, arch and hostname labels (set the others with kubectl, or use a label of your own)",
			p.GetMetadata().GetName(), k, strings.Join(kubeletapis.KubeletLabelNamespaces(), "/, ")))
	}
	return out
}

// errKubeletLabel is the reason of KubeletLabelError.
var errKubeletLabel = errors.New("a kubelet may not set labels of the kubernetes.io and k8s.io namespaces on its own Node, except under " +
	strings.Join(kubeletapis.KubeletLabelNamespaces(), "/, ") + "/ and the well-known topology, instance-type, os, arch and hostname labels")

// KubeletLabelError says why a kubelet may not register its own Node with
// label key, or returns nil when it may. Keys in the kubernetes.io and
// k8s.io namespaces (and their subdomains, e.g. node-role.kubernetes.io)
// must be among those a kubelet may set on its own Node
// (k8s.io/kubelet/pkg/apis.IsKubeletLabel: under kubelet.kubernetes.io/
// and node.kubernetes.io/, and the well-known topology, instance-type, os,
// arch and hostname labels): the kubelet refuses to start with others, and
// the NodeRestriction admission plugin refuses node-role.kubernetes.io/
// labels from kubelets. Other keys are allowed; their syntax is not
// checked. The hub renders a Pool's node labels with this rule
// (hub/revisions) and warns about the ones it leaves out when the Pool is
// applied.
func KubeletLabelError(key string) error {
	ns := ""
	if i := strings.IndexByte(key, '/'); i >= 0 {
		ns = key[:i]
	}
	restricted := ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") || ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io")
	if restricted && !kubeletapis.IsKubeletLabel(key) {
		return fmt.Errorf("label %s: %w", key, errKubeletLabel)
	}
	return nil
}

// remediationWarnings warns about a Pool's spec.remediation.maxInFlight
// above its rollout's maxUnavailable given as a count: replacements never
// go beyond maxUnavailable (hub/remediation), so the excess does nothing.
func remediationWarnings(p *roostv1.Pool) []string {
	rem := p.GetSpec().GetRemediation()
	mu, ok := p.GetSpec().GetRollout().GetMaxUnavailable().GetValue().(*roostv1.IntOrString_IntVal)
	limit := int32(1) // the default maxUnavailable
	if ok {
		limit = mu.IntVal
	} else if p.GetSpec().GetRollout().GetMaxUnavailable() != nil {
		return nil // a percentage: it depends on the pool's size
	}
	if rem == nil || rem.MaxInFlight == nil || rem.GetMaxInFlight() <= limit {
		return nil
	}
	return []string{fmt.Sprintf("pool/%s: spec.remediation.maxInFlight %d is above spec.rollout.maxUnavailable %d: replacements run at most %d at a time",
		p.GetMetadata().GetName(), rem.GetMaxInFlight(), limit, limit)}
}

// BMCWarnings are the warnings about a Server's BMC: insecureSkipVerify
// exposes the BMC account to anyone on the management network.
func BMCWarnings(b *roostv1.BMC) []string {
	if b.GetInsecureSkipVerify() {
		return []string{"spec.bmc.insecureSkipVerify: the BMC's TLS certificate is not verified, so anyone on the management network can impersonate it and read its credentials; prefer a BMC certificate the hub trusts"}
	}
	return nil
}
