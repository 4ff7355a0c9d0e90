package controller

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/roostfleet/roost/hub/leader"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Defaults for Controller fields left zero.
const (
	// DefaultBaseBackoff and DefaultMaxBackoff bound the per-key
	// exponential backoff after a failed Reconcile: base·2^(failures-1),
	// at most max.
	DefaultBaseBackoff = 250 * time.Millisecond
	DefaultMaxBackoff  = 30 * time.Second
	// DefaultLeaderPoll is how often leadership is checked.
	DefaultLeaderPoll = 100 * time.Millisecond
)

// Result is what a Reconcile asks of the queue besides its error.
type Result struct {
	// RequeueAfter, if positive, reconciles the key again after this long
	// (for work that time drives: a window opening, a Lease expiring); a
	// change of the key's objects still queues it at once.
	RequeueAfter time.Duration
}

// Source maps the state's change events of one kind to the keys they
// concern. At the start of each leadership term (and after a
// subscription ended, see state.Subscription.Err) every current object of
// Kind arrives as a TYPE_ADDED event.
type Source struct {
	// Kind is the CamelCase kind subscribed to (state.FSM.Subscribe).
	Kind string
	// Keys returns the keys ev concerns (none: the event is ignored). It
	// runs on the subscription's goroutine and must be quick; it may read
	// the state. The event is shared and must not be modified.
	Keys func(ev *roostv1.WatchEvent) []string
}

// Controller is one leader-only loop: set the fields, then call Run.
type Controller struct {
	// Name labels logs and metrics ("rollout", "revisions", …).
	Name string
	// Reconcile brings what key names to its desired state. An error
	// queues the key again after its backoff; Result.RequeueAfter queues
	// it again after that long. Reconcile is never called for one key by
	// two workers at once, and its ctx ends with leadership.
	Reconcile func(ctx context.Context, key string) (Result, error)
	// Watch subscribes to a kind's changes from an index
	// (state.FSM.Subscribe); it is required when Sources are set.
	Watch func(kind string, fromIndex uint64) (*state.Subscription, error)
	// Sources feed the queue from the state's changes.
	Sources []Source
	// Resync, if positive, queues ResyncKeys' keys at the start of each
	// term and then every Resync: only for controllers that time drives.
	Resync time.Duration
	// ResyncKeys returns the keys to queue at each resync.
	ResyncKeys func() []string
	// IsLeader reports whether this member leads now.
	IsLeader func() bool
	// Barrier, if set, runs at the start of each leadership term before
	// anything is read (hub/leader.Term); the term starts once it
	// succeeds.
	Barrier func(context.Context) error
	// Workers is how many keys are reconciled at once; default 1.
	Workers int
	// OnStart, if set, runs at the start of each term before any
	// Reconcile; OnStop, if set, after the term's last Reconcile
	// returned (to drop what the term held).
	OnStart func(context.Context)
	OnStop  func()
	// BaseBackoff and MaxBackoff bound the per-key backoff after errors;
	// defaults DefaultBaseBackoff and DefaultMaxBackoff.
	BaseBackoff, MaxBackoff time.Duration
	// LeaderPoll is how often leadership is checked; default
	// DefaultLeaderPoll.
	LeaderPoll time.Duration
	// Metrics, if set, receives the queue depth and reconcile results.
	Metrics *Metrics
	// Log receives the loop's logs; nil means slog.Default().
	Log *slog.Logger

	mu sync.Mutex
	q  workqueue.TypedRateLimitingInterface[string] // the running term's; nil between terms
}

func (c *Controller) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

func (c *Controller) poll() time.Duration {
	if c.LeaderPoll > 0 {
		return c.LeaderPoll
	}
	return DefaultLeaderPoll
}

// Enqueue queues key in the running term; it does nothing while this
// member does not lead.
func (c *Controller) Enqueue(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.q != nil {
		c.q.Add(key)
	}
}

