package api

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Metrics are the API's Prometheus metrics: requests by method and code,
// and handling latency in seconds.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// handshakes counts the API port's TLS handshakes by result
	// (LimitHandshakes).
	handshakes *prometheus.CounterVec
}

// NewMetrics registers the API metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "roost", Subsystem: "api", Name: "requests_total",
			Help: "gRPC requests handled, by full method and status code.",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "roost", Subsystem: "api", Name: "request_duration_seconds",
			Help:    "Time to handle a unary gRPC request, in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"method"}),
		handshakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "roost", Subsystem: "api", Name: "tls_handshakes_total",
			Help: "TLS handshakes of the API port by result: ok, failed, or shed (closed after waiting the handshake timeout for a slot: 32 per CPU).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.requests, m.latency, m.handshakes)
	return m
}

// countHandshake counts one handshake with result; m may be nil.
func (m *Metrics) countHandshake(result string) {
	if m != nil {
		m.handshakes.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	m.latency.WithLabelValues(info.FullMethod).Observe(time.Since(start).Seconds())
	m.requests.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
	return resp, err
}

func (m *Metrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	err := handler(srv, ss)
	m.requests.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
	return err
}
