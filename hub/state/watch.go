package state

import (
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Errors a Subscription ends with (see Subscription.Err). Both mean the
// watcher must re-list and watch again from the list's index.
var (
	// ErrWatchFellBehind: the subscriber did not drain its buffer fast enough.
	ErrWatchFellBehind = &apierror.Error{Code: codes.Aborted, Message: "watch fell behind; re-list"}
	// ErrWatchRestored: the state was replaced by a snapshot (Restore).
	ErrWatchRestored = &apierror.Error{Code: codes.Aborted, Message: "state restored from snapshot; re-list"}
)

// event is a published watch event and the CamelCase kind of its object.
type event struct {
	kind string
	ev   *roostv1.WatchEvent
}

// newEvent builds an event holding a clone of obj, so the event never
// aliases the store.
func newEvent(typ roostv1.WatchEvent_Type, kind string, obj *roostv1.Object, idx uint64) event {
	return event{kind: kind, ev: &roostv1.WatchEvent{
		Type: typ, Object: proto.Clone(obj).(*roostv1.Object), Index: idx,
	}}
}

// broker fans committed events out to subscriptions and keeps a ring of
// recent events for replay.
type broker struct {
	mu      sync.Mutex
	ring    []event // circular; len(ring) is the capacity
	start   int     // position of the oldest event
	n       int     // events held
	floor   uint64  // every event with Index > floor is in the ring
	bufSize int
	subs    map[*Subscription]struct{}
}

func newBroker(ring, buf int) *broker {
	return &broker{ring: make([]event, ring), bufSize: buf, subs: map[*Subscription]struct{}{}}
}

// publish records evs (all of one committed Apply, in order) and delivers
// them. It never blocks: a subscription whose buffer is full is closed
// with ErrWatchFellBehind.
func (b *broker) publish(evs []event) {
	if len(evs) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range evs {
		b.push(e)
	}
	for s := range b.subs {
		for _, e := range evs {
			if !s.wants(e) {
				continue
			}
			select {
			case s.ch <- e.ev:
			default:
				b.end(s, ErrWatchFellBehind)
			}
			if s.ended {
				break
			}
		}
	}
}

func (b *broker) push(e event) {
	if len(b.ring) == 0 {
		b.floor = e.ev.GetIndex()
		return
	}
	if b.n == len(b.ring) {
		b.floor = b.ring[b.start].ev.GetIndex()
		b.ring[b.start] = event{}
		b.start = (b.start + 1) % len(b.ring)
		b.n--
	}
	b.ring[(b.start+b.n)%len(b.ring)] = e
	b.n++
}

// reset drops the ring (replay starts after index) and ends every
// subscription with err.
func (b *broker) reset(index uint64, err *apierror.Error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.ring)
	b.start, b.n, b.floor = 0, 0, index
	for s := range b.subs {
		b.end(s, err)
	}
}

// end unregisters s and closes its channel; b.mu must be held.
func (b *broker) end(s *Subscription, err *apierror.Error) {
	if s.ended {
		return
	}
	s.ended = true
	if err != nil {
		s.err = err
	}
	delete(b.subs, s)
	close(s.ch)
}

// Subscription is a stream of watch events for one kind (or every kind).
// Events arrive on Events() in Raft index order; several events may share
// an index (one ApplyObjects of several objects). The events are shared
// between subscribers and must not be modified.
type Subscription struct {
	b     *broker
	kind  string // CamelCase kind, "" for every kind
	after uint64 // live events with Index ≤ after are already covered
	ch    chan *roostv1.WatchEvent
	ended bool  // guarded by b.mu
	err   error // guarded by b.mu
}

func (s *Subscription) wants(e event) bool {
	return (s.kind == "" || s.kind == e.kind) && e.ev.GetIndex() > s.after
}

// Events returns the event channel. It is closed when the subscription
// ends: by Close (Err returns nil), or by the FSM (Err says why).
func (s *Subscription) Events() <-chan *roostv1.WatchEvent { return s.ch }

// Err returns why the FSM ended the subscription: ErrWatchFellBehind or
// ErrWatchRestored (both *apierror.Error with codes.Aborted), or nil while
// it runs or after Close.
func (s *Subscription) Err() error {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.err
}

// Close ends the subscription and closes its channel; it is idempotent.
func (s *Subscription) Close() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.end(s, nil)
}

// Subscribe starts a watch on kind (a kind name or alias; "" for every
// kind).
//
// With fromIndex 0 the subscription first delivers every current object of
// the kind as TYPE_ADDED (sorted by kind name, then object name; their
// Index is the last applied index of the state they were read from), then
// every later change. With fromIndex > 0 it replays the retained events
// with a higher index, then every later change; if events after fromIndex
// have already left the ring (Options.WatchRing) it fails with an
// apierror of code codes.OutOfRange, and the caller must re-list.
//
// Later changes are TYPE_ADDED, TYPE_MODIFIED or TYPE_DELETED events
// carrying a copy of the object (for deletes: as it was, with modifyIndex
// set to the delete's index) and the Raft index that made the change.
// Unknown kinds are apierror Invalid with field "kind".
func (f *FSM) Subscribe(kind string, fromIndex uint64) (*Subscription, error) {
	var kinds []*resource.Kind
	if kind != "" {
		k, aerr := lookupKind(kind)
		if aerr != nil {
			return nil, aerr
		}
		kinds = []*resource.Kind{k}
	} else {
		for _, name := range resource.KindNames() {
			kinds = append(kinds, resource.MustLookup(name))
		}
	}
	s := &Subscription{b: f.watch}
	if kind != "" {
		s.kind = kinds[0].Name
	}

	b := f.watch
	b.mu.Lock()
	defer b.mu.Unlock()
	var initial []*roostv1.WatchEvent
	if fromIndex == 0 {
		// Holding b.mu, no publish can run: every event published from
		// now on either is already in this read (Index ≤ after) or is new.
		txn := f.db.Load().Txn(false)
		s.after = lastIndex(txn)
		for _, k := range kinds {
			it, err := txn.Get(k.Name, indexID)
			if err != nil {
				return nil, internal(err)
			}
			for raw := it.Next(); raw != nil; raw = it.Next() {
				initial = append(initial, newEvent(roostv1.WatchEvent_TYPE_ADDED, k.Name, raw.(*roostv1.Object), s.after).ev)
			}
		}
	} else {
		if fromIndex < b.floor {
			return nil, &apierror.Error{Code: codes.OutOfRange, Message: fmt.Sprintf(
				"cannot watch from index %d: events up to index %d are no longer kept; re-list and watch from the list's index",
				fromIndex, b.floor)}
		}
		s.after = fromIndex
		for i := 0; i < b.n; i++ {
			if e := b.ring[(b.start+i)%len(b.ring)]; s.wants(e) {
				initial = append(initial, e.ev)
			}
		}
		// Everything already published is in initial; nothing later can be
		// older, so live filtering by index is not needed beyond fromIndex.
	}
	s.ch = make(chan *roostv1.WatchEvent, len(initial)+b.bufSize)
	for _, ev := range initial {
		s.ch <- ev
	}
	b.subs[s] = struct{}{}
	return s, nil
}
