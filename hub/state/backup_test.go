package state

import (
	"io"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// A saved state summarizes (index, CA, objects per kind), restores with the
// hub's current members in place of the saved ones, and is refused when
// another CA made it or it does not load.
func TestSaveSummarizeRestorePayload(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(initCACmd("CERT-A", "KEY-A"))
	h.mustApply(putMemberCmd("hub-1", "10.0.0.1:7444", "10.0.0.1:7443"))
	h.mustApply(h.objects(windowObj("tuesday"), machineClassObj("standard")))
	data, index, err := h.f.SaveState()
	if err != nil || index != h.idx {
		t.Fatalf("SaveState: index %d (want %d), %v", index, h.idx, err)
	}
	sum, err := SummarizeState(data)
	if err != nil || sum.Index != index || string(sum.CAPEM) != "CERT-A" || sum.Objects["MaintenanceWindow"] != 1 || sum.Objects["MachineClass"] != 1 {
		t.Fatalf("SummarizeState: %+v, %v", sum, err)
	}

	// The hub's members changed since: the payload carries today's.
	h.mustApply(putMemberCmd("hub-2", "10.0.0.2:7444", "10.0.0.2:7443"))
	payload, err := h.f.RestorePayload(data)
	if err != nil {
		t.Fatal(err)
	}
	snap := &roostv1.Snapshot{}
	if err := proto.Unmarshal(payload, snap); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range snap.GetMembers() {
		ids = append(ids, m.GetId())
	}
	if !slices.Equal(ids, []string{"hub-1", "hub-2"}) || len(snap.GetObjects()) != 2 {
		t.Fatalf("payload members %v, %d objects", ids, len(snap.GetObjects()))
	}
	// Restored, the FSM holds the saved objects.
	h.mustApply(deleteCmd("MaintenanceWindow", "tuesday"))
	if err := h.f.Restore(io.NopCloser(strings.NewReader(string(payload)))); err != nil {
		t.Fatal(err)
	}
	if _, err := h.f.Get("MaintenanceWindow", "tuesday"); err != nil {
		t.Errorf("restored state lacks the window: %v", err)
	}

	other := newHarness(t, Options{})
	other.mustApply(initCACmd("CERT-B", "KEY-B"))
	if _, err := other.f.RestorePayload(data); err == nil || !strings.Contains(err.Error(), "another CA") {
		t.Errorf("another hub's state: %v", err)
	}
	if _, err := h.f.RestorePayload([]byte("not a state")); err == nil {
		t.Error("garbage restored")
	}
	if _, err := SummarizeState([]byte{0xff}); err == nil {
		t.Error("garbage summarized")
	}
}

// TestRestoreWarnings: what a restore undoes is named, in the right
// number: Servers enrolled since, tokens created since, tokens revoked
// since.
func TestRestoreWarnings(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(putEnrollTokenCmd("abcdef", tokSecret))
	data, _, err := h.f.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	h.mustApply(enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:01"}, inventory(8, 16)))
	h.mustApply(&roostv1.Command{Command: &roostv1.Command_RevokeEnrollmentToken{RevokeEnrollmentToken: &roostv1.RevokeEnrollmentToken{Name: "abcdef"}}})
	c := putEnrollTokenCmd("ghijkl", "ghijkl.0123456789abcdef")
	c.GetPutEnrollmentToken().Uid = "00000000-0000-4000-8000-00000000cccc"
	h.mustApply(c)
	warnings, err := h.f.RestoreWarnings(data)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(warnings, "\n")
	for _, want := range []string{
		"1 Server enrolled since the snapshot is not in it (" + uuidA + "): their agents record them again",
		"1 enrollment token revoked since the snapshot is active again (abcdef)",
		"1 enrollment token created since the snapshot is not in it (ghijkl)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings lack %q:\n%s", want, got)
		}
	}
}
