package api

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/roostfleet/roost/hub/ca"
)

// UnauthenticatedLimits bound the calls that reach the API without a
// client certificate of the hub CA (the methods allowedRoles opens to
// anyone: Enroll, Join, the gRPC health service): token buckets per
// source address (an IPv4 address, or an IPv6 /64) and for all sources
// together. A call must find a token in both; a refused call fails with
// ResourceExhausted and a google.rpc.RetryInfo detail (the wait). Calls
// with a hub certificate (members forwarding, agents, operators) are not
// counted.
type UnauthenticatedLimits struct {
	// PerAddress is the refill rate of each source's bucket, in calls per
	// second; PerAddressBurst its size. Zero rate means
	// DefaultUnauthenticatedLimits'.
	PerAddress      float64
	PerAddressBurst int
	// Global is the refill rate of the bucket all sources share, in calls
	// per second; GlobalBurst its size. Zero rate means
	// DefaultUnauthenticatedLimits'.
	Global      float64
	GlobalBurst int
	// MaxAddresses bounds the sources tracked at once (about 250 bytes
	// each); a new source beyond it is held to the global bucket only.
	// Zero means DefaultUnauthenticatedLimits'.
	MaxAddresses int
}

// DefaultUnauthenticatedLimits: 5 calls/s per address (burst 50) and 100
// calls/s in all (burst 1,000) let a rack of servers enroll at once and
// hold a flood of bad tokens to what a member serves from memory.
var DefaultUnauthenticatedLimits = UnauthenticatedLimits{
	PerAddress: 5, PerAddressBurst: 50, Global: 100, GlobalBurst: 1000, MaxAddresses: 65536,
}

// withDefaults fills unset fields from DefaultUnauthenticatedLimits.
func (l UnauthenticatedLimits) withDefaults() UnauthenticatedLimits {
	d := DefaultUnauthenticatedLimits
	if l.PerAddress <= 0 {
		l.PerAddress, l.PerAddressBurst = d.PerAddress, d.PerAddressBurst
	}
	if l.Global <= 0 {
		l.Global, l.GlobalBurst = d.Global, d.GlobalBurst
	}
	l.PerAddressBurst, l.GlobalBurst = max(l.PerAddressBurst, 1), max(l.GlobalBurst, 1)
	if l.MaxAddresses <= 0 {
		l.MaxAddresses = d.MaxAddresses
	}
	return l
}

// Reasons of roost_api_unauthenticated_refusals_total.
const (
	refusedToken         = "token"          // unknown token or wrong secret
	refusedInactiveToken = "token_inactive" // revoked, expired or used up
	refusedInvalid       = "invalid"        // a malformed request
	refusedAddressLimit  = "rate_limited_address"
	refusedGlobalLimit   = "rate_limited_global"
)

// Sampling of refusal log lines: at most one line per source per
// logEvery (with the count of refusals not logged), and at most
// logBurst lines at once, logRate a second, from all sources together.
const (
	logEvery = time.Minute
	logRate  = 1
	logBurst = 20
	// sweepEvery is the least time between two sweeps of idle sources.
	sweepEvery = 10 * time.Second
)

// guard enforces UnauthenticatedLimits, counts refusals and logs them
// sampled.
type guard struct {
	limits   UnauthenticatedLimits
	log      *slog.Logger
	now      func() time.Time
	refusals *prometheus.CounterVec

	mu        sync.Mutex
	global    *rate.Limiter
	logLines  *rate.Limiter
	sources   map[string]*source
	lastSweep time.Time
	// full is when a new source last found the map full (logged once a
	// minute).
	full time.Time
}

// source is one address's bucket and log sampling.
type source struct {
	lim    *rate.Limiter
	logged time.Time // when a refusal from it was last logged
	quiet  int       // its refusals since, not logged
}

func newGuard(l UnauthenticatedLimits, log *slog.Logger, now func() time.Time) *guard {
	l = l.withDefaults()
	return &guard{
		limits: l, log: log, now: now,
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "roost", Subsystem: "api", Name: "unauthenticated_refusals_total",
			Help: "Calls without a hub certificate that were refused, by method and reason: token (unknown token or wrong secret), " +
				"token_inactive (revoked, expired, used up), invalid, rate_limited_address, rate_limited_global.",
		}, []string{"method", "reason"}),
		global:   rate.NewLimiter(rate.Limit(l.Global), l.GlobalBurst),
		logLines: rate.NewLimiter(logRate, logBurst),
		sources:  map[string]*source{},
	}
}

// isOpen reports whether method may be called without a certificate.
func isOpen(method string) bool {
	return accessTable[method].public
}

// sourceKey is the address a call is limited and logged under: the
// client's IP, or for IPv6 its /64 (what one host can easily hold).
func sourceKey(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "unknown"
	}
	host, _, err := net.SplitHostPort(p.Addr.String())
	if err != nil {
		return p.Addr.String()
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}

