package printers

import (
	"bytes"
	"strings"
	"testing"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
	"github.com/roostfleet/roost/resource/resourcetest"
)

func TestPrintTable(t *testing.T) {
	objs := resourcetest.SampleObjects()
	for _, wide := range []bool{false, true} {
		suffix := ""
		if wide {
			suffix = "-wide"
		}
		// One table per kind.
		var all bytes.Buffer
		for _, o := range objs {
			_, k := resource.Unwrap(o)
			var buf bytes.Buffer
			if err := PrintTable(&buf, []*roostv1.Object{o, o}, wide, resourcetest.Now); err != nil {
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
		if err := PrintTable(&mixed, []*roostv1.Object{objs[2], objs[3], objs[2]}, wide, resourcetest.Now); err != nil {
			t.Fatal(err)
		}
		checkGolden(t, "testdata/print/mixed"+suffix+".golden", mixed.Bytes())
	}
}

func TestPrintTableEdgeCases(t *testing.T) {
	var buf bytes.Buffer
	if err := PrintTable(&buf, nil, false, resourcetest.Now); err != nil || buf.Len() != 0 {
		t.Errorf("no objects: %q, %v", buf.String(), err)
	}
	if err := PrintTable(&buf, []*roostv1.Object{{}}, false, resourcetest.Now); err == nil {
		t.Error("empty envelope: want an error")
	}
	// Objects with nothing set print without panicking.
	for _, k := range resource.Kinds() {
		buf.Reset()
		if err := PrintTable(&buf, []*roostv1.Object{k.Wrap(k.New())}, true, resourcetest.Now); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), "<unknown>") {
			t.Errorf("%s: AGE of an object without creationTimestamp should be <unknown>:\n%s", k.Name, &buf)
		}
		buf.Reset()
		if err := Describe(&buf, k.Wrap(k.New()), resourcetest.Now); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDescribe(t *testing.T) {
	for _, o := range resourcetest.SampleObjects() {
		_, k := resource.Unwrap(o)
		var buf bytes.Buffer
		if err := Describe(&buf, o, resourcetest.Now); err != nil {
			t.Fatal(err)
		}
		checkGolden(t, "testdata/print/describe-"+k.Singular+".golden", buf.Bytes())
	}
	if err := Describe(&bytes.Buffer{}, &roostv1.Object{}, resourcetest.Now); err == nil {
		t.Error("empty envelope: want an error")
	}
}

func TestClusterTableWithoutStatus(t *testing.T) {
	c := &roostv1.Cluster{Metadata: &roostv1.ObjectMeta{Name: "new"}, Spec: &roostv1.ClusterSpec{ApiEndpoint: "https://h:6443"}}
	var buf bytes.Buffer
	if err := PrintTable(&buf, []*roostv1.Object{resource.Wrap(c)}, true, resourcetest.Now); err != nil {
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
		// A Machine being replaced says so first.
		{[]*roostv1.Condition{cond("Ready", "False", "ServerUnreachable"), cond("Remediating", "True", "Unreachable")}, "Remediating:Unreachable"},
	} {
		m := &roostv1.Machine{Status: &roostv1.MachineStatus{Conditions: tc.conds}}
		if got := MachineReason(m); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.conds, got, tc.want)
		}
	}
}

// get servers and describe server show a Server's last-seen time and
// reachability from the same fields, so they agree: "now" for a Reachable
// Server in both (the recorded time is when it last turned Reachable), the
// recorded heartbeat otherwise; a Decommissioned Server's reachability is
// not tracked (liveness leaves it out), whatever the status last recorded,
// and its token's pool pre-assignment is not shown as its POOL.
func TestServerLivenessDisplays(t *testing.T) {
	recorded := resourcetest.TS("2026-11-20T11:55:07Z") // 4m53s before resourcetest.Now
	server := func(state, reach string, lastSeen bool) *roostv1.Object {
		st := &roostv1.ServerStatus{State: state, Reachability: reach}
		if lastSeen {
			st.LastSeen = recorded
		}
		return resource.Wrap(&roostv1.Server{ApiVersion: resource.APIVersion, Kind: "Server", Metadata: resourcetest.Meta("srv-a", "2026-11-20T09:00:00Z"),
			Spec: &roostv1.ServerSpec{Pool: "workers"}, Status: st})
	}
	for _, tc := range []struct {
		name                        string
		obj                         *roostv1.Object
		state, pool, lastSeen       string
		describeSeen, describeReach string
	}{
		{"reachable", server("Available", "Reachable", true), "Available", "workers", "now",
			"Last Seen:     now: Reachable, heard within the heartbeat TTL", "Reachability:  Reachable"},
		{"unreachable", server("Available", "Unreachable", true), "Available,Unreachable", "workers", "4m53s ago",
			"Last Seen:     2026-11-20T11:55:07Z (4m53s ago)", "Reachability:  Unreachable"},
		{"decommissioned, stale Reachable", server("Decommissioned", "Reachable", true), "Decommissioned", "<none>", "4m53s ago",
			"Last Seen:     2026-11-20T11:55:07Z (4m53s ago)", "Reachability:  - (not tracked while Decommissioned"},
		{"decommissioned, stale Unreachable", server("Decommissioned", "Unreachable", true), "Decommissioned", "<none>", "4m53s ago",
			"Last Seen:     2026-11-20T11:55:07Z (4m53s ago)", "Reachability:  - (not tracked while Decommissioned"},
		{"decommissioned, nothing recorded", server("Decommissioned", "", false), "Decommissioned", "<none>", "never",
			"Last Seen:     never recorded; not tracked while Decommissioned", "Reachability:  - (not tracked while Decommissioned"},
	} {
		var tbl bytes.Buffer
		if err := PrintTable(&tbl, []*roostv1.Object{tc.obj}, false, resourcetest.Now); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(tbl.String()), "\n")
		header, row := lines[0], lines[1]
		cell := func(col string) string {
			i := strings.Index(header, col)
			rest := row[i:]
			if j := strings.Index(rest, "   "); j >= 0 {
				rest = rest[:j]
			}
			return strings.TrimSpace(rest)
		}
		if got := cell("STATE"); got != tc.state {
			t.Errorf("%s: STATE %q, want %q", tc.name, got, tc.state)
		}
		if got := cell("POOL"); got != tc.pool {
			t.Errorf("%s: POOL %q, want %q", tc.name, got, tc.pool)
		}
		if got := cell("LAST-SEEN"); got != tc.lastSeen {
			t.Errorf("%s: LAST-SEEN %q, want %q", tc.name, got, tc.lastSeen)
		}
		var desc bytes.Buffer
		if err := Describe(&desc, tc.obj, resourcetest.Now); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{tc.describeSeen, tc.describeReach} {
			if !strings.Contains(desc.String(), want) {
				t.Errorf("%s: describe lacks %q:\n%s", tc.name, want, &desc)
			}
		}
		if tc.pool == "<none>" && !strings.Contains(desc.String(), "Pool:          workers (pre-assigned by its enrollment token; no effect while Decommissioned)") {
			t.Errorf("%s: describe should show the pre-assignment and that it has no effect:\n%s", tc.name, &desc)
		}
	}
}
