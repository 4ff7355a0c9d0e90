package agent

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health/grpc_health_v1"
)

// Spreading agents over the hub's members.
//
// Every enrolled agent ranks the hub's members by rendezvous (highest
// random weight) hashing of its Server name with each member's API
// address (Thaler and Ravishankar, "Using name-based mappings to increase
// hit rates", 1998) and tries them in that order. So each member is the
// first choice of about an equal share of the fleet, whoever reached whom
// first; when a member stops, its agents spread evenly over the others
// (their second choices), and adding or removing a member moves only the
// agents it gains or loses. An agent that is not on its first choice
// checks it now and then (the gRPC health service every member serves) and
// moves back once it is serving again: after a member's restart or a
// rolling upgrade, the fleet returns to even shares instead of piling up
// on the members that stayed up, as Consul's and Nomad's clients rebalance
// their server connections.

// DefaultRebalanceInterval is the shortest wait, on a member that is not
// the Server's first choice, before the agent checks its first choice; the
// check comes after a random wait between one and two intervals (or twelve
// heartbeat intervals, if longer: the hub lengthens heartbeats with the
// fleet size, so a large fleet returns to a restarted member no faster
// than the hub handles heartbeats).
const DefaultRebalanceInterval = 2 * time.Minute

// ErrRebalanced ends a session that the agent leaves for its Server's
// first-choice hub member (Observer.Disconnected receives it).
var ErrRebalanced = errors.New("moving to this Server's first-choice hub member, which is serving again")

// rebalanceProbeTimeout bounds the health check of the first choice.
const rebalanceProbeTimeout = 5 * time.Second

// rendezvousOrder returns hubs ordered by their rendezvous weight for key
// (the Server name), highest first: the first 8 bytes of
// SHA-256(key NUL hub), big-endian. Equal inputs give equal orders in every
// process and release.
func rendezvousOrder(key string, hubs []string) []string {
	weight := func(h string) uint64 {
		sum := sha256.Sum256([]byte(key + "\x00" + h))
		return binary.BigEndian.Uint64(sum[:8])
	}
	out := slices.Clone(hubs)
	slices.SortStableFunc(out, func(a, b string) int {
		wa, wb := weight(a), weight(b)
		switch {
		case wa > wb:
			return -1
		case wa < wb:
			return 1
		}
		return 0
	})
	return out
}

// rebalanceWait is how long a session on a member that is not the first
// choice waits before checking the first choice: uniformly random in
// [R, 2R), R the larger of Options.RebalanceInterval and twelve heartbeat
// intervals, the latter only by default (0). It returns 0 when
// rebalancing is off (a negative RebalanceInterval).
func (a *Agent) rebalanceWait() time.Duration {
	r := a.o.RebalanceInterval
	switch {
	case r < 0:
		return 0
	case r == 0:
		r = max(DefaultRebalanceInterval, 12*a.interval())
	}
	return r + rand.N(r)
}

// firstChoice returns the hub the Server prefers when it is not addr, the
// hub of the current session; "" when addr is the first choice or the
// order is not by preference yet (not enrolled).
func (a *Agent) firstChoice(addr string) string {
	a.hubsMu.Lock()
	defer a.hubsMu.Unlock()
	if !a.ranked || len(a.hubs) == 0 || a.hubs[0] == addr {
		return ""
	}
	return a.hubs[0]
}

// probeServing checks, with the gRPC health service and the agent's
// certificate, that the member at addr serves; it returns nil when it
// answers SERVING within rebalanceProbeTimeout, an error otherwise.
func (a *Agent) probeServing(ctx context.Context, addr string) error {
	conn, err := grpc.NewClient("passthrough:///"+addr, a.dialOptions(false)...)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, rebalanceProbeTimeout)
	defer cancel()
	resp, err := grpc_health_v1.NewHealthClient(conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	if st := resp.GetStatus(); st != grpc_health_v1.HealthCheckResponse_SERVING {
		return errors.New("health: " + st.String())
	}
	return nil
}

// goAwayError ends a session whose member asked the agent to move on
// (HubMessage.go_away: it is shutting down).
type goAwayError struct{ reason string }

func (e *goAwayError) Error() string { return "the hub member asked the agent to move on: " + e.reason }
