package state

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

func eventRecord(kind, name, typ, reason, msg string) *roostv1.EventRecord {
	return &roostv1.EventRecord{InvolvedObject: &roostv1.EventObject{Kind: kind, Name: name},
		Type: typ, Reason: reason, Message: msg, Source: "test"}
}

func recordEventsCmd(evs ...*roostv1.EventRecord) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_RecordEvents{RecordEvents: &roostv1.RecordEvents{Events: evs}}}
}

// listEvents returns the Events, optionally only those about kind/name.
func listEvents(t *testing.T, f *FSM, kind, name string) []*roostv1.Event {
	t.Helper()
	objs, _, err := f.List(kindEvent, "")
	if err != nil {
		t.Fatal(err)
	}
	var evs []*roostv1.Event
	for _, o := range objs {
		e := o.GetEvent()
		if kind == "" || (e.GetSpec().GetInvolvedObject().GetKind() == kind && e.GetSpec().GetInvolvedObject().GetName() == name) {
			evs = append(evs, e)
		}
	}
	return evs
}

// reasons lists "Kind/name Reason×count" of evs in first-seen order
// (create index).
func reasons(evs []*roostv1.Event) []string {
	byIndex := make([]*roostv1.Event, len(evs))
	copy(byIndex, evs)
	for i := range byIndex {
		for j := i + 1; j < len(byIndex); j++ {
			if byIndex[j].GetMetadata().GetCreateIndex() < byIndex[i].GetMetadata().GetCreateIndex() {
				byIndex[i], byIndex[j] = byIndex[j], byIndex[i]
			}
		}
	}
	var out []string
	for _, e := range byIndex {
		io := e.GetSpec().GetInvolvedObject()
		out = append(out, fmt.Sprintf("%s/%s %s×%d", io.GetKind(), io.GetName(), e.GetSpec().GetReason(), e.GetStatus().GetCount()))
	}
	return out
}

func TestRecordEventsCountsRepeats(t *testing.T) {
	h := newHarness(t, Options{})
	rec := eventRecord("Pool", "workers", EventWarning, "DrainBlocked", "eviction of default/web-0 refused by PodDisruptionBudget web")
	first := h.mustApply(withRules(RulesEvents, recordEventsCmd(rec)))
	h.mustApply(withRules(RulesEvents, recordEventsCmd(rec)))
	last := h.mustApply(withRules(RulesEvents, recordEventsCmd(rec)))
	evs := listEvents(t, h.f, "", "")
	if len(evs) != 1 {
		t.Fatalf("got %d Events, want 1 counted three times: %v", len(evs), reasons(evs))
	}
	e := evs[0]
	if e.GetStatus().GetCount() != 3 || e.GetMetadata().GetName() != fmt.Sprintf("ev-%d-0", first.Index) ||
		!e.GetStatus().GetFirstTimestamp().AsTime().Equal(timeAt(first.Index)) || !e.GetStatus().GetLastTimestamp().AsTime().Equal(timeAt(last.Index)) ||
		e.GetKind() != "Event" || e.GetApiVersion() != resource.APIVersion || e.GetMetadata().GetModifyIndex() != last.Index {
		t.Errorf("Event = %v", e)
	}
	// Another message is another Event.
	h.mustApply(withRules(RulesEvents, recordEventsCmd(eventRecord("Pool", "workers", EventNormal, "DrainFinished", "drained"))))
	if got := reasons(listEvents(t, h.f, "Pool", "workers")); strings.Join(got, ",") != "Pool/workers DrainBlocked×3,Pool/workers DrainFinished×1" {
		t.Errorf("events = %v", got)
	}
}

func TestRecordEventsRefusals(t *testing.T) {
	h := newHarness(t, Options{})
	// Unknown under the rules before events, as to older members.
	wantCode(t, h.apply(withRules(RulesEvents-1, recordEventsCmd(eventRecord("Pool", "p", EventNormal, "X", "m")))).Err, codes.InvalidArgument)
	res := h.apply(withRules(RulesEvents, recordEventsCmd(
		eventRecord("Pool", "p", EventNormal, "Fine", "ok"),
		eventRecord("Nope", "p", EventNormal, "Fine", "ok"),
		eventRecord("pool", "p", "Info", "not camel", ""),
		eventRecord("Event", "", EventNormal, "Fine", "ok"),
	)))
	wantCode(t, res.Err, codes.InvalidArgument)
	wantMessage(t, res.Err, "events[1].involvedObject.kind", "events[2].involvedObject.kind", `must be the CamelCase kind "Pool"`,
		"events[2].type", "events[2].reason", "events[2].message", "events[3].involvedObject.kind", "events[3].involvedObject.name")
	if evs := listEvents(t, h.f, "", ""); len(evs) != 0 {
		t.Errorf("a refused command recorded %v", reasons(evs))
	}
	// Events are neither applied nor deleted by users.
	h.mustApply(withRules(RulesEvents, recordEventsCmd(eventRecord("Pool", "p", EventNormal, "Fine", "ok"))))
	name := listEvents(t, h.f, "", "")[0].GetMetadata().GetName()
	wantCode(t, h.apply(deleteCmd("Event", name)).Err, codes.FailedPrecondition)
	wantMessage(t, h.apply(h.objects(resource.Wrap(&roostv1.Event{Metadata: &roostv1.ObjectMeta{Name: "mine"}}))).Err, "objects[0].kind", "not applied")
}

