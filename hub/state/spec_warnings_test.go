package state

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// An apply warns about MachineClass selector terms that cannot match as
// meant: a roost.io/ key that misses a derived label (a part of its name,
// its unit, its case), and a numeric derived label compared with a
// quantity that has a suffix. Operators' own roost.io/ labels, keys
// outside roost.io/ and plain numbers are not warned about. The class is
// applied either way.
func TestApplyWarnsAboutSelectorTerms(t *testing.T) {
	h := newHarness(t, Options{})
	const at = `machineclass/big: spec.serverSelector`
	for _, tc := range []struct {
		term string
		want string // "" for no warning
	}{
		{"roost.io/cpus>=16", ""},
		{"roost.io/memory-gib>=64", ""},
		{"roost.io/nic-speed-mbps>=25000", ""},
		{"roost.io/arch=amd64", ""},
		{"!roost.io/maintenance", ""},
		{"roost.io/rack=r12", ""},
		{"roost.io/disk-type=nvme", ""},
		{"memory>=64Gi", ""},
		{"roost.io/cpus>=1e3", ""},
		{"roost.io/memory>=64Gi",
			`the hub derives no label roost.io/memory, and no Server has it unless an operator sets it: did you mean roost.io/memory-gib, the memory in GiB? write "roost.io/memory-gib>=64"`},
		{"roost.io/memory-gb>=64",
			`the hub derives no label roost.io/memory-gb, and no Server has it unless an operator sets it: did you mean roost.io/memory-gib, the memory in GiB? write "roost.io/memory-gib>=64"`},
		{"roost.io/CPUs>=16",
			`the hub derives no label roost.io/CPUs, and no Server has it unless an operator sets it: did you mean roost.io/cpus, the number of hardware threads? write "roost.io/cpus>=16"`},
		{"roost.io/ssd",
			`the hub derives no label roost.io/ssd, and no Server has it unless an operator sets it: did you mean roost.io/ssds, the number of non-rotational, non-removable disks? write "roost.io/ssds"`},
		{"roost.io/disk>=2",
			`the hub derives no label roost.io/disk, and no Server has it unless an operator sets it: did you mean one of ` +
				`roost.io/disks (the number of non-removable disks), roost.io/disk-gib (the total size of non-removable disks in GiB)?`},
		{"roost.io/memory-gib>=64Gi",
			`roost.io/memory-gib is the memory in GiB, a plain number, so this compares it with 64Gi = 68719476736: write "roost.io/memory-gib>=64"`},
		{"roost.io/memory-gib=64Gi",
			`roost.io/memory-gib is the memory in GiB, a plain number, so this compares it with 64Gi = 68719476736: write "roost.io/memory-gib=64"`},
		{"roost.io/nic-speed-mbps>=10G",
			`roost.io/nic-speed-mbps is the speed of the fastest physical NIC in Mbit/s, a plain number, so this compares it with 10G = 10000000000: write "roost.io/nic-speed-mbps>=10000"`},
		{"roost.io/disk-gib >= 500G",
			`roost.io/disk-gib is the total size of non-removable disks in GiB, a plain number, so this compares it with 500G = 500000000000: write "roost.io/disk-gib>=466" (500G is about 466 GiB)`},
		{"roost.io/cpus>=16Gi",
			`roost.io/cpus is the number of hardware threads, a plain number, so this compares it with 16Gi = 17179869184: write the plain number, without a suffix`},
		{"roost.io/cpu-cores<500m",
			`roost.io/cpu-cores is the number of physical CPU cores, a plain number, so this compares it with 500m: write the plain number, without a suffix`},
	} {
		mc := resource.Wrap(&roostv1.MachineClass{Metadata: meta("big", nil), Spec: &roostv1.MachineClassSpec{
			ServerSelector: []string{"roost.io/cpus>=8", tc.term}}})
		res := h.mustApply(h.objects(mc))
		var want []string
		if tc.want != "" {
			want = []string{at + "[1] " + strconv.Quote(tc.term) + ": " + tc.want}
		}
		if !slices.Equal(res.Warnings, want) {
			t.Errorf("%s: warnings\n%q\nwant\n%q", tc.term, res.Warnings, want)
		}
	}
}

// An apply warns about each node label of a Pool of a Cluster that a
// kubelet may not set on its own Node, in key order; the labels a kubelet
// may set, and the labels of a Pool without a Cluster, are not warned
// about.
func TestApplyWarnsAboutNodeLabelsKubeletsMayNotSet(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(h.objects(append(baseObjects(), resource.Wrap(&roostv1.ImageRelease{Metadata: meta("v2026-11-0", nil),
		Spec: &roostv1.ImageReleaseSpec{Version: "2026.11.0", Channels: []string{"stable"}}}))...))
	labels := map[string]string{
		"node-role.kubernetes.io/worker": "", "kubernetes.io/role": "worker", "example.k8s.io/x": "y",
		"topology.kubernetes.io/zone": "r12", "node.kubernetes.io/lifecycle": "spot", "kubelet.kubernetes.io/x": "y",
		"kubernetes.io/arch": "amd64", "example.com/team": "storage", "tier": "gold",
	}
	const why = ": a kubelet may not set this label on its own Node (NodeRestriction), so it is left out of the workers' Node labels: " +
		"of the kubernetes.io and k8s.io namespaces a kubelet may set only labels under kubelet.kubernetes.io/, node.kubernetes.io/ " +
		"and the well-known topology, instance-type, os, arch and hostname labels (set the others with kubectl, or use a label of your own)"
	res := h.mustApply(h.objects(poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.NodeLabels = labels })))
	want := []string{
		"pool/workers: spec.nodeLabels[example.k8s.io/x]" + why,
		"pool/workers: spec.nodeLabels[kubernetes.io/role]" + why,
		"pool/workers: spec.nodeLabels[node-role.kubernetes.io/worker]" + why,
	}
	if !slices.Equal(res.Warnings, want) {
		t.Errorf("warnings\n%q\nwant\n%q", res.Warnings, want)
	}
	if res := h.mustApply(h.objects(poolObj("hosts", "", func(s *roostv1.PoolSpec) { s.NodeLabels = labels }))); len(res.Warnings) > 0 {
		t.Errorf("a Pool without a Cluster: warnings %q", res.Warnings)
	}
}

