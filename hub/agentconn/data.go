package agentconn

import (
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Data requests (roostctl server logs, server bundle): the member that
// holds an agent's stream asks the agent for data (a HubMessage with a
// request ID) and receives the answer as DataChunk messages on the same
// stream. OpenData registers the request; the stream's receive loop hands
// every DataChunk to Deliver, which queues it for the request without
// ever blocking the stream (the agent sends only as many chunks as it was
// granted, and a chunk beyond them fails the request). Nothing is kept per
// agent while no request runs: requests live in one map of the Registry.

// Bounds of data requests, which bound what the hub holds for them: a
// request queues at most DataWindow chunks of at most DataChunkBytes, and
// an agent has at most MaxDataRequestsPerAgent requests at once, so the
// data queued for one agent stays within 64 KiB.
const (
	// DataChunkBytes is the largest DataChunk.data the hub asks for.
	DataChunkBytes = 16 << 10
	// DataWindow is how many chunks an agent may send ahead of credit.
	DataWindow = 2
	// MaxDataRequestsPerAgent is how many data requests may run on one
	// agent at once.
	MaxDataRequestsPerAgent = 2
)

// Errors of data requests.
var (
	// ErrNotConnected: the Server's agent has no stream on this member.
	ErrNotConnected = errors.New("the agent is not connected to this member")
	// ErrTooManyRequests: the agent runs MaxDataRequestsPerAgent already.
	ErrTooManyRequests = fmt.Errorf("the agent serves %d log or bundle requests already; retry when one ends", MaxDataRequestsPerAgent)
	// ErrStreamEnded: the agent's stream ended during the request.
	ErrStreamEnded = errors.New("the agent's stream to the hub ended during the request (it reconnects; retry)")
	// ErrOverrun: the agent sent more chunks than it was granted.
	ErrOverrun = errors.New("the agent sent more data than it was granted")
)

// DataRequest is one data request to an agent. Read its chunks from C
// until one is Done, or until Failed is closed (then Err says why); Close
// it when done (and send the agent a cancel if it was not Done).
type DataRequest struct {
	id, server string
	stream     *Stream
	reg        *Registry
	c          chan *roostv1.DataChunk
	failed     chan struct{}
	once       sync.Once
	err        error
}

// ID is the request's ID, to put into the request sent to the agent.
func (d *DataRequest) ID() string { return d.id }

// Stream is the agent stream the request runs on.
func (d *DataRequest) Stream() *Stream { return d.stream }

// C delivers the agent's chunks, in order.
func (d *DataRequest) C() <-chan *roostv1.DataChunk { return d.c }

// Failed is closed when the request failed (Err).
func (d *DataRequest) Failed() <-chan struct{} { return d.failed }

// Err is why the request failed, once Failed is closed.
func (d *DataRequest) Err() error {
	select {
	case <-d.failed:
		return d.err
	default:
		return nil
	}
}

func (d *DataRequest) fail(err error) {
	d.once.Do(func() {
		d.err = err
		close(d.failed)
	})
}

// Close forgets the request; chunks for it are dropped from then on.
func (d *DataRequest) Close() {
	r := d.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.data[d.id] == d {
		delete(r.data, d.id)
	}
}

// OpenData registers a data request to the agent of Server name on this
// member. Errors: ErrNotConnected, ErrTooManyRequests.
func (r *Registry) OpenData(name string) (*DataRequest, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.streams[name]
	if st == nil {
		return nil, ErrNotConnected
	}
	n := 0
	for _, d := range r.data {
		if d.server == name {
			n++
		}
	}
	if n >= MaxDataRequestsPerAgent {
		return nil, ErrTooManyRequests
	}
	// the first chunk (empty: the agent's acknowledgement) and the last
	// (Done, empty) come without credit: two more slots
	d := &DataRequest{id: uuid.NewString(), server: name, stream: st, reg: r,
		c: make(chan *roostv1.DataChunk, DataWindow+2), failed: make(chan struct{})}
	if r.data == nil {
		r.data = map[string]*DataRequest{}
	}
	r.data[d.id] = d
	return d, nil
}

// Deliver hands a chunk the agent of Server name sent on stream st to its
// request. A chunk of an unknown (ended) request, or of another Server's,
// is dropped; a chunk beyond the request's window, or larger than
// DataChunkBytes, fails it (ErrOverrun).
// It never blocks. Kept out of the frame of the stream's handler
// (noinline), which every agent's stream holds for its life.
//
//go:noinline
func (r *Registry) Deliver(name string, st *Stream, c *roostv1.DataChunk) {
	r.mu.Lock()
	d := r.data[c.GetRequestId()]
	r.mu.Unlock()
	if d == nil || d.server != name || d.stream != st {
		return
	}
	if len(c.GetData()) > DataChunkBytes {
		d.fail(ErrOverrun)
		return
	}
	select {
	case d.c <- c:
	default:
		d.fail(ErrOverrun)
	}
}

// endData fails the requests running on st (its stream ended). r.mu is
// held.
func (r *Registry) endData(st *Stream) {
	for _, d := range r.data {
		if d.stream == st {
			d.fail(ErrStreamEnded)
		}
	}
}

// DataRequests returns how many data requests are open on this member.
func (r *Registry) DataRequests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.data)
}
