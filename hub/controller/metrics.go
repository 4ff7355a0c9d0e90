package controller

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the controllers' queue and reconcile metrics, labelled by
// Controller.Name.
type Metrics struct {
	depth      *prometheus.GaugeVec
	reconciles *prometheus.CounterVec
	leading    *prometheus.GaugeVec
	orphans    *prometheus.CounterVec
}

// NewMetrics registers the controller metrics with reg (nil: not
// registered): roost_controller_queue_depth,
// roost_controller_reconciles_total{result="ok|error|requeue"},
// roost_controller_leading and roost_orphans_removed_total{kind}.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "roost_controller_queue_depth",
			Help: "Keys waiting in a leader controller's work queue."}, []string{"controller"}),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "roost_controller_reconciles_total",
			Help: "Reconciles of a leader controller, by result (ok, requeue, error)."}, []string{"controller", "result"}),
		leading: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "roost_controller_leading",
			Help: "1 while a leader controller runs on this member."}, []string{"controller"}),
		orphans: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "roost_orphans_removed_total",
			Help: "Orphans the leader's controllers found and removed, by kind: node (a Roost Node no Machine holds), bootstrap_token (of a gone Machine, or unknown to the hub), lease (of a gone or Decommissioned Server)."}, []string{"kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.depth, m.reconciles, m.leading, m.orphans)
	}
	return m
}

// Orphan kinds of OrphansRemoved.
const (
	OrphanNode           = "node"
	OrphanBootstrapToken = "bootstrap_token"
	OrphanLease          = "lease"
)

// OrphansRemoved counts n orphans of kind (OrphanNode, …) removed; a nil
// Metrics counts nothing.
func (m *Metrics) OrphansRemoved(kind string, n int) {
	if m == nil || m.orphans == nil || n <= 0 {
		return
	}
	m.orphans.WithLabelValues(kind).Add(float64(n))
}
