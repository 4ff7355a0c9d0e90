package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Data requests: the hub asks, on the agent's stream, for the journal
// (HubMessage.read_journal) or a support bundle (collect_bundle); the
// agent reads it in a goroutine of its own and sends it back in DataChunk
// messages of at most chunk_bytes, no more than the hub has room for: it
// may send `window` chunks at first and one more for every chunk the hub
// granted back (data_credit), so a slow reader at the far end stops
// journalctl here instead of filling the hub's memory. A cancel (or the
// end of the stream) stops the read. The session's loop does every Send
// (sendData), as for all its messages.

// Bounds of data requests.
const (
	// MaxDataRequests is how many data requests one stream serves at once;
	// more are refused.
	MaxDataRequests = 4
	// DefaultDataChunk and MaxDataChunk bound DataChunk.data (bytes).
	DefaultDataChunk = 16 << 10
	MaxDataChunk     = 1 << 20
	// MaxDataWindow bounds the chunks sent ahead of credit.
	MaxDataWindow = 16
	// DefaultDataBytes bounds a request that names no max_bytes.
	DefaultDataBytes = 64 << 20
)

// errDataLimit ends a read that reached its request's max_bytes.
var errDataLimit = errors.New("the request's byte limit is reached")

// dataRequest is one request in progress on a session.
type dataRequest struct {
	// credit holds one token per chunk the agent may send.
	credit chan struct{}
	cancel context.CancelFunc
}

// dataParams are the bounds of a request, as the hub gave them, checked.
type dataParams struct {
	id       string
	maxBytes int64
	chunk    int
	window   int
}

func newDataParams(id string, maxBytes int64, chunk, window int32) dataParams {
	p := dataParams{id: id, maxBytes: maxBytes, chunk: int(chunk), window: int(window)}
	if p.maxBytes <= 0 {
		p.maxBytes = DefaultDataBytes
	}
	if p.chunk <= 0 || p.chunk > MaxDataChunk {
		p.chunk = DefaultDataChunk
	}
	p.window = min(max(p.window, 1), MaxDataWindow)
	return p
}

// startData starts read for request p in a goroutine of its own, or
// refuses it at once (an id in use, too many requests).
func (s *session) startData(p dataParams, read func(ctx context.Context, w io.Writer) error) {
	refuse := func(why string) {
		s.queueData(&roostv1.DataChunk{RequestId: p.id, Done: true, Error: why})
	}
	if p.id == "" {
		return // nothing to answer to
	}
	if _, ok := s.data[p.id]; ok {
		refuse("request " + p.id + " is already running")
		return
	}
	if len(s.data) >= MaxDataRequests {
		refuse(fmt.Sprintf("the agent serves %d log or bundle requests already; retry when one ends", MaxDataRequests))
		return
	}
	if s.data == nil {
		s.data = map[string]*dataRequest{}
	}
	if s.dataOut == nil {
		s.dataOut = make(chan *roostv1.DataChunk)
	}
	ctx, cancel := context.WithCancel(s.sctx)
	r := &dataRequest{credit: make(chan struct{}, MaxDataWindow), cancel: cancel}
	for range p.window {
		r.credit <- struct{}{}
	}
	s.data[p.id] = r
	out := s.dataOut
	go func() {
		defer cancel()
		// an empty first chunk (no credit needed) tells the hub the
		// request is under way, before any data is read
		select {
		case out <- &roostv1.DataChunk{RequestId: p.id}:
		case <-ctx.Done():
			return
		}
		w := &dataWriter{ctx: ctx, id: p.id, out: out, credit: r.credit, chunk: p.chunk, left: p.maxBytes}
		err := read(ctx, w)
		last := &roostv1.DataChunk{RequestId: p.id, Done: true, Truncated: w.truncated}
		switch {
		case w.truncated:
		case ctx.Err() != nil:
			return // canceled, or the stream ended: nobody listens
		case err != nil:
			last.Error = err.Error()
		}
		select {
		case out <- last:
		case <-ctx.Done():
		}
	}()
}

// queueData sends c from a goroutine of its own through the loop (a
// refusal, answered while the loop runs onReceive).
func (s *session) queueData(c *roostv1.DataChunk) {
	if s.dataOut == nil {
		s.dataOut = make(chan *roostv1.DataChunk)
	}
	out, done := s.dataOut, s.sctx.Done()
	go func() {
		select {
		case out <- c:
		case <-done:
		}
	}()
}

// onDataCredit grants a request more chunks, or cancels it.
func (s *session) onDataCredit(c *roostv1.DataCredit) {
	r, ok := s.data[c.GetRequestId()]
	if !ok {
		return // ended meanwhile
	}
	if c.GetCancel() {
		r.cancel()
		delete(s.data, c.GetRequestId())
		return
	}
	for range min(max(int(c.GetChunks()), 0), MaxDataWindow) {
		select {
		case r.credit <- struct{}{}:
		default: // more than the window: the hub broke the protocol; ignore
		}
	}
}

// sendData sends a chunk a request's goroutine produced; the last one ends
// the request.
func (s *session) sendData(c *roostv1.DataChunk) error {
	if c.GetDone() {
		delete(s.data, c.GetRequestId())
	}
	return s.send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_DataChunk{DataChunk: c}})
}

// stopData cancels every request of the session (it ended).
func (s *session) stopData() {
	for id, r := range s.data {
		r.cancel()
		delete(s.data, id)
	}
}

// dataWriter cuts what is written into chunks of at most chunk bytes and
// hands each to the session once it holds a credit, up to left bytes in
// all (then it fails with errDataLimit and sets truncated).
type dataWriter struct {
	ctx       context.Context
	id        string
	out       chan<- *roostv1.DataChunk
	credit    <-chan struct{}
	chunk     int
	left      int64
	truncated bool
}

func (w *dataWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if w.left <= 0 {
			w.truncated = true
			return n, errDataLimit
		}
		k := int(min(int64(min(len(p), w.chunk)), w.left))
		select {
		case <-w.credit:
		case <-w.ctx.Done():
			return n, w.ctx.Err()
		}
		c := &roostv1.DataChunk{RequestId: w.id, Data: bytes.Clone(p[:k])}
		select {
		case w.out <- c:
		case <-w.ctx.Done():
			return n, w.ctx.Err()
		}
		p, n, w.left = p[k:], n+k, w.left-int64(k)
	}
	return n, nil
}