// The log stays bounded: per object, in total (least recently seen
// first), and by age.
func TestEventBounds(t *testing.T) {
	h := newHarness(t, Options{})
	// Per object: the oldest of one object goes, others stay.
	h.mustApply(withRules(RulesEvents, recordEventsCmd(eventRecord("Pool", "other", EventNormal, "Keep", "kept"))))
	for i := range MaxEventsPerObject + 5 {
		h.mustApply(withRules(RulesEvents, recordEventsCmd(eventRecord("Pool", "busy", EventNormal, "Step", fmt.Sprintf("step %d", i)))))
	}
	busy := listEvents(t, h.f, "Pool", "busy")
	if len(busy) != MaxEventsPerObject {
		t.Fatalf("busy pool keeps %d Events, want %d", len(busy), MaxEventsPerObject)
	}
	for _, e := range busy {
		if e.GetSpec().GetMessage() == "step 0" || e.GetSpec().GetMessage() == "step 4" {
			t.Errorf("kept %q, one of the oldest", e.GetSpec().GetMessage())
		}
	}
	if len(listEvents(t, h.f, "Pool", "other")) != 1 {
		t.Error("another object's Event was dropped")
	}

	// In total: MaxEvents, the least recently seen go first. A repeat of
	// "other" keeps it fresh.
	h.mustApply(withRules(RulesEvents, recordEventsCmd(eventRecord("Pool", "other", EventNormal, "Keep", "kept"))))
	n := 0
	for n < MaxEvents {
		var batch []*roostv1.EventRecord
		for range MaxRecordEvents {
			batch = append(batch, eventRecord("Server", fmt.Sprintf("srv-%d", n), EventNormal, "Enrolled", "enrolled"))
			n++
		}
		h.mustApply(withRules(RulesEvents, recordEventsCmd(batch...)))
	}
	all := listEvents(t, h.f, "", "")
	if len(all) != MaxEvents {
		t.Fatalf("%d Events kept, want MaxEvents=%d", len(all), MaxEvents)
	}
	if len(listEvents(t, h.f, "Pool", "busy")) != 0 || len(listEvents(t, h.f, "Pool", "other")) != 0 {
		t.Errorf("the oldest Events were kept: busy %d, other %d", len(listEvents(t, h.f, "Pool", "busy")), len(listEvents(t, h.f, "Pool", "other")))
	}
	if c, _ := eventCount(h.f.db.Load().Txn(false)); c != MaxEvents {
		t.Errorf("event count row = %d, want %d", c, MaxEvents)
	}

	// A restore recounts them.
	restored := restoreNew(t, snapshotBytes(t, h.f))
	if c, _ := eventCount(restored.db.Load().Txn(false)); c != MaxEvents {
		t.Errorf("restored event count row = %d, want %d", c, MaxEvents)
	}

	// By age: an Event recorded after EventTTL drops all older ones.
	late := withRules(RulesEvents, recordEventsCmd(eventRecord("Pool", "late", EventNormal, "Late", "late")))
	late.Time = timestamppb.New(timeAt(h.idx).Add(EventTTL + time.Second))
	h.mustApply(late)
	if got := reasons(listEvents(t, h.f, "", "")); strings.Join(got, ",") != "Pool/late Late×1" {
		t.Errorf("after the TTL: %v", got)
	}
	if c, _ := eventCount(h.f.db.Load().Txn(false)); c != 1 {
		t.Errorf("event count row = %d, want 1", c)
	}
}