// Run runs a term of the controller each time this member leads, until
// ctx ends.
func (c *Controller) Run(ctx context.Context) {
	term := leader.Term{IsLeader: c.IsLeader, Barrier: c.Barrier}
	t := time.NewTicker(c.poll())
	defer t.Stop()
	var failing bool
	for {
		ok, err := term.Ready(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				c.log().Warn(c.Name+" controller: cannot start leading; retrying", "err", err)
			}
			failing = true
		case ok:
			failing = false
			c.runTerm(ctx)
			// The next term passes the barrier again, even when
			// leadership came back before this loop saw it lost.
			term = leader.Term{IsLeader: c.IsLeader, Barrier: c.Barrier}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// runTerm runs one leadership term: sources, resync and workers, until
// this member stops leading or ctx ends; then it shuts the queue down and
// waits for every goroutine of the term.
func (c *Controller) runTerm(ctx context.Context) {
	base, maxB := c.BaseBackoff, c.MaxBackoff
	if base <= 0 {
		base = DefaultBaseBackoff
	}
	if maxB <= 0 {
		maxB = DefaultMaxBackoff
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedItemExponentialFailureRateLimiter[string](base, maxB),
		workqueue.TypedRateLimitingQueueConfig[string]{})
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if c.OnStart != nil {
		c.OnStart(tctx)
	}
	c.mu.Lock()
	c.q = q
	c.mu.Unlock()
	if m := c.Metrics; m != nil {
		m.leading.WithLabelValues(c.Name).Set(1)
	}
	c.log().Debug(c.Name + " controller: leading")

	var wg sync.WaitGroup
	for _, src := range c.Sources {
		wg.Go(func() { c.watch(tctx, q, src) })
	}
	if c.Resync > 0 && c.ResyncKeys != nil {
		wg.Go(func() { c.resync(tctx, q) })
	}
	for range max(c.Workers, 1) {
		wg.Go(func() {
			for c.processNext(tctx, q) {
			}
		})
	}
	t := time.NewTicker(c.poll())
	for ctx.Err() == nil && c.IsLeader() {
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	t.Stop()
	cancel()
	c.mu.Lock()
	c.q = nil
	c.mu.Unlock()
	q.ShutDown()
	wg.Wait()
	if m := c.Metrics; m != nil {
		m.leading.WithLabelValues(c.Name).Set(0)
		m.depth.WithLabelValues(c.Name).Set(0)
	}
	if c.OnStop != nil {
		c.OnStop()
	}
	c.log().Debug(c.Name + " controller: stopped leading")
}

// watch feeds q from src until ctx ends, subscribing again from index 0
// (every current object once more) when the state ends the subscription.
func (c *Controller) watch(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], src Source) {
	for ctx.Err() == nil {
		sub, err := c.Watch(src.Kind, 0)
		if err != nil {
			c.log().Warn(c.Name+" controller: cannot watch; retrying", "kind", src.Kind, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		c.drain(ctx, q, src, sub)
		sub.Close()
		if err := sub.Err(); err != nil && ctx.Err() == nil {
			c.log().Info(c.Name+" controller: watch ended; re-listing", "kind", src.Kind, "reason", err)
		}
	}
}

// drain queues the keys of sub's events until sub or ctx ends.
func (c *Controller) drain(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], src Source, sub *state.Subscription) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-sub.Events():
			if !ok {
				return
			}
			for _, k := range src.Keys(ev) {
				q.Add(k)
			}
		}
	}
}

// resync queues ResyncKeys' keys now and every Resync until ctx ends.
func (c *Controller) resync(ctx context.Context, q workqueue.TypedRateLimitingInterface[string]) {
	t := time.NewTicker(c.Resync)
	defer t.Stop()
	for {
		for _, k := range c.ResyncKeys() {
			q.Add(k)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// processNext reconciles the next key of q; false once q is shut down.
func (c *Controller) processNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[string]) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	if m := c.Metrics; m != nil {
		m.depth.WithLabelValues(c.Name).Set(float64(q.Len()))
	}
	res, err := c.Reconcile(ctx, key)
	result := "ok"
	switch {
	case err != nil:
		result = "error"
		if ctx.Err() == nil {
			c.log().Warn(c.Name+" controller: reconcile failed; retrying", "key", key, "err", err, "failures", q.NumRequeues(key)+1)
		}
		q.AddRateLimited(key)
	case res.RequeueAfter > 0:
		result = "requeue"
		q.Forget(key)
		q.AddAfter(key, res.RequeueAfter)
	default:
		q.Forget(key)
	}
	if m := c.Metrics; m != nil {
		m.reconciles.WithLabelValues(c.Name, result).Inc()
	}
	return true
}
