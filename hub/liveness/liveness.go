// Package liveness decides which Servers are reachable. It runs on the hub
// leader only and keeps heartbeats in memory: an agent's heartbeat costs a
// map write, never a Raft entry. Only transitions (Reachable → Unreachable
// and back) are written to Raft, batched into one SetServerReachability
// command per evaluation.
//
// Agents stream to any hub member. A member that is not the leader collects
// the names of the Servers it heard from and reports them to the leader
// once a second (MemberService.ReportSeen, see Reporter); the leader records
// them with its own clock. Forwarding, rather than making every agent
// stream to the leader, keeps agents spread over the members and means a
// leader change does not make the whole fleet reconnect at once.
//
// The TTL after which a silent Server turns Unreachable scales with the
// fleet, as Nomad's heartbeat TTL does:
//
//	ttl = max(MinTTL, servers / MaxHeartbeatsPerSecond)
//
// Agents are told to beat every ttl/3, so two lost beats are tolerated, and
// each Server's deadline gets a stable jitter of up to ttl/4 (from a hash
// of its name) so a fleet that went silent together is not marked in one
// burst. After this member becomes leader, its memory is empty: it waits
// one full TTL (plus the jitter) from the moment it took over before it
// marks anything Unreachable, counting every Server as seen at that moment.
//
// Decommissioned Servers are not tracked (the Controller's Servers leave
// them out): the hub refuses their agents, so there is nothing to hear.
// Their recorded reachability is stale from then on; the printers show it
// as not tracked, and status.lastSeen keeps the last heartbeat recorded
// (the API records the leader's last heartbeat when it denies or
// decommissions a Server).
package liveness

import (
	"hash/fnv"
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Defaults for Config fields left zero.
const (
	DefaultMinTTL                 = 30 * time.Second
	DefaultMaxHeartbeatsPerSecond = 500
)

// Config tunes a Tracker.
type Config struct {
	// MinTTL is the smallest TTL. Default DefaultMinTTL.
	MinTTL time.Duration
	// MaxHeartbeatsPerSecond bounds the heartbeat rate the fleet may cause;
	// the TTL grows with the fleet to keep under it. Default
	// DefaultMaxHeartbeatsPerSecond.
	MaxHeartbeatsPerSecond float64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.MinTTL <= 0 {
		c.MinTTL = DefaultMinTTL
	}
	if c.MaxHeartbeatsPerSecond <= 0 {
		c.MaxHeartbeatsPerSecond = DefaultMaxHeartbeatsPerSecond
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// TTL is how long a Server may stay silent in a fleet of n Servers.
func (c Config) TTL(n int) time.Duration {
	c = c.withDefaults()
	ttl := time.Duration(float64(n) / c.MaxHeartbeatsPerSecond * float64(time.Second))
	return max(c.MinTTL, ttl)
}

// Interval is the heartbeat interval agents are told in a fleet of n
// Servers: a third of the TTL, at least one second.
func (c Config) Interval(n int) time.Duration {
	iv := (c.TTL(n) / 3).Truncate(time.Second)
	return max(iv, time.Second)
}

// Jitter is the stable extra time name gets before its deadline: up to
// ttl/4.
func Jitter(name string, ttl time.Duration) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(name))
	span := uint64(ttl / 4)
	if span == 0 {
		return 0
	}
	return time.Duration(h.Sum64() % span)
}

// ServerView is what the Tracker needs to know about one Server.
type ServerView struct {
	Name string
	// Reachable is the recorded reachability (status.reachability is not
	// "Unreachable").
	Reachable bool
	// EnrolledAt is when the Server last enrolled (status.enrolledAt): a
	// Server gets a full TTL from then to connect, however long the leader
	// has led. Zero means unknown.
	EnrolledAt time.Time
}

// Tracker holds heartbeats in memory and computes transitions. It is safe
// for concurrent use.
type Tracker struct {
	cfg Config

	mu       sync.Mutex
	leading  bool
	since    time.Time // when this member became leader
	lastSeen map[string]time.Time
	ttl      time.Duration
}

// NewTracker returns a Tracker that is not leading.
func NewTracker(cfg Config) *Tracker {
	return &Tracker{cfg: cfg.withDefaults(), lastSeen: map[string]time.Time{}, ttl: cfg.withDefaults().MinTTL}
}

// Config returns the tracker's configuration with defaults filled in.
func (t *Tracker) Config() Config { return t.cfg }

// StartLeading forgets every heartbeat and starts the grace period: no
// Server is marked Unreachable before one TTL has passed from now.
func (t *Tracker) StartLeading() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.leading = true
	t.since = t.cfg.Now()
	t.lastSeen = map[string]time.Time{}
}

