package hub

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft-wal/verifier"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/roostfleet/roost/hub/raftnode"
)

// logVerifyReport logs one report of the member's online log verification
// (raftnode/logverify.go): a failure at Error level, once per range.
func (h *Hub) logVerifyReport(r verifier.VerificationReport) {
	switch {
	case r.Err == nil:
		h.log.Debug("Raft log verified", "range", r.Range.String(), "elapsed", r.Elapsed)
	case errors.Is(r.Err, verifier.ErrRangeMismatch):
		h.log.Debug("Raft log verification skipped: this member's log does not hold the whole range", "range", r.Range.String())
	default:
		h.log.Error("Raft log verification failed: this member's log differs from what the leader wrote; "+
			"remove it, wipe its data dir and join it again (docs/operations.md, \"A damaged log or snapshot\")",
			"range", r.Range.String(), "err", r.Err, "expected_sum", fmt.Sprintf("%016x", r.ExpectedSum),
			"written_sum", fmt.Sprintf("%016x", r.WrittenSum), "read_sum", fmt.Sprintf("%016x", r.ReadSum))
	}
}

// logVerifyUnhealthy is the health condition of the log verification:
// nil while it found no difference, else why the member is unhealthy
// (until it restarts).
func (h *Hub) logVerifyUnhealthy() error {
	if err := h.node.LogVerification().Failure; err != nil {
		return fmt.Errorf("this member's Raft log differs from the leader's (%v): remove it, wipe its data dir and join it again "+
			"(docs/operations.md, \"A damaged log or snapshot\")", err)
	}
	return nil
}

// logVerifyCollector exports the log verification's counts.
type logVerifyCollector struct {
	node          *raftnode.Node
	checks, fails *prometheus.Desc
	checkpoints   *prometheus.Desc
}

func newLogVerifyCollector(node *raftnode.Node) *logVerifyCollector {
	return &logVerifyCollector{node: node,
		checks: prometheus.NewDesc("roost_raft_log_verifications_total",
			"Ranges of the Raft log this member read back and compared with the leader's checksum, by result: ok, failed (the log differs: see roost_raft_log_verification_failed), skipped (the range is not all in this member's log, or came too fast).",
			[]string{"result"}, nil),
		fails: prometheus.NewDesc("roost_raft_log_verification_failed",
			"1 once a log verification failed on this member (its log differs from the leader's; it reports itself unhealthy until restarted), else 0.", nil, nil),
		checkpoints: prometheus.NewDesc("roost_raft_log_verification_checkpoints_total",
			"Log verification checkpoints this member stored (the leader appends one a minute while the log grows).", nil, nil),
	}
}

func (c *logVerifyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.checks
	ch <- c.fails
	ch <- c.checkpoints
}

func (c *logVerifyCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.node.LogVerification()
	ch <- prometheus.MustNewConstMetric(c.checks, prometheus.CounterValue, float64(v.Verified), "ok")
	ch <- prometheus.MustNewConstMetric(c.checks, prometheus.CounterValue, float64(v.Failures), "failed")
	ch <- prometheus.MustNewConstMetric(c.checks, prometheus.CounterValue, float64(v.Skipped), "skipped")
	failed := 0.0
	if v.Failure != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(c.fails, prometheus.GaugeValue, failed)
	ch <- prometheus.MustNewConstMetric(c.checkpoints, prometheus.CounterValue, float64(v.Checkpoints))
}
