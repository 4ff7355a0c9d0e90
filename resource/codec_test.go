package resource

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource/resourcetest"
)

func TestRoundTrip(t *testing.T) {
	objs := resourcetest.SampleObjects()
	if len(objs) != len(Kinds()) {
		t.Fatalf("sampleObjects has %d objects, want one per kind (%d)", len(objs), len(Kinds()))
	}
	for _, format := range []string{"yaml", "json"} {
		// All at once (yaml documents, json List) and one by one.
		batches := [][]*roostv1.Object{objs}
		for _, o := range objs {
			batches = append(batches, []*roostv1.Object{o})
		}
		for _, batch := range batches {
			data, err := Encode(batch, format)
			if err != nil {
				t.Fatalf("%s: encode: %v", format, err)
			}
			ms, err := Decode(data, "out."+format)
			if err != nil {
				t.Fatalf("%s: decode:\n%v\n%s", format, err, data)
			}
			if len(ms) != len(batch) {
				t.Fatalf("%s: decoded %d objects, want %d", format, len(ms), len(batch))
			}
			for i, m := range ms {
				if !proto.Equal(m.Object, batch[i]) {
					t.Errorf("%s: object %d (%s) changed in the round trip:\nwant %v\ngot  %v", format, i, m.Kind.Name, batch[i], m.Object)
				}
			}
		}
	}
}

func TestEncodeGolden(t *testing.T) {
	objs := resourcetest.SampleObjects()
	for _, format := range []string{"yaml", "json"} {
		a, err := Encode(objs, format)
		if err != nil {
			t.Fatal(err)
		}
		// Byte-deterministic: encode a deep copy again.
		var cp []*roostv1.Object
		for _, o := range objs {
			cp = append(cp, proto.Clone(o).(*roostv1.Object))
		}
		for range 5 {
			b, err := Encode(cp, format)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Fatalf("%s: output differs between runs", format)
			}
		}
		checkGolden(t, "testdata/encode/all."+format+".golden", a)
	}
	one, err := Encode(objs[2:3], "json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(one, []byte("{\n    \"apiVersion\": \"roost.io/v1\",\n    \"kind\": \"Pool\",")) {
		t.Errorf("one object in json should be written as itself:\n%s", one)
	}
}

