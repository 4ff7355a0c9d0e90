// Package controller is the one shape of the hub's leader-only loops, as
// controller-runtime and COSI have it: a keyed work queue (client-go's
// typed rate-limited workqueue) fed by the replicated state's change
// subscriptions (state.FSM.Subscribe), a Reconcile(ctx, key) called for
// each queued key with per-key exponential backoff after an error and
// Result.RequeueAfter for work that time drives, and a periodic resync
// only for controllers that time drives (windows, leases, liveness).
//
// A Controller runs only while its member leads: Run waits for leadership
// and the term's barrier (hub/leader.Term), subscribes to its sources from
// index 0 (every current object arrives once, so the first pass of a term
// sees the whole state), and on the loss of leadership shuts its queue
// down, waits for the running reconciles and starts over. A key is never
// reconciled by two workers at once, and a key queued several times
// before a worker takes it is reconciled once.
package controller
