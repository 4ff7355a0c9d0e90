package resource

import (
	"bytes"
	"strings"
	"testing"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func TestPrintTable(t *testing.T) {
	objs := sampleObjects()
	for _, wide := range []bool{false, true} {
		suffix := ""
		if wide {
			suffix = "-wide"
		}
		// One table per kind.
		var all bytes.Buffer
		for _, o := range objs {
			_, k := Unwrap(o)
			var buf bytes.Buffer
			if err := PrintTable(&buf, []*roostv1.Object{o, o}, wide, fixtureNow); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(buf.String(), strings.Join(Columns(k, wide), " ")[:4]) {
				t.Errorf("%s: table must start with NAME:\n%s", k.Name, &buf)
			}
			all.WriteString("# " + k.Name + "\n")
			all.Write(buf.Bytes())
		}
		checkGolden(t, "testdata/print/tables"+suffix+".golden", all.Bytes())
		// Mixed kinds: kind/name and one header per kind.
		var mixed bytes.Buffer
		if err := PrintTable(&mixed, []*roostv1.Object{objs[2], objs[3], objs[2]}, wide, fixtureNow); err != nil {
			t.Fatal(err)
		}
		checkGolden(t, "testdata/print/mixed"+suffix+".golden", mixed.Bytes())
	}
}

func TestPrintTableEdgeCases(t *testing.T) {
	var buf bytes.Buffer
	if err := PrintTable(&buf, nil, false, fixtureNow); err != nil || buf.Len() != 0 {
		t.Errorf("no objects: %q, %v", buf.String(), err)
	}
	if err := PrintTable(&buf, []*roostv1.Object{{}}, false, fixtureNow); err == nil {
		t.Error("empty envelope: want an error")
	}
	// Objects with nothing set print without panicking.
	for _, k := range Kinds() {
		buf.Reset()
		if err := PrintTable(&buf, []*roostv1.Object{k.Wrap(k.New())}, true, fixtureNow); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), "<unknown>") {
			t.Errorf("%s: AGE of an object without creationTimestamp should be <unknown>:\n%s", k.Name, &buf)
		}
		buf.Reset()
		if err := Describe(&buf, k.Wrap(k.New()), fixtureNow); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDescribe(t *testing.T) {
	for _, o := range sampleObjects() {
		_, k := Unwrap(o)
		var buf bytes.Buffer
		if err := Describe(&buf, o, fixtureNow); err != nil {
			t.Fatal(err)
		}
		checkGolden(t, "testdata/print/describe-"+k.Singular+".golden", buf.Bytes())
	}
	if err := Describe(&bytes.Buffer{}, &roostv1.Object{}, fixtureNow); err == nil {
		t.Error("empty envelope: want an error")
	}
}

func TestClusterTableWithoutStatus(t *testing.T) {
	c := &roostv1.Cluster{Metadata: &roostv1.ObjectMeta{Name: "new"}, Spec: &roostv1.ClusterSpec{ApiEndpoint: "https://h:6443"}}
	var buf bytes.Buffer
	if err := PrintTable(&buf, []*roostv1.Object{Wrap(c)}, true, fixtureNow); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"NAME", "ENDPOINT", "VERSION", "REACHABLE", "REASON", "NODES", "SERVER-VERSION", "CREDENTIALS", "AGE"},
		{"new", "https://h:6443", "<none>", "Unknown", "<none>", "?", "<none>", "<none>", "<unknown>"},
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got:\n%s", &buf)
	}
	for i, l := range lines {
		if got := strings.Fields(l); strings.Join(got, " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d: got %q, want %q", i, got, want[i])
		}
	}
}

func TestMachineReason(t *testing.T) {
	cond := func(typ, status, reason string) *roostv1.Condition {
		return &roostv1.Condition{Type: typ, Status: status, Reason: reason}
	}
	for _, tc := range []struct {
		conds []*roostv1.Condition
		want  string
	}{
		{nil, ""},
		{[]*roostv1.Condition{cond("Ready", "False", "NotJoined"), cond("Joined", "False", "WaitingForNode"), cond("Scheduled", "True", "")}, "WaitingForNode"},
		{[]*roostv1.Condition{cond("Ready", "False", "NotReady"), cond("Joined", "True", ""), cond("NodeReady", "False", "NodeNotReady")}, "NodeNotReady"},
		{[]*roostv1.Condition{cond("Ready", "True", ""), cond("NodeReady", "True", ""), cond("Drained", "False", "DrainBlocked")}, ""},
	} {
		m := &roostv1.Machine{Status: &roostv1.MachineStatus{Conditions: tc.conds}}
		if got := MachineReason(m); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.conds, got, tc.want)
		}
	}
}
