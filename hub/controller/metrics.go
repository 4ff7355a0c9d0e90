package controller

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the controllers' queue and reconcile metrics, labelled by
// Controller.Name.
type Metrics struct {
	depth      *prometheus.GaugeVec
	reconciles *prometheus.CounterVec
	leading    *prometheus.GaugeVec
}

// NewMetrics registers the controller metrics with reg (nil: not
// registered): roost_controller_queue_depth,
// roost_controller_reconciles_total{result="ok|error|requeue"} and
// roost_controller_leading.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "roost_controller_queue_depth",
			Help: "Keys waiting in a leader controller's work queue."}, []string{"controller"}),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "roost_controller_reconciles_total",
			Help: "Reconciles of a leader controller, by result (ok, requeue, error)."}, []string{"controller", "result"}),
		leading: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "roost_controller_leading",
			Help: "1 while a leader controller runs on this member."}, []string{"controller"}),
	}
	if reg != nil {
		reg.MustRegister(m.depth, m.reconciles, m.leading)
	}
	return m
}