// KubeletLabelError is the rule of the kubelet's own Node labels.
func TestKubeletLabelError(t *testing.T) {
	for key, allowed := range map[string]bool{
		"tier": true, "example.com/team": true, "roost.io/rack": true,
		"topology.kubernetes.io/zone": true, "kubernetes.io/hostname": true, "node.kubernetes.io/x": true,
		"a.node.kubernetes.io/x": true, "kubelet.kubernetes.io/x": true, "beta.kubernetes.io/arch": true,
		"node-role.kubernetes.io/worker": false, "kubernetes.io/role": false, "k8s.io/x": false, "example.k8s.io/x": false,
		"node-restriction.kubernetes.io/a": false,
	} {
		err := KubeletLabelError(key)
		if (err == nil) != allowed {
			t.Errorf("%s: %v, want allowed=%v", key, err, allowed)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "label "+key+": a kubelet may not set labels of the kubernetes.io and k8s.io namespaces") {
			t.Errorf("%s: %v", key, err)
		}
	}
}

// Every derived label is described for the selector warnings, and the
// numeric ones are exactly those whose values are plain numbers.
func TestDerivedLabelsDescribed(t *testing.T) {
	for _, k := range DerivedLabelKeys {
		if _, ok := derivedLabels[k]; !ok {
			t.Errorf("derived label %s has no description in derivedLabels", k)
		}
	}
	if len(derivedLabels) != len(DerivedLabelKeys) {
		t.Errorf("derivedLabels describes %d labels, DerivedLabelKeys has %d", len(derivedLabels), len(DerivedLabelKeys))
	}
	labels := DerivedLabels(inventory(32, 256))
	for k, d := range derivedLabels {
		v, ok := labels[k]
		if !ok {
			t.Errorf("%s: not derived from the test inventory", k)
			continue
		}
		_, err := strconv.ParseUint(v, 10, 64)
		if numeric := d.scale > 0; numeric != (err == nil) {
			t.Errorf("%s=%s: described as numeric=%v", k, v, numeric)
		}
		if (d.unit != "") != (d.scale > 1) {
			t.Errorf("%s: unit %q with scale %d", k, d.unit, d.scale)
		}
	}
}

// The examples apply without warnings about their specs: the only one is
// that no release is on their Pool's channel yet.
func TestExamplesApplyWithoutSpecWarnings(t *testing.T) {
	data, err := os.ReadFile("../../examples/all.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := resource.Decode(data, "all.yaml", resource.ForApply())
	if err != nil {
		t.Fatal(err)
	}
	var objs []*roostv1.Object
	for _, m := range ms {
		objs = append(objs, m.Object)
	}
	h := newHarness(t, Options{})
	h.rules = RulesVersion
	res := h.mustApply(h.objects(objs...))
	want := []string{"pool/workers: no ImageRelease is on channel stable yet: its Machines install nothing until one is promoted ('roostctl image promote VERSION --channel stable')"}
	if !slices.Equal(res.Warnings, want) {
		t.Errorf("warnings\n%q\nwant\n%q", res.Warnings, want)
	}
}

func TestRemediationWarnings(t *testing.T) {
	n := func(v int32) *int32 { return &v }
	pool := func(maxU *roostv1.IntOrString, inFlight *int32) *roostv1.Pool {
		return &roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "web"}, Spec: &roostv1.PoolSpec{Replicas: n(20),
			Rollout: &roostv1.RolloutPolicy{MaxUnavailable: maxU}, Remediation: &roostv1.RemediationPolicy{MaxInFlight: inFlight}}}
	}
	count := func(v int32) *roostv1.IntOrString {
		return &roostv1.IntOrString{Value: &roostv1.IntOrString_IntVal{IntVal: v}}
	}
	pct := &roostv1.IntOrString{Value: &roostv1.IntOrString_StrVal{StrVal: "10%"}}
	for _, tc := range []struct {
		name string
		p    *roostv1.Pool
		want string
	}{
		{"within", pool(count(2), n(2)), ""},
		{"above", pool(count(2), n(3)), "pool/web: spec.remediation.maxInFlight 3 is above spec.rollout.maxUnavailable 2: replacements run at most 2 at a time"},
		{"above the default", pool(nil, n(2)), "pool/web: spec.remediation.maxInFlight 2 is above spec.rollout.maxUnavailable 1: replacements run at most 1 at a time"},
		{"percentage", pool(pct, n(5)), ""},
		{"unset", pool(count(1), nil), ""},
	} {
		if got := strings.Join(remediationWarnings(tc.p), "|"); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
