package rollout

import (
	"context"
	"sync"
	"time"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// admission is one Pool's view and plan as Admit reads them, computed
// from the FSM at Raft index index and clock time at.
type admission struct {
	index  uint64
	at     time.Time
	view   *PoolView
	status *roostv1.RolloutStatus
}

// admissions shares Pools' admission plans between concurrent Admits. Each
// Admit of a fleet's waiting Servers (every few seconds per Server) would
// otherwise read and plan the whole Pool; at 10,000 Servers one lock
// around that queued tens of thousands of AcquireLease calls, each
// holding its goroutine and request, long after the agents gave up.
//
// Per Pool, one computation runs at a time. An Admit that finds a plan
// computed from state and time no older than its own arrival (Raft index
// and clock) uses it: the answer is the one it would have computed
// itself. Staleness is thus what a lone Admit has (a read, then a Lease
// proposed later); the FSM's Lease count stays the last guard. The zero
// value is ready to use.
type admissions struct {
	mu    sync.Mutex
	pools map[string]*poolAdmission
}

// poolAdmission is one Pool's turn (a 1-slot semaphore) and last plan,
// which only the turn's holder reads or writes.
type poolAdmission struct {
	turn chan struct{}
	last *admission
}

// plan returns pool's admission, computing it with compute unless the last
// one was read at index ≥ arrivedIndex and time ≥ arrivedAt. It returns
// ctx's error when ctx ends while it waits for the Pool's turn, and
// compute's errors (the Pool is then forgotten).
func (a *admissions) plan(ctx context.Context, pool string, arrivedIndex uint64, arrivedAt time.Time, compute func() (*admission, error)) (*admission, error) {
	p := a.pool(pool)
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-p.turn }()
	if l := p.last; l != nil && l.index >= arrivedIndex && !l.at.Before(arrivedAt) {
		return l, nil
	}
	l, err := compute()
	if err != nil {
		p.last = nil
		a.forget(pool, p)
		return nil, err
	}
	p.last = l
	return l, nil
}

// pool returns pool's entry, made on first use.
func (a *admissions) pool(pool string) *poolAdmission {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pools == nil {
		a.pools = map[string]*poolAdmission{}
	}
	p := a.pools[pool]
	if p == nil {
		p = &poolAdmission{turn: make(chan struct{}, 1)}
		a.pools[pool] = p
	}
	return p
}

// forget drops pool's entry p (a deleted Pool); an Admit holding p still
// finishes with it.
func (a *admissions) forget(pool string, p *poolAdmission) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pools[pool] == p {
		delete(a.pools, pool)
	}
}