// StopLeading stops evaluating and forgets every heartbeat.
func (t *Tracker) StopLeading() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.leading = false
	t.lastSeen = map[string]time.Time{}
}

// Leading reports whether StartLeading was called without StopLeading.
func (t *Tracker) Leading() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.leading
}

// Seen records heartbeats of names now. It is a no-op unless leading.
func (t *Tracker) Seen(names ...string) {
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.leading {
		return
	}
	for _, n := range names {
		t.lastSeen[n] = now
	}
}

// LastSeen returns when this member, as leader, last heard from the Server
// name (its own agents' heartbeats and those followers reported), and
// whether that is recent: within the TTL of the last Evaluate plus name's
// jitter, so the Server counts as connected. ok is false while not leading
// or when name was not heard since this member became leader. These times
// live in the leader's memory only; status.lastSeen in the replicated state
// is written at reachability transitions (see the package comment).
func (t *Tracker) LastSeen(name string) (seen time.Time, recent, ok bool) {
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.leading {
		return time.Time{}, false, false
	}
	seen, ok = t.lastSeen[name]
	if !ok {
		return time.Time{}, false, false
	}
	return seen, now.Sub(seen) <= t.ttl+Jitter(name, t.ttl), true
}

// TTL returns the TTL of the last Evaluate.
func (t *Tracker) TTL() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ttl
}

// Counts are the result of one evaluation, for metrics.
type Counts struct {
	Reachable, Unreachable int
	TTL                    time.Duration
	InGrace                bool
}

// Evaluate compares the heartbeats with servers (every Server that is not
// decommissioned) and returns the transitions to record, sorted by name:
// a recorded-reachable Server not seen within its TTL (plus jitter) since
// max(last heartbeat, leadership start) becomes unreachable; a
// recorded-unreachable Server seen within its TTL becomes reachable. It
// returns nothing while not leading.
func (t *Tracker) Evaluate(servers []ServerView) ([]*roostv1.ReachabilityChange, Counts) {
	now := t.cfg.Now()
	ttl := t.cfg.TTL(len(servers))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ttl = ttl
	counts := Counts{TTL: ttl, InGrace: now.Sub(t.since) < ttl}
	if !t.leading {
		return nil, counts
	}
	var out []*roostv1.ReachabilityChange
	known := make(map[string]bool, len(servers))
	for _, s := range servers {
		known[s.Name] = true
		seen, ok := t.lastSeen[s.Name]
		base := t.since
		if s.EnrolledAt.After(base) {
			base = s.EnrolledAt
		}
		if ok && seen.After(base) {
			base = seen
		}
		alive := now.Sub(base) <= ttl+Jitter(s.Name, ttl)
		switch {
		case s.Reachable && !alive:
			c := &roostv1.ReachabilityChange{Name: s.Name, Reachable: false}
			if ok {
				c.LastSeen = timestamppb.New(seen)
			}
			out = append(out, c)
			counts.Unreachable++
		case !s.Reachable && ok && alive:
			out = append(out, &roostv1.ReachabilityChange{Name: s.Name, Reachable: true, LastSeen: timestamppb.New(seen)})
			counts.Reachable++
		case s.Reachable:
			counts.Reachable++
		default:
			counts.Unreachable++
		}
	}
	for n := range t.lastSeen {
		if !known[n] {
			delete(t.lastSeen, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, counts
}
