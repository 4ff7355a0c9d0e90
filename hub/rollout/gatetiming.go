package rollout

import (
	"time"
)

// drainStart is when the leader started the drain of the Lease with
// fencing token token.
type drainStart struct {
	token uint64
	at    time.Time
}

// waitStart is when a Server first asked in vain for a Lease to reboot
// into Revision revision.
type waitStart struct {
	revision int64
	at       time.Time
}

// refused notes that server asked for a Lease into revision and did not
// get it yet: its wait starts at its first such ask for that Revision
// (kept until the grant; an ask for another Revision starts over).
func (g *Gate) refused(server string, revision int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.waitSince == nil {
		g.waitSince = map[string]waitStart{}
	}
	if w, ok := g.waitSince[server]; !ok || w.revision != revision {
		g.waitSince[server] = waitStart{revision: revision, at: g.now()}
	}
}

// granted records the wait of server (of pool) for the Lease into
// revision just granted: 0 when granted at its first ask.
func (g *Gate) granted(server, pool string, revision int64) {
	g.mu.Lock()
	w, ok := g.waitSince[server]
	delete(g.waitSince, server)
	g.mu.Unlock()
	wait := time.Duration(0)
	if ok && w.revision == revision {
		wait = g.now().Sub(w.at)
	}
	g.Events.LeaseGranted(pool, wait)
}

// draining notes that the drain of server's Lease with fencing token
// token runs; its clock starts at the first call for that token.
func (g *Gate) draining(server string, token uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.drainSince == nil {
		g.drainSince = map[string]drainStart{}
	}
	if d, ok := g.drainSince[server]; !ok || d.token != token {
		g.drainSince[server] = drainStart{token: token, at: g.now()}
	}
}

// drained records how long the drain of server's Lease (of pool) took and
// how it ended (fleetmetrics.DrainDrained or DrainFailed).
func (g *Gate) drained(server, pool, result string) {
	g.mu.Lock()
	d, ok := g.drainSince[server]
	delete(g.drainSince, server)
	g.mu.Unlock()
	if ok {
		g.Events.DrainFinished(pool, result, g.now().Sub(d.at))
	}
}
