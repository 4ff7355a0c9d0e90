package state

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// withID makes cmd carry request id with fingerprint fp under rules.
func withID(cmd *roostv1.Command, id, fp string, rules uint32) *roostv1.Command {
	cmd.RequestId, cmd.RequestFingerprint, cmd.RulesVersion = id, fp, rules
	return cmd
}

// applyRepeat applies cmd at the next index like harness.apply, but allows
// the result's Index to be an earlier one (a repeated request).
func (h *harness) applyRepeat(cmd *roostv1.Command) *ApplyResult {
	h.tb.Helper()
	if cmd.Time == nil {
		cmd.Time = timestamppb.New(timeAt(h.idx + 1))
	}
	h.idx++
	return h.f.Apply(&raft.Log{Index: h.idx, Term: 1, Type: raft.LogCommand, Data: mustMarshal(h.tb, cmd)}).(*ApplyResult)
}

// A retried request (same ID and fingerprint) changes nothing and returns
// the first command's result, also after the state changed meanwhile and
// after a snapshot round trip; an ID reused for another request is
// refused; failed commands and dry runs record nothing; older rules ignore
// the ID.
func TestRequestIDAppliesAtMostOnce(t *testing.T) {
	h := newHarness(t, Options{})
	first := h.mustApply(withID(h.objects(clusterObj("prod", nil)), "req-1", "fp-1", RulesRequestIDs))
	if first.Repeated || len(first.Results) != 1 || first.Results[0].GetAction() != ActionCreated {
		t.Fatalf("first apply: %+v", first)
	}
	// The retry carries another spec (a new UID, say): it must not apply.
	retry := h.objects(clusterObj("prod", map[string]string{"changed": "yes"}))
	again := h.applyRepeat(withID(retry, "req-1", "fp-1", RulesRequestIDs))
	if again.Err != nil || !again.Repeated || again.Index != first.Index || len(again.Results) != 1 || again.Results[0].GetAction() != ActionCreated {
		t.Fatalf("retry: %+v, want the first result (index %d, created)", again, first.Index)
	}
	if o, _ := h.f.Get("Cluster", "prod"); o.GetCluster().GetMetadata().GetLabels()["changed"] != "" {
		t.Fatal("the retry changed the object")
	}
	if h.f.LastIndex() != h.idx {
		t.Fatalf("LastIndex %d, want %d (a repeated request still advances it)", h.f.LastIndex(), h.idx)
	}

	// A delete retried after the object is gone returns "deleted", not NotFound.
	del := h.mustApply(withID(deleteCmd("Cluster", "prod"), "req-2", "fp-2", RulesRequestIDs))
	if again := h.applyRepeat(withID(deleteCmd("Cluster", "prod"), "req-2", "fp-2", RulesRequestIDs)); again.Err != nil || again.Index != del.Index {
		t.Fatalf("retried delete: %+v", again)
	}

	// Another request under a used ID is refused.
	wantCode(t, h.applyRepeat(withID(h.objects(clusterObj("other", nil)), "req-1", "fp-other", RulesRequestIDs)).Err, codes.FailedPrecondition)
	if _, err := h.f.Get("Cluster", "other"); err == nil {
		t.Fatal("a refused reuse of an ID applied")
	}

	// A failed command records nothing: the same request may run again.
	wantCode(t, h.apply(withID(deleteCmd("Cluster", "missing"), "req-3", "fp-3", RulesRequestIDs)).Err, codes.NotFound)
	if _, ok := h.f.RequestRecord("req-3"); ok {
		t.Fatal("a failed command was recorded")
	}
	// Dry runs neither.
	dry := h.objects(clusterObj("dry", nil))
	dry.GetApplyObjects().DryRun = true
	h.mustApply(withID(dry, "req-4", "fp-4", RulesRequestIDs))
	if _, ok := h.f.RequestRecord("req-4"); ok {
		t.Fatal("a dry run was recorded")
	}

	// Under older rules the ID is ignored, as older members ignore it.
	h.mustApply(withID(h.objects(clusterObj("old", nil)), "req-5", "fp-5", RulesRequestIDs-1))
	if _, ok := h.f.RequestRecord("req-5"); ok {
		t.Fatal("a command of older rules was recorded")
	}

	// Records survive a snapshot: a restored member repeats alike.
	restored := restoreNew(t, snapshotBytes(t, h.f))
	rec, ok := restored.RequestRecord("req-1")
	if !ok || rec.GetIndex() != first.Index || rec.GetFingerprint() != "fp-1" {
		t.Fatalf("restored record of req-1: %v %v", rec, ok)
	}
	h2 := &harness{tb: t, f: restored, idx: h.idx}
	if again := h2.applyRepeat(withID(h2.objects(clusterObj("prod", nil)), "req-1", "fp-1", RulesRequestIDs)); !again.Repeated || again.Index != first.Index {
		t.Fatalf("retry after restore: %+v", again)
	}

	// An ID longer than MaxRequestIDBytes is refused.
	long := make([]byte, MaxRequestIDBytes+1)
	for i := range long {
		long[i] = 'x'
	}
	wantCode(t, h.applyRepeat(withID(h.objects(clusterObj("long", nil)), string(long), "fp", RulesRequestIDs)).Err, codes.InvalidArgument)
}

// Records expire by the time of newer commands carrying request IDs
// (RequestRecordTTL) and by index (RequestRecordWindow), oldest first.
func TestRequestRecordsExpire(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(withID(h.objects(clusterObj("a", nil)), "old", "fp", RulesRequestIDs))
	// Within the TTL: kept.
	late := h.objects(clusterObj("b", nil))
	late.Time = timestamppb.New(timeAt(h.idx + 1).Add(RequestRecordTTL - time.Minute))
	h.mustApply(withID(late, "mid", "fp", RulesRequestIDs))
	if _, ok := h.f.RequestRecord("old"); !ok {
		t.Fatal("record dropped within its TTL")
	}
	// Past the TTL of "old" (not of "mid"): "old" goes.
	later := h.objects(clusterObj("c", nil))
	later.Time = timestamppb.New(timeAt(1).Add(RequestRecordTTL + time.Minute))
	h.mustApply(withID(later, "new", "fp", RulesRequestIDs))
	if _, ok := h.f.RequestRecord("old"); ok {
		t.Fatal("record kept past its TTL")
	}
	for _, id := range []string{"mid", "new"} {
		if _, ok := h.f.RequestRecord(id); !ok {
			t.Fatalf("record %s dropped", id)
		}
	}
	// A command RequestRecordWindow entries later drops the rest by index.
	h.idx += RequestRecordWindow
	far := h.objects(clusterObj("d", nil))
	far.Time = later.Time
	h.mustApply(withID(far, "far", "fp", RulesRequestIDs))
	for _, id := range []string{"mid", "new"} {
		if _, ok := h.f.RequestRecord(id); ok {
			t.Fatalf("record %s kept %d entries later", id, RequestRecordWindow)
		}
	}
	if _, ok := h.f.RequestRecord("far"); !ok {
		t.Fatal("the newest record was dropped")
	}
}