// The FSM records what an enrollment did, under RulesEvents only.
func TestEnrollRecordsEvents(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(putEnrollTokenCmd("abcdef", tokSecret))
	h.mustApply(withRules(RulesEvents-1, enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:01"}, inventory(16, 64))))
	if evs := listEvents(t, h.f, "", ""); len(evs) != 0 {
		t.Fatalf("rules %d recorded %v", RulesEvents-1, reasons(evs))
	}
	h.mustApply(withRules(RulesEvents, enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:01"}, inventory(16, 64))))
	got := reasons(listEvents(t, h.f, "", ""))
	want := []string{"Server/" + uuidA + " EnrolledAgain×1", "EnrollmentToken/abcdef TokenUsed×1"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("events = %v, want %v", got, want)
	}
	// A dry run or a refused command records nothing.
	res := h.apply(withRules(RulesEvents, enrollCmd("abcdef.wrongwrongwrongw", uuidA, []string{"52:54:00:00:00:01"}, inventory(16, 64))))
	if res.Err == nil {
		t.Fatal("a wrong secret enrolled")
	}
	if n := len(listEvents(t, h.f, "", "")); n != 2 {
		t.Errorf("%d Events after a refused enrollment, want 2", n)
	}
}

// A worker's reboot records its Events in the order the work was done:
// claim, Revision rendered, Lease to drain, drain started and finished,
// Lease granted, boot assessed Good, Lease released; a failed boot and a
// blocked drain are Warnings.
func TestRebootEventsInOrder(t *testing.T) {
	h := newHarness(t, Options{})
	h.rules = RulesEvents
	h.mustApply(h.objects(append(baseObjects(), poolObj("workers", "prod", func(s *roostv1.PoolSpec) { s.Replicas = nil }))...))
	claimedServer(h, uuidA, "52:54:00:00:00:01", "w1", "workers")
	h.mustApply(putRevisionCmd(uuidA, "w1", 1))
	h.mustApply(bootReport(uuidA, 1, "True"))
	h.mustApply(putRevisionCmd(uuidA, "w1", 2))
	drain := grantLeaseCmd(uuidA, 2, timeAt(h.idx).Add(time.Hour), 1)
	drain.GetGrantLease().Phase = LeaseDraining
	h.mustApply(drain)
	h.mustApply(machineClusterCmd("w1", "w1", &roostv1.Condition{Type: MachineDrained, Status: "False", Reason: "Draining", Message: "cordoning and draining Node w1"}))
	h.mustApply(machineClusterCmd("w1", "w1", &roostv1.Condition{Type: MachineDrained, Status: "False", Reason: "Draining", Message: "cordoning and draining Node w1"})) // unchanged
	h.mustApply(machineClusterCmd("w1", "w1", &roostv1.Condition{Type: MachineDrained, Status: "True", Reason: "Drained", Message: "Node w1 is drained"}))
	h.mustApply(grantLeaseCmd(uuidA, 2, timeAt(h.idx).Add(time.Hour), 1))
	h.mustApply(bootReport(uuidA, 2, "True"))
	h.mustApply(bootReport(uuidA, 2, "True")) // a report that changes nothing
	h.mustApply(putRevisionCmd(uuidA, "w1", 3))
	h.mustApply(bootReport(uuidA, 2, "True", &roostv1.FailedRevision{Number: 3, Reason: "ran out of tries"}))
	h.mustApply(machineClusterCmd("w1", "w1", &roostv1.Condition{Type: MachineDrained, Status: "False", Reason: "DrainBlocked", Message: "PodDisruptionBudget web"}))
	for _, reachable := range []bool{false, false, true} {
		h.mustApply(&roostv1.Command{Command: &roostv1.Command_SetServerReachability{SetServerReachability: &roostv1.SetServerReachability{
			Changes: []*roostv1.ReachabilityChange{{Name: uuidA, Reachable: reachable, LastSeen: timestamppb.New(t0)}}}}})
	}

	var got []string
	for _, e := range listAllEvents(t, h.f) {
		io := e.GetSpec().GetInvolvedObject()
		got = append(got, fmt.Sprintf("%s/%s %s %s×%d", io.GetKind(), io.GetName(), e.GetSpec().GetType(), e.GetSpec().GetReason(), e.GetStatus().GetCount()))
	}
	srv := "Server/" + uuidA
	want := []string{
		"Machine/w1 Normal Created×1",
		srv + " Normal RevisionRendered×1", // Revision 1
		srv + " Normal BootGood×1",
		srv + " Normal RevisionRendered×1", // Revision 2
		srv + " Normal LeaseDraining×1",
		"Machine/w1 Normal DrainStarted×1",
		"Machine/w1 Normal DrainFinished×1",
		srv + " Normal LeaseGranted×1",
		srv + " Normal BootGood×1",
		srv + " Normal LeaseReleased×1",
		srv + " Normal RevisionRendered×1", // Revision 3
		srv + " Warning BootFailed×1",
		"Machine/w1 Warning DrainBlocked×1",
		srv + " Warning Unreachable×1",
		srv + " Normal Reachable×1",
	}
	// The enrollment and the token's use come first.
	if len(got) < len(want) || strings.Join(got[len(got)-len(want):], "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant them to end with:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// listAllEvents returns the Events in the order they were first recorded.
func listAllEvents(t *testing.T, f *FSM) []*roostv1.Event {
	t.Helper()
	evs := listEvents(t, f, "", "")
	slices.SortStableFunc(evs, func(a, b *roostv1.Event) int {
		if c := cmp.Compare(a.GetMetadata().GetCreateIndex(), b.GetMetadata().GetCreateIndex()); c != 0 {
			return c
		}
		var ia, ib uint64
		var na, nb int
		fmt.Sscanf(a.GetMetadata().GetName(), "ev-%d-%d", &ia, &na)
		fmt.Sscanf(b.GetMetadata().GetName(), "ev-%d-%d", &ib, &nb)
		return cmp.Compare(na, nb)
	})
	return evs
}
