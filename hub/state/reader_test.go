package state

import (
	"bytes"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"
)

func TestReaderLatestRevision(t *testing.T) {
	h := newHarness(t, Options{})
	standalonePool(h)
	claimedServer(h, uuidA, "52:54:00:00:00:01", "edge-1", "edge")
	if r := h.f.Reader().LatestRevision(uuidA); r != nil {
		t.Fatalf("latest of a Server without Revisions: %v", r)
	}
	for n := int64(1); n <= 11; n++ { // 10 and 11 sort before 2 by name
		h.mustApply(putRevisionCmd(uuidA, "edge-1", n))
		got := h.f.Reader().LatestRevision(uuidA)
		if got.GetSpec().GetNumber() != n || !proto.Equal(got, h.f.LatestRevision(uuidA)) {
			t.Fatalf("after Revision %d: latest %v", n, got)
		}
	}
	if r := h.f.Reader().LatestRevision("gone"); r != nil {
		t.Errorf("latest of an unknown Server: %v", r)
	}
}

func TestReaderWatch(t *testing.T) {
	h := newHarness(t, Options{})
	standalonePool(h)
	claimedServer(h, uuidA, "52:54:00:00:00:01", "edge-1", "edge")
	r1 := h.f.Reader()
	srv, rev := r1.Watch(kindServer), r1.Watch(kindRevision)
	if srv == nil || rev == nil || h.f.Reader().Watch("Nope") != nil {
		t.Fatal("Watch of a known kind is nil, or of an unknown one is not")
	}
	// Nothing written: the same channels.
	if r2 := h.f.Reader(); r2.Watch(kindServer) != srv || r2.Watch(kindRevision) != rev {
		t.Fatal("new channels without a write")
	}
	// A Revision written (and a refused write): the Server's channel stays.
	h.mustApply(putRevisionCmd(uuidA, "edge-1", 1))
	if h.apply(putRevisionCmd(uuidA, "edge-1", 5)).Err == nil {
		t.Fatal("test setup: PutRevision 5 was accepted")
	}
	r3 := h.f.Reader()
	if r3.Watch(kindRevision) == rev {
		t.Fatal("the Revision channel did not change after a write")
	}
	select {
	case <-rev:
	default:
		t.Fatal("the old Revision channel is not closed")
	}
	// A restored state has new channels, even for unchanged kinds.
	if err := h.f.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, h.f)))); err != nil {
		t.Fatal(err)
	}
	if h.f.Reader().Watch(kindRevision) == r3.Watch(kindRevision) {
		t.Error("the same channel after a restore")
	}
}
