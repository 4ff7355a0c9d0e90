package hub

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// leadershipHandOverTimeout bounds how long Close waits for another voter
// to take over before it drains anyway (Raft gives up on a transfer after
// one election timeout on its own).
const leadershipHandOverTimeout = 3 * time.Second

// handOverLeadership makes another voter the leader when this member leads
// and is not the only voter, before Close drains the API: draining waits
// up to 5 s for streams (of agents too old for go_away, say), and a leader
// that only then shut down would stop every write for that long plus an
// election. Raft's leadership
// transfer (TimeoutNow to the most up-to-date voter) takes about one round
// trip and an election; writes arriving meanwhile fail with Unavailable
// and clients retry them. When the transfer fails, Close goes on: the
// others elect a leader once this one is gone.
func (h *Hub) handOverLeadership() {
	if h.node == nil || !h.node.IsLeader() {
		return
	}
	servers, err := h.node.Servers()
	if err != nil {
		return
	}
	others := 0
	for _, s := range servers {
		if string(s.ID) != h.id && s.Suffrage == raft.Voter {
			others++
		}
	}
	if others == 0 {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), leadershipHandOverTimeout)
	defer cancel()
	if err := h.node.LeadershipTransfer(ctx); err != nil {
		h.log.Warn("stopping: could not hand leadership over; the other members elect a leader once this one stops", "err", err)
		return
	}
	// The transfer's future returns once this member stepped down; wait
	// briefly for the successor to be known, for the log line.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		if _, id := h.node.Leader(); id != "" && id != h.id {
			h.log.Info("stopping: handed leadership over", "to", id, "took", time.Since(start).Round(time.Millisecond))
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.log.Info("stopping: stepped down as leader", "took", time.Since(start).Round(time.Millisecond))
}

// Close stops serving and shuts Raft down (a graceful stop: in-flight
// requests finish, at most 5 s). A leader with other voters first hands
// leadership to one of them (see handOverLeadership), so writes go on
// while it drains. Streams that would hold the drain are ended first:
// agents are told to go away (agentconn.Registry.GoAway) and open Watch streams
// end with Unavailable (stopping, serveUntilRemoved), so that their
// clients move to another member.
func (h *Hub) Close() error {
	if h.healthSrv != nil {
		h.healthSrv.Shutdown() // NOT_SERVING from now on: probes and load balancers move on
	}
	h.handOverLeadership()
	if h.cancel != nil {
		h.cancel()
		<-h.done
		<-h.liveDone
	}
	if h.http != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		h.http.Shutdown(sctx)
		cancel()
	}
	if h.media != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		h.media.Shutdown(sctx)
		cancel()
	}
	if h.boot != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		h.boot.Shutdown(sctx)
		cancel()
	}
	if h.agents != nil {
		if n := h.agents.GoAway("hub member " + h.id + " is shutting down"); n > 0 {
			h.log.Info("stopping: told agents to move to other members", "agents", n)
		}
	}
	h.stopping.set(true) // ends open Watch streams (serveUntilRemoved)
	if h.grpc != nil {
		stopped := make(chan struct{})
		go func() { h.grpc.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			h.grpc.Stop()
		}
	}
	if h.api != nil {
		h.api.Close()
	}
	if h.audit != nil {
		h.audit.Close()
	}
	var err error
	if h.node != nil {
		err = h.node.Shutdown()
	}
	if h.unlock != nil {
		h.unlock()
	}
	return err
}
