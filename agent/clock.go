package agent

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Clock is the agent's view of time, so that backoff, heartbeats and
// certificate renewal can be tested without waiting.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives the time once d has passed.
	After(d time.Duration) <-chan time.Time
}

// RealClock is the system clock.
type RealClock struct{}

func (RealClock) Now() time.Time                         { return time.Now() }
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// FakeClock is a Clock that moves only when told (Advance). Timers fire in
// deadline order when their deadline is reached.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

// NewFakeClock returns a FakeClock set to now.
func NewFakeClock(now time.Time) *FakeClock { return &FakeClock{now: now} }

func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *FakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, fakeTimer{at: c.now.Add(d), ch: ch})
	return ch
}

// Advance moves the clock forward by d and fires the timers that are due.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			t.ch <- c.now
		} else {
			kept = append(kept, t)
		}
	}
	c.timers = kept
}

// Pending returns how many timers wait to fire.
func (c *FakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Backoff computes reconnect delays: exponential from Base to Max with full
// jitter (a uniformly random delay between 0 and the exponential bound), so
// that thousands of agents losing one hub member do not come back in step.
type Backoff struct {
	Base, Max time.Duration
	// Rand returns a float in [0, 1); nil uses math/rand/v2.
	Rand func() float64

	attempt int
}

// Default backoff bounds.
const (
	BackoffBase = 200 * time.Millisecond
	BackoffMax  = 15 * time.Second
)

// Next returns the delay before the next attempt and counts the attempt.
func (b *Backoff) Next() time.Duration {
	bound := b.Bound()
	b.attempt++
	r := rand.Float64
	if b.Rand != nil {
		r = b.Rand
	}
	return time.Duration(r() * float64(bound))
}

// Bound returns the upper bound of the next delay: Base·2^attempts capped at Max.
func (b *Backoff) Bound() time.Duration {
	base, max := b.Base, b.Max
	if base <= 0 {
		base = BackoffBase
	}
	if max <= 0 {
		max = BackoffMax
	}
	d := base
	for i := 0; i < b.attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d
}

// Reset starts over from Base (after a connection that worked).
func (b *Backoff) Reset() { b.attempt = 0 }

// Attempts returns the number of delays handed out since the last Reset.
func (b *Backoff) Attempts() int { return b.attempt }