// admit takes a token for a call to method from the caller's bucket and
// the global one. Calls with a hub certificate, and methods that need
// one, pass untouched. A refusal is ResourceExhausted with RetryInfo.
func (g *guard) admit(ctx context.Context, method string) error {
	if !isOpen(method) {
		return nil
	}
	if _, _, ok := ca.PeerRole(ctx); ok {
		return nil
	}
	key := sourceKey(ctx)
	now := g.now()
	g.mu.Lock()
	src := g.source(key, now)
	var wait time.Duration
	reason := ""
	var own *rate.Reservation
	if src != nil {
		own = src.lim.ReserveN(now, 1)
		if d := own.DelayFrom(now); d > 0 {
			own.CancelAt(now)
			wait, reason = d, refusedAddressLimit
		}
	}
	if reason == "" {
		if r := g.global.ReserveN(now, 1); r.DelayFrom(now) > 0 {
			wait, reason = r.DelayFrom(now), refusedGlobalLimit
			r.CancelAt(now)
			if own != nil {
				own.CancelAt(now)
			}
		}
	}
	g.mu.Unlock()
	if reason == "" {
		return nil
	}
	wait = wait.Round(time.Millisecond) + time.Millisecond
	var msg string
	if reason == refusedAddressLimit {
		msg = fmt.Sprintf("too many calls without a client certificate from %s (limit %s/s, burst %d per address); retry in %s",
			key, formatRate(g.limits.PerAddress), g.limits.PerAddressBurst, wait)
	} else {
		msg = fmt.Sprintf("too many calls without a client certificate to this hub member (limit %s/s, burst %d from all addresses); retry in %s",
			formatRate(g.limits.Global), g.limits.GlobalBurst, wait)
	}
	st := status.New(codes.ResourceExhausted, msg)
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); err == nil {
		st = d
	}
	g.refused(key, method, reason, msg)
	return st.Err()
}

func formatRate(r float64) string { return fmt.Sprintf("%g", r) }

// source returns key's bucket, making it; nil when the map is full (the
// call then meets the global bucket only). Called with g.mu held.
func (g *guard) source(key string, now time.Time) *source {
	if s, ok := g.sources[key]; ok {
		return s
	}
	if len(g.sources) >= g.limits.MaxAddresses || now.Sub(g.lastSweep) >= sweepEvery {
		g.sweep(now)
	}
	if len(g.sources) >= g.limits.MaxAddresses {
		if now.Sub(g.full) >= logEvery {
			g.full = now
			g.log.Warn("too many addresses call without a client certificate; new ones meet only the global limit",
				"tracked", len(g.sources), "max", g.limits.MaxAddresses)
		}
		return nil
	}
	s := &source{lim: rate.NewLimiter(rate.Limit(g.limits.PerAddress), g.limits.PerAddressBurst)}
	g.sources[key] = s
	return s
}

// sweep drops the sources whose bucket is full again and that have no
// refusal left to log: such a source behaves exactly as a new one. It runs
// at most once per sweepEvery, so a full map costs no sweep per call.
// Called with g.mu held.
func (g *guard) sweep(now time.Time) {
	if now.Sub(g.lastSweep) < sweepEvery && !g.lastSweep.IsZero() {
		return
	}
	g.lastSweep = now
	burst := float64(g.limits.PerAddressBurst)
	for k, s := range g.sources {
		if s.quiet == 0 && s.lim.TokensAt(now) >= burst && now.Sub(s.logged) >= logEvery {
			delete(g.sources, k)
		}
	}
}

// tracked returns the number of sources held (tests).
func (g *guard) tracked() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.sources)
}

// refused counts a refused call and logs it, sampled: the first refusal
// of a source in logEvery is logged with the number of its refusals not
// logged since, within a global budget of log lines.
func (g *guard) refused(key, method, reason, msg string) {
	g.refusals.WithLabelValues(method, reason).Inc()
	now := g.now()
	g.mu.Lock()
	s := g.source(key, now)
	if s == nil { // the map is full: sample under one shared entry
		s = g.sources[""]
		if s == nil {
			s = &source{lim: rate.NewLimiter(rate.Inf, 0)}
			g.sources[""] = s
		}
	}
	due := now.Sub(s.logged) >= logEvery && g.logLines.AllowN(now, 1)
	quiet := s.quiet
	if due {
		s.logged, s.quiet = now, 0
	} else {
		s.quiet++
	}
	g.mu.Unlock()
	if due {
		g.log.Warn("refused a call without a client certificate", "source", key, "method", method, "reason", reason,
			"err", msg, "refused_since_last_line", quiet, "sampling", "one line per source per minute")
	}
}

// refusedCall records the outcome err of a call to an open method that
// this member decided or relayed (not one another member forwarded: that
// member records it) when it is a refusal: invalid (InvalidArgument),
// token (tokenRefused, the one message for an unknown token or a wrong
// secret, or wrongToken) or token_inactive (inactiveToken). Other errors
// (Unavailable, …) are no refusals.
func (g *guard) refusedCall(ctx context.Context, method string, err error, tokenRefused string, wrongToken, inactiveToken func(*status.Status) bool) {
	if err == nil || isForwarded(ctx) {
		return
	}
	st, _ := status.FromError(toStatus(err))
	var reason string
	switch {
	case st.Code() == codes.InvalidArgument:
		reason = refusedInvalid
	case st.Message() == tokenRefused || wrongToken(st):
		reason = refusedToken
	case inactiveToken(st):
		reason = refusedInactiveToken
	default:
		return
	}
	g.refused(sourceKey(ctx), method, reason, st.Message())
}

// unary and stream are the interceptors of admit.
func (g *guard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := g.admit(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (g *guard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := g.admit(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}
