package controller

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// DefaultEventFlush is how often an EventRecorder proposes what it
// queued.
const DefaultEventFlush = time.Second

// EventRecorder records a controller's decisions as Events (the
// operations log, state.RecordEvents) on the leader. Record queues an
// Event only when it differs from the last one recorded for the same
// object and reason, so a decision repeated at every poll (a Server told
// to wait at each AcquireLease) is proposed once; Run proposes the queue
// as one RecordEvents command per DefaultEventFlush (at most
// state.MaxRecordEvents each), so many Servers deciding at once cost few
// Raft entries. A nil *EventRecorder records nothing.
type EventRecorder struct {
	// Source is EventSpec.source, the controller's name.
	Source string
	// Propose writes a command through Raft (on the leader).
	Propose func(context.Context, *roostv1.Command) error
	// IsLeader says whether this member leads; a follower drops what it
	// is given (the leader decides, and records).
	IsLeader func() bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Flush is the proposing period; zero means DefaultEventFlush.
	Flush time.Duration
	Log   *slog.Logger

	mu      sync.Mutex
	last    map[string]string // "Kind/name/reason" → type and message last queued
	pending []*roostv1.EventRecord
}

// Record queues an Event about kind/name (typ state.EventNormal or
// state.EventWarning, reason a CamelCase word) unless the same object and
// reason last recorded the same type and message.
func (r *EventRecorder) Record(kind, name, typ, reason, message string) {
	if r == nil || (r.IsLeader != nil && !r.IsLeader()) {
		return
	}
	key, val := kind+"/"+name+"/"+reason, typ+"\x00"+message
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[string]string{}
	}
	if r.last[key] == val {
		return
	}
	r.last[key] = val
	r.pending = append(r.pending, &roostv1.EventRecord{InvolvedObject: &roostv1.EventObject{Kind: kind, Name: name},
		Type: typ, Reason: reason, Message: message, Source: r.Source})
}

// Forget drops what was recorded about kind/name, so the same decision is
// recorded again (e.g. once a Server's wait is over).
func (r *EventRecorder) Forget(kind, name string) {
	if r == nil {
		return
	}
	prefix := kind + "/" + name + "/"
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.last {
		if len(k) > len(prefix) && k[:len(prefix)] == prefix {
			delete(r.last, k)
		}
	}
}

// Run proposes the queued Events every Flush until ctx ends.
func (r *EventRecorder) Run(ctx context.Context) {
	if r == nil {
		return
	}
	every := r.Flush
	if every <= 0 {
		every = DefaultEventFlush
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.FlushNow(ctx)
		}
	}
}

// FlushNow proposes what is queued, in commands of at most
// state.MaxRecordEvents. Events that fail to propose (lost leadership)
// are dropped and forgotten, so they are recorded again when decided
// again; a member that does not lead drops its queue and forgets all it
// recorded (the next term records its decisions anew, and the hub counts
// a repeat).
func (r *EventRecorder) FlushNow(ctx context.Context) {
	r.mu.Lock()
	batch := r.pending
	r.pending = nil
	if r.IsLeader != nil && !r.IsLeader() {
		// Not leading: forget what was recorded, so the memory does not
		// outlive the term and the next term records its decisions anew.
		r.last, batch = nil, nil
	}
	r.mu.Unlock()
	for len(batch) > 0 {
		n := min(len(batch), state.MaxRecordEvents)
		now := time.Now()
		if r.Now != nil {
			now = r.Now()
		}
		cmd := &roostv1.Command{Time: timestamppb.New(now), Command: &roostv1.Command_RecordEvents{RecordEvents: &roostv1.RecordEvents{Events: batch[:n]}}}
		if err := r.Propose(ctx, cmd); err != nil {
			r.log().Warn("recording events failed", "source", r.Source, "events", n, "err", err)
			r.mu.Lock()
			for _, e := range batch[:n] {
				delete(r.last, e.GetInvolvedObject().GetKind()+"/"+e.GetInvolvedObject().GetName()+"/"+e.GetReason())
			}
			r.mu.Unlock()
		}
		batch = batch[n:]
	}
}

func (r *EventRecorder) log() *slog.Logger {
	if r.Log == nil {
		return slog.Default()
	}
	return r.Log
}
