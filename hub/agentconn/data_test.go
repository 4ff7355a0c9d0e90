package agentconn

import (
	"errors"
	"testing"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// TestDataRequests: a request needs the agent's stream here; an agent runs
// at most MaxDataRequestsPerAgent; chunks reach their request only from
// its Server's stream, in order; a chunk beyond the window (or too large)
// fails the request instead of blocking; the stream's end fails its
// requests; a closed request leaves nothing behind.
func TestDataRequests(t *testing.T) {
	r := newRegistry()
	if _, err := r.OpenData("s1"); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("without a stream: %v", err)
	}
	if r.data != nil {
		t.Error("a refused request allocated the request table")
	}
	st, other := NewStream((&recorder{}).send), NewStream((&recorder{}).send)
	r.Register("s1", st)
	r.Register("s2", other)
	d, err := r.OpenData("s1")
	if err != nil {
		t.Fatal(err)
	}
	if d.Stream() != st {
		t.Error("the request runs on another stream")
	}
	d2, err := r.OpenData("s1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.OpenData("s1"); !errors.Is(err, ErrTooManyRequests) {
		t.Errorf("a third request: %v", err)
	}
	if _, err := r.OpenData("s2"); err != nil {
		t.Errorf("another Server's request: %v", err)
	}

	chunk := func(id, data string, done bool) *roostv1.DataChunk {
		return &roostv1.DataChunk{RequestId: id, Data: []byte(data), Done: done}
	}
	r.Deliver("s2", other, chunk(d.ID(), "forged", false)) // another Server's agent: dropped
	r.Deliver("s1", st, chunk("unknown", "x", false))      // no such request: dropped
	r.Deliver("s1", st, chunk(d.ID(), "", false))          // the acknowledgement
	r.Deliver("s1", st, chunk(d.ID(), "a", false))
	r.Deliver("s1", st, chunk(d.ID(), "b", false))
	r.Deliver("s1", st, chunk(d.ID(), "", true))
	var got string
	for range DataWindow + 2 {
		c := <-d.C()
		got += string(c.GetData())
		if c.GetDone() {
			got += "|done"
		}
	}
	if got != "ab|done" || d.Err() != nil {
		t.Errorf("chunks %q, err %v", got, d.Err())
	}

	// more than the window: the request fails, Deliver does not block
	for range DataWindow + 3 {
		r.Deliver("s1", st, chunk(d2.ID(), "x", false))
	}
	<-d2.Failed()
	if !errors.Is(d2.Err(), ErrOverrun) {
		t.Errorf("overrun: %v", d2.Err())
	}
	d2.Close()
	d3, err := r.OpenData("s1")
	if err != nil {
		t.Fatal(err)
	}
	r.Deliver("s1", st, &roostv1.DataChunk{RequestId: d3.ID(), Data: make([]byte, DataChunkBytes+1)})
	if !errors.Is(d3.Err(), ErrOverrun) {
		t.Errorf("a chunk over %d bytes: %v", DataChunkBytes, d3.Err())
	}
	d3.Close()

	// the stream ends: its requests fail, other Servers' do not
	d4, _ := r.OpenData("s1")
	r.Unregister("s1", st)
	<-d4.Failed()
	if !errors.Is(d4.Err(), ErrStreamEnded) {
		t.Errorf("after the stream ended: %v", d4.Err())
	}
	d.Close()
	d4.Close()
	if n := r.DataRequests(); n != 1 {
		t.Errorf("%d requests open, want the other Server's 1", n)
	}
}
