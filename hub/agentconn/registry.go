package agentconn

import (
	"log/slog"
	"sync"
	"time"

	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Config wires a Registry.
type Config struct {
	// FSM is the member's state: the desired states and the recorded
	// statuses are read from it.
	FSM *state.FSM
	// Now is the clock (bootstrap token expiry); nil means time.Now.
	Now func() time.Time
	// Logger logs watch failures; nil means slog.Default.
	Logger *slog.Logger
}

// Registry holds the agent streams this member serves, by Server name: at
// most one per Server (a new stream replaces the old one in the registry;
// the old one's own loop still ends it). Its memory per agent is one map
// entry and a Stream. Safe for concurrent use.
type Registry struct {
	fsm *state.FSM
	now func() time.Time
	log *slog.Logger

	mu      sync.Mutex
	streams map[string]*Stream
	// data are the data requests in progress, by request ID (data.go);
	// nil while there never were any.
	data map[string]*DataRequest
}

// Stream serialises sends on one agent stream (gRPC allows one Send at a
// time) and remembers the last desired state sent on it. It is kept small:
// every connected agent holds one.
type Stream struct {
	mu   sync.Mutex
	send func(*roostv1.HubMessage) error
	last *roostv1.DesiredState
}

// New returns an empty Registry.
func New(cfg Config) *Registry {
	r := &Registry{fsm: cfg.FSM, now: cfg.Now, log: cfg.Logger, streams: map[string]*Stream{}}
	if r.now == nil {
		r.now = time.Now
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r
}

// NewStream returns the Stream whose messages send sends (the gRPC
// stream's Send); Register it once the agent may receive pushes.
func NewStream(send func(*roostv1.HubMessage) error) *Stream { return &Stream{send: send} }

// Register records st as the stream of Server name, replacing any other;
// Unregister it when the stream ends.
func (r *Registry) Register(name string, st *Stream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.streams[name] = st
}

// Unregister forgets st, the stream of Server name, unless another stream
// of the same Server replaced it meanwhile.
func (r *Registry) Unregister(name string, st *Stream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.streams[name] == st {
		delete(r.streams, name)
	}
	r.endData(st)
}

// Len returns how many streams are registered.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.streams)
}

func (r *Registry) get(name string) *Stream {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.streams[name]
}

// all returns the registered streams by Server name, copied.
func (r *Registry) all() map[string]*Stream {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]*Stream, len(r.streams))
	for n, st := range r.streams {
		out[n] = st
	}
	return out
}

// Send sends m on the stream, after any send in progress.
func (st *Stream) Send(m *roostv1.HubMessage) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.send(m)
}

// goAwayTimeout bounds how long GoAway spends telling agents.
const goAwayTimeout = time.Second

// GoAway tells every agent streaming to this member to end its stream and
// connect to another member at once (HubMessage.go_away), with reason for
// its log: the member is shutting down, and an agent that waited for its
// stream to be cut would keep the shutdown waiting. It returns how many
// agents were told within goAwayTimeout (1 s). Agents that do not know the
// message keep their streams until the server stops.
func (r *Registry) GoAway(reason string) int {
	all := r.all()
	m := &roostv1.HubMessage{Message: &roostv1.HubMessage_GoAway{GoAway: &roostv1.GoAway{Reason: reason}}}
	told := make(chan bool, len(all))
	go func() {
		for _, st := range all {
			told <- st.Send(m) == nil
		}
	}()
	n := 0
	deadline := time.After(goAwayTimeout)
	for range all {
		select {
		case ok := <-told:
			if ok {
				n++
			}
		case <-deadline:
			return n
		}
	}
	return n
}