func TestEncodeEdgeCases(t *testing.T) {
	if _, err := Encode(nil, "xml"); err == nil || !strings.Contains(err.Error(), `unknown format "xml"`) {
		t.Errorf("unknown format: got %v", err)
	}
	if _, err := Encode([]*roostv1.Object{{}}, "yaml"); err == nil {
		t.Error("empty envelope: want an error")
	}
	if out, err := Encode(nil, "yaml"); err != nil || len(out) != 0 {
		t.Errorf("no objects in yaml: got %q, %v", out, err)
	}
	out, err := Encode(nil, "json")
	if err != nil || string(out) != "{\n    \"apiVersion\": \"roost.io/v1\",\n    \"kind\": \"List\",\n    \"items\": []\n}\n" {
		t.Errorf("no objects in json: got %q, %v", out, err)
	}
	// apiVersion and kind come from the registry; zero values and empty
	// objects are left out; strings that look like other types are quoted.
	p := &roostv1.Pool{Metadata: &roostv1.ObjectMeta{Name: "p", Labels: map[string]string{"x": "true", "y": "1"}},
		Spec: &roostv1.PoolSpec{Cluster: "123", Rollout: &roostv1.RolloutPolicy{}}, Status: &roostv1.PoolStatus{}}
	out, err = Encode([]*roostv1.Object{Wrap(p)}, "yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := `apiVersion: roost.io/v1
kind: Pool
metadata:
  name: p
  labels:
    x: "true"
    y: "1"
spec:
  cluster: "123"
`
	if string(out) != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}

func TestFormatDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {30 * time.Second, "30s"}, {4 * time.Hour, "4h"}, {90 * time.Minute, "1h30m"},
		{time.Hour + 30*time.Second, "1h30s"}, {1500 * time.Millisecond, "1.5s"}, {500 * time.Millisecond, "500ms"},
		{-90 * time.Second, "-1m30s"}, {time.Minute + 5*time.Nanosecond, "1m0.000000005s"},
	} {
		got := FormatDuration(durationpb.New(tc.d))
		if got != tc.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
		if back, err := time.ParseDuration(got); err != nil || back != tc.d {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", got, back, err, tc.d)
		}
	}
}

func TestDecodeValues(t *testing.T) {
	in := `
apiVersion: roost.io/v1
kind: Pool
metadata:
  name: p
  labels: {a: "1", b: ""}
spec:
  cluster: prod
  replicas: 0
  maintenanceWindows: [w1, w2]
  imageVersion: ~
  rollout:
    maxUnavailable: "25%"
    settle: 1h30m
    readyTimeout: 0
    failureBudget: 0x10
---
apiVersion: roost.io/v1
kind: Pool
metadata: {name: q}
spec:
  rollout: {maxUnavailable: 2}
---
apiVersion: roost.io/v1
kind: EnrollmentToken
metadata:
  name: t
  creationTimestamp: 2026-01-02T03:04:05.5+01:00
spec:
  expiresAt: "2026-02-01T00:00:00Z"
`
	ms, err := Decode([]byte(in), "in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 || ms[0].Doc != 0 || ms[2].Doc != 2 || ms[0].Source != "in.yaml" || ms[2].Kind.Name != "EnrollmentToken" {
		t.Fatalf("unexpected manifests: %+v", ms)
	}
	p := ms[0].Object.GetPool()
	s := p.GetSpec()
	if s.Replicas == nil || s.GetReplicas() != 0 {
		t.Errorf("replicas: 0 must be present, got %v", s.Replicas)
	}
	if got := p.GetMetadata().GetLabels(); len(got) != 2 || got["a"] != "1" || got["b"] != "" {
		t.Errorf("labels = %v", got)
	}
	if got := s.GetRollout().GetMaxUnavailable().GetStrVal(); got != "25%" {
		t.Errorf("maxUnavailable = %v", s.GetRollout().GetMaxUnavailable())
	}
	if got := s.GetRollout().GetSettle().AsDuration(); got != 90*time.Minute {
		t.Errorf("settle = %v", got)
	}
	if rt := s.GetRollout().GetReadyTimeout(); rt == nil || rt.AsDuration() != 0 {
		t.Errorf("readyTimeout: 0 must be present, got %v", rt)
	}
	if s.GetRollout().GetFailureBudget() != 16 {
		t.Errorf("failureBudget = %d", s.GetRollout().GetFailureBudget())
	}
	if got := ms[1].Object.GetPool().GetSpec().GetRollout().GetMaxUnavailable(); got.GetIntVal() != 2 {
		t.Errorf("maxUnavailable int = %v", got)
	}
	et := ms[2].Object.GetEnrollmentToken()
	if got := et.GetMetadata().GetCreationTimestamp().AsTime(); !got.Equal(time.Date(2026, 1, 2, 2, 4, 5, 5e8, time.UTC)) {
		t.Errorf("creationTimestamp = %v", got)
	}
	if got := et.GetSpec().GetExpiresAt().AsTime(); !got.Equal(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("expiresAt = %v", got)
	}
	// Positions: keys for fields and map entries, items for list items.
	for path, want := range map[string]Position{
		"":                            {2, 1},
		"spec.rollout.maxUnavailable": {13, 5},
		"spec.maintenanceWindows[1]":  {10, 28},
		"metadata.labels[b]":          {6, 20},
	} {
		if got := ms[0].Positions[path]; got != want {
			t.Errorf("Positions[%q] = %v, want %v", path, got, want)
		}
	}
	// Pos falls back to the nearest written ancestor.
	if got := ms[0].Pos("spec.rollout.settle.seconds"); got != (Position{14, 5}) {
		t.Errorf("Pos(settle.seconds) = %v", got)
	}
	if got := ms[0].Pos("spec.machineClass"); got != (Position{7, 1}) {
		t.Errorf("Pos(spec.machineClass) = %v", got)
	}
	if got := ms[0].Pos("metadata.labels[nope]"); got != (Position{6, 3}) {
		t.Errorf("Pos(metadata.labels[nope]) = %v", got)
	}
}

func TestDecodeSkipsEmptyDocuments(t *testing.T) {
	in := "# nothing here\n---\n---\n# still nothing\n---\napiVersion: roost.io/v1\nkind: Cluster\nmetadata: {name: c}\n---\n"
	ms, err := Decode([]byte(in), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Doc == 0 {
		t.Fatalf("want one manifest after the empty documents, got %d (doc %d)", len(ms), ms[0].Doc)
	}
	if ms, err := Decode(nil, "empty.yaml"); err != nil || len(ms) != 0 {
		t.Errorf("empty input: %v, %v", ms, err)
	}
}

func TestDecodeList(t *testing.T) {
	objs := resourcetest.SampleObjects()[2:5]
	data, err := Encode(objs, "json")
	if err != nil {
		t.Fatal(err)
	}
	// A List as `roostctl get KIND -o json` prints it applies (kubectl's
	// get, edit, apply): status and the hub-set metadata are read.
	ms, err := Decode(data, "list.json", ForApply())
	if err != nil || len(ms) != 3 {
		t.Fatalf("ForApply: got %d manifests, %v", len(ms), err)
	}
	for _, m := range ms {
		r, _ := Unwrap(m.Object)
		if r.ProtoReflect().Has(r.ProtoReflect().Descriptor().Fields().ByName("status")) || r.GetMetadata().GetCreateIndex() != 0 {
			t.Errorf("ForApply kept the status or createIndex of %s %s", m.Kind.Name, m.Name())
		}
	}
	ms, err = Decode(data, "list.json")
	if err != nil || len(ms) != 3 {
		t.Fatalf("got %d manifests, %v", len(ms), err)
	}
	if ms[0].Doc != 0 || ms[2].Doc != 0 || ms[1].Kind.Name != "Cluster" {
		t.Errorf("unexpected manifests: %+v", ms)
	}

	// kubectl writes a List with apiVersion v1 (and an empty metadata);
	// its items still need roost.io/v1.
	kubectlList := "apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: \"\"\nitems:\n" +
		"- apiVersion: roost.io/v1\n  kind: Cluster\n  metadata: {name: c}\n  spec: {apiEndpoint: \"https://10.0.0.1:6443\", kubernetesVersion: v1.34.4}\n"
	ms, err = Decode([]byte(kubectlList), "list.yaml", ForApply())
	if err != nil || len(ms) != 1 || ms[0].Kind.Name != "Cluster" || ms[0].Name() != "c" {
		t.Errorf("apiVersion v1 List: got %d manifests, %v", len(ms), err)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"v1 item", strings.Replace(kubectlList, "- apiVersion: roost.io/v1", "- apiVersion: v1", 1), `unsupported apiVersion "v1"`},
		{"other List apiVersion", strings.Replace(kubectlList, "apiVersion: v1\nkind: List", "apiVersion: apps/v1\nkind: List", 1), `unsupported apiVersion "apps/v1"`},
		{"no List apiVersion", strings.Replace(kubectlList, "apiVersion: v1\nkind: List", "kind: List", 1), "apiVersion: is required"},
	} {
		if _, err := Decode([]byte(tc.doc), "list.yaml"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// TestDecodeDiagnostics checks decoding problems one by one (the bad
// manifests under testdata/bad cover them together with validation).
func TestDecodeDiagnostics(t *testing.T) {
	const head = "apiVersion: roost.io/v1\nkind: Pool\nmetadata:\n  name: p\n"
	for _, tc := range []struct {
		name  string
		in    string
		apply bool
		want  string // one diagnostic per line
	}{
		{"unknown field", head + "spec:\n  replica: 3\n", false,
			`x.yaml:6:3: Pool "p": spec.replica: unknown field "replica" (did you mean "replicas"?)`},
		{"proto name", head + "spec:\n  rollout:\n    max_unavailable: 1\n", false,
			`x.yaml:7:5: Pool "p": spec.rollout.max_unavailable: unknown field "max_unavailable" (did you mean "maxUnavailable"?)`},
		{"no suggestion", head + "spec:\n  zzzzzz: 1\n", false,
			`x.yaml:6:3: Pool "p": spec.zzzzzz: unknown field "zzzzzz" (known fields of spec: cluster, machineClass, networkProfile, maintenanceWindows, imageChannel, imageVersion, replicas, nodeLabels, rollout, remediation, safety)`},
		{"string for int", head + "spec:\n  replicas: \"3\"\n", false,
			`x.yaml:6:13: Pool "p": spec.replicas: expected integer, got string "3"`},
		{"float for int", head + "spec:\n  replicas: 1.5\n", false,
			`x.yaml:6:13: Pool "p": spec.replicas: expected integer, got number 1.5`},
		{"int for string", head + "spec:\n  cluster: 1.30\n", false,
			`x.yaml:6:12: Pool "p": spec.cluster: expected string, got number 1.30 (quote the value: "1.30")`},
		{"list for map", head + "  labels: [a, b]\n", false,
			`x.yaml:5:11: Pool "p": metadata.labels: expected map, got list`},
		{"map for list", head + "spec:\n  maintenanceWindows: {a: b}\n", false,
			`x.yaml:6:23: Pool "p": spec.maintenanceWindows: expected list, got map`},
		{"scalar for object", head + "spec: yes\n", false,
			`x.yaml:5:7: Pool "p": spec: expected object, got string "yes"`},
		{"null map value", head + "  labels:\n    a:\n", false,
			`x.yaml:6:7: Pool "p": metadata.labels[a]: expected string, got null (write "" for an empty value)`},
		{"bool", "apiVersion: roost.io/v1\nkind: MachineClass\nmetadata: {name: m}\nspec: {wipeForeignDisks: \"yes\"}\n", false,
			`x.yaml:4:26: MachineClass "m": spec.wipeForeignDisks: expected bool, got string "yes" (write true or false)`},
		{"int32 range", head + "spec:\n  replicas: 3000000000\n", false,
			`x.yaml:6:13: Pool "p": spec.replicas: 3000000000 is out of range (0 to 2147483647)`},
		{"int32 range, negative", head + "spec:\n  rollout: {failureBudget: -3000000000}\n", false,
			`x.yaml:6:28: Pool "p": spec.rollout.failureBudget: -3000000000 is out of range (0 to 2147483647)`},
		{"uint32 range of miimon", "apiVersion: roost.io/v1\nkind: NetworkProfile\nmetadata: {name: n}\nspec:\n  bonds:\n    - {name: b, miimon: 4294967296}\n", false,
			`x.yaml:6:25: NetworkProfile "n": spec.bonds[0].miimon: 4294967296 is out of range (0 to 2147483647)`},
		{"uint32 range", "apiVersion: roost.io/v1\nkind: NetworkProfile\nmetadata: {name: n}\nspec:\n  vlans:\n    - {name: v, id: -1}\n", false,
			`x.yaml:6:21: NetworkProfile "n": spec.vlans[0].id: -1 is out of range for uint32 (0 to 4294967295)`},
		{"intorstring range", head + "spec:\n  rollout: {maxUnavailable: 99999999999}\n", false,
			`x.yaml:6:29: Pool "p": spec.rollout.maxUnavailable: 99999999999 is out of range (1 to 2147483647)`},
		{"intorstring list", head + "spec:\n  rollout: {maxUnavailable: [1]}\n", false,
			`x.yaml:6:29: Pool "p": spec.rollout.maxUnavailable: expected integer or string, got list (e.g. 1 or "25%")`},
		{"bad duration", head + "spec:\n  rollout: {settle: 4 hours}\n", false,
			`x.yaml:6:21: Pool "p": spec.rollout.settle: invalid duration "4 hours" (use a Go duration such as "30s", "15m" or "4h")`},
		{"int duration", head + "spec:\n  rollout: {settle: 30}\n", false,
			`x.yaml:6:21: Pool "p": spec.rollout.settle: expected duration, got integer 30 (use a Go duration such as "30s", "15m" or "4h")`},
		{"bad timestamp", head + "  creationTimestamp: yesterday\n", false,
			`x.yaml:5:22: Pool "p": metadata.creationTimestamp: invalid timestamp "yesterday" (use RFC 3339, e.g. "2026-11-01T02:00:00Z")`},
		{"duplicate field", head + "spec:\n  cluster: a\n  cluster: b\n", false,
			`x.yaml:7:3: Pool "p": spec.cluster: field "cluster" is given twice (first at line 6) (remove one of them)`},
		{"duplicate map key", head + "  labels:\n    a: x\n    a: y\n", false,
			`x.yaml:7:5: Pool "p": metadata.labels[a]: key "a" is given twice (first at line 6) (remove one of them)`},
		{"not a map", "- a\n- b\n", false,
			`x.yaml:1:1: a manifest must be a map with apiVersion, kind, metadata and spec, got list`},
		{"missing kind", "apiVersion: roost.io/v1\nmetadata: {name: x}\n", false,
			`x.yaml:1:1: kind: is required (one of Channel, Cluster, EnrollmentToken, Event, Extension, ImageRelease, Lease, Machine, MachineClass, MaintenanceWindow, NetworkProfile, Pool, ReleaseFeed, Revision, Server)`},
		{"alias kind", "apiVersion: roost.io/v1\nkind: pool\nmetadata: {name: x}\n", false,
			`x.yaml:2:7: kind: unknown kind "pool" (did you mean "Pool"? known kinds: Channel, Cluster, EnrollmentToken, Event, Extension, ImageRelease, Lease, Machine, MachineClass, MaintenanceWindow, NetworkProfile, Pool, ReleaseFeed, Revision, Server)`},
		{"wrong apiVersion and unknown field", "apiVersion: v1\nkind: Cluster\nmetadata: {name: c}\nspce: {}\n", false,
			"x.yaml:1:13: Cluster \"c\": apiVersion: unsupported apiVersion \"v1\" (use \"roost.io/v1\")\n" +
				`x.yaml:4:1: Cluster "c": spce: unknown field "spce" (did you mean "spec"?)`},
		{"status for apply", head + "status:\n  machines: 3\n", true, ``},
		{"status without apply", head + "status:\n  machines: 3\n", false, ``},
		{"status not a map for apply", head + "status: ready\n", true,
			`x.yaml:5:9: Pool "p": status: expected object, got string "ready"`},
		{"unknown status field for apply", head + "status:\n  machnes: 3\n", true,
			`x.yaml:6:3: Pool "p": status.machnes: unknown field "machnes" (did you mean "machines"?)`},
		{"hub-set metadata for apply", head + "  uid: u-1\n  generation: 3\n  createIndex: 2\n  modifyIndex: 4\n  creationTimestamp: \"2026-11-20T09:30:00Z\"\n", true, ``},
		{"modifyIndex not an integer for apply", head + "  modifyIndex: latest\n", true,
			`x.yaml:5:16: Pool "p": metadata.modifyIndex: expected integer, got string "latest"`},
		{"negative modifyIndex for apply", head + "  modifyIndex: -1\n", true,
			`x.yaml:5:16: Pool "p": metadata.modifyIndex: -1 is out of range for uint64 (0 to 18446744073709551615)`},
		{"not appliable", "apiVersion: roost.io/v1\nkind: Lease\nmetadata: {name: l}\n", true,
			`x.yaml:2:7: Lease "l": kind: Lease objects are written by the hub and cannot be applied (appliable kinds: Pool, Cluster, MachineClass, NetworkProfile, MaintenanceWindow, ReleaseFeed, Channel)`},
		{"syntax error after a good document", head + "---\nkind: [\n", false,
			`x.yaml:7: YAML syntax error: did not find expected node content`},
		{"bad indentation", head + "spec:\n    cluster: a\n  replicas: 1\n", false,
			`x.yaml:7: YAML syntax error: did not find expected key`},
		{"unclosed flow map", head + "spec: {cluster: a,\n", false,
			`x.yaml:6: YAML syntax error: did not find expected node content`},
		{"scanner error", head + "spec:\n  cluster: a: b\n", false,
			`x.yaml:6: YAML syntax error: mapping values are not allowed in this context`},
		{"tab indentation", "apiVersion: roost.io/v1\nkind: Pool\nmetadata:\n\tname: p\n", false,
			`x.yaml:4: YAML syntax error: found character that cannot start any token`},
		{"list item not a map", "apiVersion: roost.io/v1\nkind: List\nitems:\n  - 3\n", false,
			`x.yaml:4:5: a List item must be a map with apiVersion, kind, metadata and spec, got integer 3`},
		{"custom tag", head + "spec:\n  cluster: !secret x\n", false,
			`x.yaml:6:12: Pool "p": spec.cluster: expected string, got !secret "x" (quote the value: "x")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []DecodeOption
			if tc.apply {
				opts = append(opts, ForApply())
			}
			_, err := Decode([]byte(tc.in), "x.yaml", opts...)
			got := ""
			if err != nil {
				ds, ok := err.(Diagnostics)
				if !ok {
					t.Fatalf("error is %T, want Diagnostics", err)
				}
				got = strings.TrimSuffix(FormatViolations(ds), "\n")
			}
			if got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestDecodeAliasBomb checks that alias expansion is bounded.
func TestDecodeAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: roost.io/v1\nkind: NetworkProfile\nmetadata: {name: n}\nx0: &a0 [\"192.0.2.1/24\"]\n")
	prev := "a0"
	for i := 1; i < 4; i++ {
		b.WriteString("x" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := 0; j < 200; j++ {
			if j > 0 {
				b.WriteString(",")
			}
			b.WriteString("*" + prev)
		}
		b.WriteString("]\n")
		prev = "a" + string(rune('0'+i))
	}
	b.WriteString("spec:\n  links:\n")
	for j := 0; j < 200; j++ {
		b.WriteString("    - {name: l, addresses: *a1}\n")
	}
	_, err := Decode([]byte(b.String()), "bomb.yaml")
	if err == nil {
		t.Fatal("want an error")
	}
}

// TestDecodeForApplyWhatGetPrints checks that what `roostctl get -o yaml`
// prints of every appliable kind decodes for apply (kubectl's get, edit,
// apply), and that the decoded object keeps its name, labels, annotations,
// spec and the preconditions (uid, modifyIndex) and drops the status and
// the other hub-set metadata.
func TestDecodeForApplyWhatGetPrints(t *testing.T) {
	n := 0
	for _, o := range resourcetest.SampleObjects() {
		_, k := Unwrap(o)
		if !k.Appliable {
			continue
		}
		n++
		t.Run(k.Name, func(t *testing.T) {
			data, err := Encode([]*roostv1.Object{StripWriteOnly(o)}, "yaml")
			if err != nil {
				t.Fatal(err)
			}
			ms, err := Decode(data, "get.yaml", ForApply())
			if err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			if len(ms) != 1 {
				t.Fatalf("%d manifests", len(ms))
			}
			got, _ := Unwrap(ms[0].Object)
			sr, _ := Unwrap(StripWriteOnly(o))
			want := proto.Clone(sr).(Resource)
			wm := want.ProtoReflect()
			wm.Clear(wm.Descriptor().Fields().ByName("status"))
			md := want.GetMetadata()
			if md.GetUid() == "" || md.GetModifyIndex() == 0 {
				t.Fatalf("the sample %s has no uid or modifyIndex", k.Name)
			}
			md.CreateIndex, md.CreationTimestamp = 0, nil // generation stays: a precondition with modifyIndex
			if !proto.Equal(got, want) {
				t.Errorf("decoded for apply:\n%v\nwant:\n%v", got, want)
			}
		})
	}
	if n < 5 {
		t.Errorf("only %d appliable samples", n)
	}
}

// Every field of fieldRanges exists and is an integer field (or the
// IntOrString maxUnavailable), so a renamed field cannot drop its range.
func TestFieldRangesNameFields(t *testing.T) {
	for name, r := range fieldRanges {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
		fd, ok := d.(protoreflect.FieldDescriptor)
		if err != nil || !ok {
			t.Errorf("%s: not a field: %v", name, err)
			continue
		}
		if k := fd.Kind(); k == protoreflect.MessageKind && fd.Message().FullName() != intOrStringName || k == protoreflect.StringKind {
			t.Errorf("%s: %s is not an integer field", name, k)
		}
		if r[0] > r[1] {
			t.Errorf("%s: empty range %v", name, r)
		}
	}
}
