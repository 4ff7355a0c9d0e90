package hub

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/roostfleet/roost/hub/blobs"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Blob garbage collection runs on every member, leader or not: each member
// has its own blob store (hub/blobs). A pass removes the complete blobs
// that no ImageRelease, Extension or Revision in the member's applied state
// names and that were stored or last checked (blobs.Store.Touch) more
// than the grace before the pass read the state, and the partial uploads
// untouched for blobs.DefaultPartialGrace.
//
// The grace covers the time between an artifact's upload (or its check
// by PutImageRelease) and the release reaching this member's state: a
// follower applies the log a little after the leader. Passes only run
// once the member's state can be trusted to name every release: a leader
// is known, the member has applied its own member record (after a join)
// and every entry its log held when it started (after a restart, a member
// applies the log past its last snapshot only once it hears from a
// leader).

const (
	// DefaultBlobGCInterval is the time between two passes of a member's
	// blob garbage collection.
	DefaultBlobGCInterval = 5 * time.Minute
	// DefaultBlobGCGrace is how long an artifact no release names stays
	// after it was stored or last checked.
	DefaultBlobGCGrace = time.Hour
	// blobGCFirstDelay is when the first pass runs after start (or after
	// the interval, if shorter).
	blobGCFirstDelay = time.Minute
	// blobGCRetry bounds the wait before a postponed pass is tried again.
	blobGCRetry = 15 * time.Second
)

// blobGCMetrics count what the passes removed.
type blobGCMetrics struct {
	runs    *prometheus.CounterVec
	removed *prometheus.CounterVec
	bytes   *prometheus.CounterVec
}

func newBlobGCMetrics(reg prometheus.Registerer) *blobGCMetrics {
	m := &blobGCMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "roost", Subsystem: "blobs", Name: "gc_runs_total",
			Help: "Blob garbage-collection passes on this member, by result (ok, error, postponed).",
		}, []string{"result"}),
		removed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "roost", Subsystem: "blobs", Name: "gc_removed_total",
			Help: "Files the blob garbage collection removed from this member's store, by kind (blob: a complete artifact no release names; partial: an abandoned upload).",
		}, []string{"kind"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "roost", Subsystem: "blobs", Name: "gc_removed_bytes_total",
			Help: "Bytes the blob garbage collection freed on this member, by kind (blob, partial).",
		}, []string{"kind"}),
	}
	for _, r := range []string{"ok", "error", "postponed"} {
		m.runs.WithLabelValues(r)
	}
	for _, k := range []string{"blob", "partial"} {
		m.removed.WithLabelValues(k)
		m.bytes.WithLabelValues(k)
	}
	reg.MustRegister(m.runs, m.removed, m.bytes)
	return m
}

// runBlobGC runs blob garbage-collection passes until ctx ends (see above):
// the first shortly after start, then every interval; a pass that cannot
// run yet is retried sooner.
func (h *Hub) runBlobGC(ctx context.Context) {
	interval, grace := h.opts.BlobGCInterval, h.opts.BlobGCGrace
	if interval < 0 {
		return
	}
	if interval == 0 {
		interval = DefaultBlobGCInterval
	}
	if grace <= 0 {
		grace = DefaultBlobGCGrace
	}
	wait := min(interval, blobGCFirstDelay)
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if h.collectBlobs(grace) {
			wait = interval
		} else {
			wait = min(interval, blobGCRetry)
		}
	}
}

// collectBlobs runs one pass with the given grace. It returns false when
// the pass was postponed because the state may not be current.
func (h *Hub) collectBlobs(grace time.Duration) bool {
	if reason := h.blobGCNotReady(); reason != "" {
		h.log.Debug("blob garbage collection postponed", "reason", reason)
		h.blobGC.runs.WithLabelValues("postponed").Inc()
		return false
	}
	// The cutoff is taken before the state is read: a blob is removed only
	// if it was stored or checked more than grace before a state that
	// does not name it.
	now := time.Now()
	keep := h.referencedBlobs()
	st, err := h.blobs.Collect(blobs.CollectOptions{
		Keep:           func(d string) bool { return keep[d] },
		BlobsBefore:    now.Add(-grace),
		PartialsBefore: now.Add(-blobs.DefaultPartialGrace),
	})
	h.blobGC.removed.WithLabelValues("blob").Add(float64(st.Blobs))
	h.blobGC.bytes.WithLabelValues("blob").Add(float64(st.BlobBytes))
	h.blobGC.removed.WithLabelValues("partial").Add(float64(st.Partials))
	h.blobGC.bytes.WithLabelValues("partial").Add(float64(st.PartialBytes))
	if st.Blobs > 0 || st.Partials > 0 {
		h.log.Info("removed unused artifacts from the blob store", "blobs", st.Blobs, "blobBytes", st.BlobBytes,
			"partialUploads", st.Partials, "partialBytes", st.PartialBytes, "referenced", len(keep), "busy", st.Busy, "grace", grace)
	}
	if err != nil {
		h.blobGC.runs.WithLabelValues("error").Inc()
		h.log.Warn("blob garbage collection failed for some files; retrying next pass", "err", err)
		return true
	}
	h.blobGC.runs.WithLabelValues("ok").Inc()
	return true
}

// blobGCNotReady says why this member's state may not name every release
// yet, or "" when a pass may run.
func (h *Hub) blobGCNotReady() string {
	if _, id := h.node.Leader(); id == "" {
		return "no known leader"
	}
	if !h.hasMemberRecord() {
		return "this member's record is not applied yet"
	}
	if h.blobGCReady {
		return ""
	}
	// Raft's applied index counts entries handed to the FSM; the FSM's own
	// index lags it while it applies them, and skips no-op entries. So
	// the FSM having applied the log's last entry at start is enough; the
	// applied index alone is trusted only on a later attempt.
	switch applied := h.node.AppliedIndex(); {
	case h.fsm.LastIndex() >= h.startIndex:
		h.blobGCReady = true
		return ""
	case applied < h.startIndex:
		return fmt.Sprintf("applied %d of the %d log entries held at start", applied, h.startIndex)
	case !h.blobGCSeen:
		h.blobGCSeen = true
		return "letting the state machine apply the log held at start"
	}
	h.blobGCReady = true
	return ""
}

// referencedBlobs returns the digests of the artifacts that the
// ImageReleases, Extensions and Revisions (their release artifacts and
// extension images) and the Servers' BMC media (enrollment ISOs) in this
// member's applied state name.
func (h *Hub) referencedBlobs() map[string]bool {
	keep := map[string]bool{}
	add := func(as ...*roostv1.Artifact) {
		for _, a := range as {
			if d := a.GetSha256(); d != "" {
				keep[d] = true
			}
		}
	}
	r := h.fsm.Reader()
	for _, o := range r.List("ImageRelease") {
		s := o.GetImageRelease().GetSpec()
		add(s.GetKernel(), s.GetInitrd(), s.GetBootLoader())
	}
	r.EachRevision(func(rv *roostv1.Revision) {
		s := rv.GetSpec()
		add(s.GetKernel(), s.GetInitrd(), s.GetBootLoader())
		for _, x := range s.GetExtensions() {
			add(x.GetImage())
		}
	})
	for _, o := range r.List("Extension") {
		add(o.GetExtension().GetSpec().GetImage())
	}
	// Enrollment ISOs a Server is to be, or is being, provisioned from.
	for _, o := range r.List("Server") {
		b := o.GetServer().GetStatus().GetBmc()
		for _, d := range []string{b.GetMediaDigest(), b.GetOperation().GetMediaDigest()} {
			if d != "" {
				keep[d] = true
			}
		}
	}
	return keep
}
