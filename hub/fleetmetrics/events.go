package fleetmetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Enrollment results, the values of roost_enrollments_total's result label.
const (
	EnrollEnrolled   = "enrolled"   // a new Server
	EnrollReenrolled = "reenrolled" // a known Server enrolled again
	EnrollRefused    = "refused"    // the token was unknown, wrong, used up or expired
	EnrollError      = "error"      // any other failure on the leader
)

// Drain results, the values of roost_drain_duration_seconds' result label.
const (
	DrainDrained = "drained"
	DrainFailed  = "failed"
)

// Events are the fleet series the leader observes where it does the work.
// A nil *Events records nothing, so components run without one in tests.
type Events struct {
	leaseWait   *prometheus.HistogramVec
	drain       *prometheus.HistogramVec
	enrollments *prometheus.CounterVec
}

// NewEvents registers the event series with reg.
func NewEvents(reg prometheus.Registerer) *Events {
	// 1 s to about 4.5 h: waits span a window's wave, drains a PDB's pace.
	waits := prometheus.ExponentialBuckets(1, 2, 15)
	e := &Events{
		leaseWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "roost_lease_wait_seconds",
			Help:    "Time from a Server's first refused or draining AcquireLease to its Lease being granted, in seconds, by pool (observed by the leader; a new leader starts the clock again).",
			Buckets: waits,
		}, []string{"pool"}),
		drain: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "roost_drain_duration_seconds",
			Help:    "Time to cordon and drain a worker's Node before its reboot, in seconds, by pool and result (drained, failed; observed by the leader driving the drain).",
			Buckets: waits,
		}, []string{"pool", "result"}),
		enrollments: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roost_enrollments_total",
			Help: "Enrollments handled by the leader, by result (enrolled, reenrolled, refused, error).",
		}, []string{"result"}),
	}
	reg.MustRegister(e.leaseWait, e.drain, e.enrollments)
	return e
}

// LeaseGranted records that a Server of pool waited d for its Lease.
func (e *Events) LeaseGranted(pool string, d time.Duration) {
	if e != nil {
		e.leaseWait.WithLabelValues(pool).Observe(d.Seconds())
	}
}

// DrainFinished records a drain of a worker of pool that took d and ended
// with result (DrainDrained or DrainFailed).
func (e *Events) DrainFinished(pool, result string, d time.Duration) {
	if e != nil {
		e.drain.WithLabelValues(pool, result).Observe(d.Seconds())
	}
}

// Enrolled counts one enrollment with result (Enroll*).
func (e *Events) Enrolled(result string) {
	if e != nil {
		e.enrollments.WithLabelValues(result).Inc()
	}
}
