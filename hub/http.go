package hub

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/roostfleet/roost/hub/media"
	"github.com/roostfleet/roost/hub/raftnode"
	"github.com/roostfleet/roost/hub/state"
	"github.com/roostfleet/roost/version"
)

// EnvPprof, when set to 1 in the hub's environment, also serves Go's
// profiles (net/http/pprof) under /debug/pprof/ on the metrics listener.
// Off by default: profiles reveal internals and cost CPU.
const EnvPprof = "ROOST_HUB_PPROF"

// serveHTTP serves /metrics (Prometheus text format) and /healthz (200 "ok"
// when this member is a leader or a follower that knows its leader, 503
// with the reason otherwise); with $ROOST_HUB_PPROF=1 also /debug/pprof/.
func (h *Hub) serveHTTP(ln net.Listener) {
	mux := http.NewServeMux()
	if os.Getenv(EnvPprof) == "1" {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(h.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := h.healthy(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	// A client that does not send its request headers within the
	// handshake timeout, or stays idle for two minutes, is closed.
	h.http = &http.Server{Handler: mux, ReadHeaderTimeout: handshakeTimeout(h.opts), IdleTimeout: 2 * time.Minute}
	go h.http.Serve(ln)
}

// serveMedia serves enrollment ISOs to BMCs over HTTPS on ln (the
// member's server certificate) under download tokens (hub/media): a BMC
// fetches PathPrefix + SERVER/TOKEN/enroll.iso; a token is good for one
// Server and one image, for media.DefaultTTL.
func (h *Hub) serveMedia(ln net.Listener, serverTLS *tls.Config) {
	mux := http.NewServeMux()
	(&media.Handler{Key: h.mediaKey, Open: h.blobs.Open, Log: h.log}).Register(mux)
	cfg := serverTLS.Clone()
	// BMCs present no client certificate: the token is the credential.
	cfg.ClientAuth = tls.NoClientCert
	cfg.NextProtos = []string{"http/1.1"}
	h.media = &http.Server{Handler: mux, ReadHeaderTimeout: handshakeTimeout(h.opts), IdleTimeout: 2 * time.Minute}
	go h.media.Serve(tls.NewListener(ln, cfg))
}

// mediaKey is the download token key, nil while the hub has no CA.
func (h *Hub) mediaKey() []byte {
	ca := h.fsm.CA()
	if ca == nil {
		return nil
	}
	return media.Key(ca.GetPrivateKeyPem())
}

// mediaURL is the address a BMC fetches server's image digest from, under
// a fresh token good for media.DefaultTTL.
func (h *Hub) mediaURL(server, digest string) (string, error) {
	key := h.mediaKey()
	if key == nil {
		return "", errors.New("the hub CA is not replicated yet")
	}
	base := h.opts.MediaURL
	if base == "" {
		base = "https://" + h.mediaLn.Addr().String()
	}
	return media.URL(base, server, media.Token(key, server, digest, time.Now().Add(media.DefaultTTL))), nil
}

// healthy is nil when the member can serve every request: it leads, or it
// follows a known leader whose API address it has applied (so it can
// forward), and the hub CA is replicated. A member removed from the hub
// says so (see removed.go), and so does one whose Raft log differs from
// the leader's (logverify.go).
func (h *Hub) healthy() error {
	// A removed member knows no leader either; say why.
	if h.checkRemoved() {
		return errors.New(h.removedMessage())
	}
	if err := h.logVerifyUnhealthy(); err != nil {
		return err
	}
	switch st := h.node.State(); st {
	case "Leader", "Follower":
	default:
		return fmt.Errorf("raft state %s", st)
	}
	_, leader := h.node.Leader()
	if leader == "" {
		return errors.New("no known leader")
	}
	if h.fsm.CA() == nil {
		return errors.New("the hub CA is not replicated yet")
	}
	for _, m := range h.fsm.Members() {
		if m.GetId() == leader && m.GetApiAddress() != "" {
			return nil
		}
	}
	return fmt.Errorf("the API address of leader %s is not applied here yet", leader)
}

// raftCollector exports Raft's own counters as Prometheus gauges, and
// roost_build_info.
type raftCollector struct {
	node  *raftnode.Node
	fsm   *state.FSM
	descs map[string]*prometheus.Desc
}

var raftGauges = map[string]string{
	"term":           "Current Raft term.",
	"last_log_index": "Index of the last entry in the local log.",
	"commit_index":   "Highest log index known to be committed.",
	"applied_index":  "Highest log index applied to the state machine.",
	"num_peers":      "Number of other voters in the configuration.",
}

func newRaftCollector(node *raftnode.Node, fsm *state.FSM) *raftCollector {
	c := &raftCollector{node: node, fsm: fsm, descs: map[string]*prometheus.Desc{}}
	for name, help := range raftGauges {
		c.descs[name] = prometheus.NewDesc("roost_raft_"+name, help, nil, nil)
	}
	c.descs["leader"] = prometheus.NewDesc("roost_raft_leader", "1 when this member leads, else 0.", nil, nil)
	c.descs["build_info"] = prometheus.NewDesc("roost_build_info",
		"Always 1; the labels say which roost-hub runs: its version, VCS revision, Go version and the newest apply rules version it implements.",
		[]string{"version", "revision", "goversion", "rules_version"}, nil)
	return c
}

func (c *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *raftCollector) Collect(ch chan<- prometheus.Metric) {
	stats := c.node.Stats()
	for name := range raftGauges {
		v, err := strconv.ParseFloat(stats[name], 64)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, v)
	}
	leader := 0.0
	if c.node.IsLeader() {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(c.descs["leader"], prometheus.GaugeValue, leader)
	ch <- prometheus.MustNewConstMetric(c.descs["build_info"], prometheus.GaugeValue, 1,
		version.Version, version.Commit(), runtime.Version(), strconv.FormatUint(uint64(state.RulesVersion), 10))
}
