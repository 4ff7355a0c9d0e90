package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// session is one stream to a hub member, from Connect to its end. run
// says hello, sends the status and then waits on its events, each handled
// by a method of its own: a message from the hub (onReceive: heartbeat
// interval, desired state, hub members, go away, log and bundle requests),
// a chunk of such a request to send (sendData), the rebalance timer and
// its probe (onRebalanceTimer, onProbeResult), the heartbeat tick
// (onHeartbeat), certificate renewal (onRenew), the inventory tick
// (onInventoryTick) and a changed host status (onHostStatus). An event
// method's error ends the session with that error.
type session struct {
	a     *Agent
	clock Clock
	// ctx is the agent's; sctx the stream's, canceled when run returns.
	ctx, sctx context.Context
	addr      string
	conn      *grpc.ClientConn
	stream    roostv1.AgentService_ConnectClient

	// recv carries what the receiving goroutine reads; receiving says it
	// runs (then it alone calls Recv).
	recv      chan recvd
	receiving bool
	// connected: the hub answered on this stream.
	connected bool

	hbC, renewC, invC <-chan time.Time
	invEvery          time.Duration
	// Rebalancing: while not on the Server's first choice, check it now
	// and then and move there once it serves (rebalance.go).
	rebalC  <-chan time.Time
	probeC  chan error
	probing string

	// data are the hub's log and bundle requests in progress, by request
	// ID, and dataOut carries their chunks to the loop (datarequest.go);
	// both are made by the first request.
	data    map[string]*dataRequest
	dataOut chan *roostv1.DataChunk
}

// recvd is one stream.Recv result.
type recvd struct {
	m   *roostv1.HubMessage
	err error
}

// runSession runs one stream to the current hub until it fails or ctx
// ends: nil when ctx ended or the hub list changed (start over on the new
// order), ErrRebalanced to move to the Server's first choice, a
// *goAwayError when the member asked the agent to move on, and the error
// of the stream or call otherwise.
func (a *Agent) runSession(ctx context.Context) error {
	addr := a.currentHub()
	a.tried = addr
	conn, err := a.dial(addr, false)
	if err != nil {
		return err
	}
	clock := a.o.Clock
	if c := a.cert.Load(); !clock.Now().Before(RenewAt(c.Leaf)) {
		if err := a.renew(ctx, conn); err != nil {
			if !clock.Now().Before(c.Leaf.NotAfter) {
				a.log.Error("certificate expired and renewal failed; the agent needs a new enrollment token", "expired", c.Leaf.NotAfter.UTC().Format(time.RFC3339), "err", err)
			}
			return err
		}
		if addr != a.currentHub() { // the hub list changed: start over on the new order
			return nil
		}
	}
	s := &session{a: a, clock: clock, ctx: ctx, addr: addr, conn: conn, recv: make(chan recvd, 1)}
	return s.run()
}

// run opens the stream, says hello, sends the status and handles events
// until the session ends (see runSession for what it returns).
func (s *session) run() (err error) {
	a, clock := s.a, s.clock
	sctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	s.sctx = sctx
	stream, err := roostv1.NewAgentServiceClient(s.conn).Connect(sctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	s.stream = stream
	if err := s.send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Hello{Hello: &roostv1.Hello{
		ServerName: a.state.ServerName, AgentVersion: a.o.Version,
		BootedRevision: a.bootedRevision(), LastAppliedGeneration: a.state.LastAppliedGeneration,
	}}}); err != nil {
		return err
	}
	inv := a.gatherInventory(s.ctx)
	if err := s.send(a.statusMessage(inv)); err != nil {
		return err
	}
	a.sentInv = inv
	a.inv.Store(inv)
	var dirty <-chan struct{}
	if a.hs != nil {
		// a cleaning result the last stream may have lost (the hub
		// ignores one it recorded)
		if r := a.hs.cleaningResult(false); r != nil {
			if err := s.send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_CleaningResult{CleaningResult: r}}); err != nil {
				return err
			}
		}
		dirty = a.hs.dirty
	}

	s.receiving = true
	go func() {
		for {
			m, err := stream.Recv()
			select {
			case s.recv <- recvd{m, err}:
			case <-sctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	s.hbC = clock.After(a.jittered(a.interval()))
	if c := a.cert.Load(); c != nil {
		s.renewC = clock.After(RenewAt(c.Leaf).Sub(clock.Now()))
	}
	s.invEvery = a.o.InventoryInterval
	if s.invEvery == 0 {
		s.invEvery = DefaultInventoryInterval
	}
	if s.invEvery > 0 {
		s.invC = clock.After(s.invEvery)
	}
	defer func() { s.disconnected(err) }()
	defer s.stopData()
	for {
		select {
		case <-s.ctx.Done():
			return nil
		case r := <-s.recv:
			err = s.onReceive(r)
		case <-s.rebalC:
			s.onRebalanceTimer()
		case perr := <-s.probeC:
			err = s.onProbeResult(perr)
		case <-s.hbC:
			err = s.onHeartbeat()
		case <-s.renewC:
			s.onRenew()
		case <-s.invC:
			err = s.onInventoryTick()
		case <-dirty:
			err = s.onHostStatus()
		case c := <-s.dataOut:
			err = s.sendData(c)
		}
		if err != nil {
			return err
		}
	}
}

// send sends m on the stream. When the hub has ended the stream (io.EOF),
// the error is the stream's status, as Recv reports it.
func (s *session) send(m *roostv1.AgentMessage) error {
	err := s.stream.Send(m)
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) {
		// The hub ended the stream; its status comes from Recv (in the
		// receiving goroutine once it runs: one Recv at a time).
		if !s.receiving {
			if _, rerr := s.stream.Recv(); rerr != nil {
				return fmt.Errorf("stream: %w", rerr)
			}
		} else {
			for {
				select {
				case r := <-s.recv:
					if r.err != nil {
						return fmt.Errorf("stream: %w", r.err)
					}
					continue
				case <-s.clock.After(5 * time.Second):
				}
				break
			}
		}
	}
	return fmt.Errorf("stream send: %w", err)
}

// disconnected logs and reports the end of a session that had connected;
// err is what ended it.
func (s *session) disconnected(err error) {
	if !s.connected {
		return
	}
	a := s.a
	reason := any(err)
	if err == nil && s.ctx.Err() != nil {
		reason = "the agent is stopping"
	}
	a.log.Info("disconnected", "hub", s.addr, "reason", reason)
	if a.o.Observer != nil {
		a.o.Observer.Disconnected(s.addr, err)
	}
}

// armRebalance starts the rebalance timer when the session is not on the
// Server's first choice and neither the timer nor a probe runs.
func (s *session) armRebalance() {
	if s.rebalC == nil && s.probeC == nil && s.a.firstChoice(s.addr) != "" {
		if w := s.a.rebalanceWait(); w > 0 {
			s.rebalC = s.clock.After(w)
		}
	}
}

// onReceive handles what the receiving goroutine read: the first message
// marks the session connected; a heartbeat interval, desired state, hub
// members or go away is acted on. A receive error ends the session.
func (s *session) onReceive(r recvd) error {
	a := s.a
	if r.err != nil {
		if errors.Is(r.err, io.EOF) {
			return errors.New("the hub closed the stream")
		}
		return fmt.Errorf("stream: %w", r.err)
	}
	if !s.connected {
		s.connected = true
		a.log.Info("connected", "hub", s.addr, "server", a.state.ServerName, "generation", a.state.LastAppliedGeneration)
		if a.o.Observer != nil {
			a.o.Observer.Connected(s.addr)
		}
		s.armRebalance()
	}
	switch m := r.m.GetMessage().(type) {
	case *roostv1.HubMessage_HeartbeatIntervalSeconds:
		s.onHeartbeatInterval(m.HeartbeatIntervalSeconds)
	case *roostv1.HubMessage_Desired:
		return a.applyDesired(m.Desired, s.send)
	case *roostv1.HubMessage_Members:
		a.learnHubs(m.Members.GetApiAddresses())
		s.armRebalance()
	case *roostv1.HubMessage_GoAway:
		return &goAwayError{reason: m.GoAway.GetReason()}
	case *roostv1.HubMessage_ReadJournal:
		s.onReadJournal(m.ReadJournal)
	case *roostv1.HubMessage_CollectBundle:
		s.onCollectBundle(m.CollectBundle)
	case *roostv1.HubMessage_DataCredit:
		s.onDataCredit(m.DataCredit)
	}
	return nil
}

// onHeartbeatInterval follows the interval the hub asks for (seconds;
// values outside 1..3600 are ignored) and restarts the heartbeat timer.
func (s *session) onHeartbeatInterval(secs int64) {
	a := s.a
	if secs > 0 && secs <= 3600 {
		if d := time.Duration(secs) * time.Second; d != a.heartbeat {
			a.heartbeat = d
			a.log.Debug("heartbeat interval", "interval", d)
		}
		s.hbC = s.clock.After(a.jittered(a.interval()))
	}
}

// onRebalanceTimer probes the Server's first-choice member, when the
// session is still not on it.
func (s *session) onRebalanceTimer() {
	s.rebalC = nil
	if s.probing = s.a.firstChoice(s.addr); s.probing != "" {
		s.probeC = make(chan error, 1)
		go func(to string, done chan<- error) { done <- s.a.probeServing(s.sctx, to) }(s.probing, s.probeC)
	}
}

// onProbeResult ends the session with ErrRebalanced when the probed
// first choice serves and still is the first choice; else it re-arms the
// rebalance timer.
func (s *session) onProbeResult(perr error) error {
	a := s.a
	s.probeC = nil
	if perr == nil && a.firstChoice(s.addr) == s.probing {
		a.moveTo = s.probing
		return ErrRebalanced
	}
	if perr != nil {
		a.log.Debug("first-choice hub member not serving; staying", "hub", s.addr, "first_choice", s.probing, "err", perr)
	}
	s.armRebalance()
	return nil
}

// onHeartbeat sends a heartbeat and sets the next one.
func (s *session) onHeartbeat() error {
	a := s.a
	if err := s.send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Heartbeat{Heartbeat: &roostv1.Heartbeat{SentAt: timestamppb.New(s.clock.Now())}}}); err != nil {
		return err
	}
	s.hbC = s.clock.After(a.jittered(a.interval()))
	return nil
}

// onRenew renews the certificate: the next renewal is due at RenewAt of
// the new one; after a failure it is retried in a tenth of the time left
// (between a second and a minute).
func (s *session) onRenew() {
	a, clock := s.a, s.clock
	s.renewC = nil
	if rerr := a.renew(s.ctx, s.conn); rerr != nil {
		a.log.Warn("certificate renewal failed; retrying", "err", rerr)
		left := a.cert.Load().Leaf.NotAfter.Sub(clock.Now())
		s.renewC = clock.After(max(min(time.Minute, left/10), time.Second))
	} else {
		s.renewC = clock.After(RenewAt(a.cert.Load().Leaf).Sub(clock.Now()))
	}
}

// onInventoryTick gathers the inventory again and sends a status when it
// changed.
func (s *session) onInventoryTick() error {
	a := s.a
	s.invC = s.clock.After(s.invEvery)
	inv := a.gatherInventory(s.ctx)
	if !proto.Equal(inv, a.sentInv) {
		a.log.Info("inventory changed")
		if err := s.send(a.statusMessage(inv)); err != nil {
			return err
		}
		a.sentInv = inv
		a.inv.Store(inv)
	}
	return nil
}

// onHostStatus sends a status when the host loop's conditions or failed
// Revisions changed, and a cleaning result not sent yet.
func (s *session) onHostStatus() error {
	if err := s.send(s.a.statusMessage(s.a.sentInv)); err != nil {
		return err
	}
	if r := s.a.hs.cleaningResult(true); r != nil {
		return s.send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_CleaningResult{CleaningResult: r}})
	}
	return nil
}

// bootedRevision is the Revision this boot runs: 0 once a cleaning let
// the disks go.
func (a *Agent) bootedRevision() int64 {
	if a.hs != nil && a.hs.detached() {
		return 0
	}
	return a.state.BootedRevision
}

func (a *Agent) interval() time.Duration {
	if a.o.Heartbeat > 0 {
		return a.o.Heartbeat
	}
	return a.heartbeat
}

// jittered spreads heartbeats: d ± 10 %.
func (a *Agent) jittered(d time.Duration) time.Duration {
	return d - d/10 + time.Duration(rand.Float64()*float64(d/5))
}

func (a *Agent) statusMessage(inv *roostv1.Inventory) *roostv1.AgentMessage {
	cond := &roostv1.Condition{Type: "InventoryCollected", Status: "True", Reason: "Collected"}
	if a.invErr != nil {
		cond.Status, cond.Reason, cond.Message = "False", "Incomplete", a.invErr.Error()
	}
	st := &roostv1.AgentStatus{
		Inventory: inv, BootedRevision: a.state.BootedRevision,
		AppliedGeneration: a.state.LastAppliedGeneration, Conditions: []*roostv1.Condition{cond},
	}
	if a.hs != nil {
		a.hs.report(st)
	}
	return &roostv1.AgentMessage{Message: &roostv1.AgentMessage_Status{Status: st}}
}

// applyDesired writes or removes the kubelet's bootstrap kubeconfig, hands
// a desired state to the host loop (which installs, stages and reboots
// into its Revision) and records its generation, so that a reconnecting
// agent resumes from it (Hello.last_applied_generation). Without a Host
// only the generation is recorded.
func (a *Agent) applyDesired(d *roostv1.DesiredState, send func(*roostv1.AgentMessage) error) error {
	if a.hs != nil {
		// every time, not per generation: the file lives in RAM, and a
		// token may come and go without a new Revision
		a.applyKubeletBootstrap(d.GetKubeletBootstrap())
		a.hs.offer(d)
	} else if c := d.GetCleaning(); c != nil {
		// Without a Host nothing here can wipe the disks: say so, so the
		// Server is kept out (CleaningFailed) rather than reused unwiped.
		a.log.Warn("the hub asks for a cleaning, and this agent does not manage its host", "index", c.GetIndex())
		if err := send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_CleaningResult{CleaningResult: &roostv1.CleaningResult{
			Index: c.GetIndex(), Error: "this agent does not manage its host (roost-agent without --manage-host), so it cannot wipe the disks"}}}); err != nil {
			return err
		}
	}
	if d.GetGeneration() <= a.state.LastAppliedGeneration {
		a.log.Debug("desired state already applied", "generation", d.GetGeneration())
		return nil
	}
	a.log.Info("desired state received", "generation", d.GetGeneration(), "revision", d.GetRevision(), "failed", d.GetFailed())
	st := a.state
	st.LastAppliedGeneration = d.GetGeneration()
	if err := a.o.Store.SaveState(st); err != nil {
		return fmt.Errorf("record generation: %w", err)
	}
	a.state = st
	return send(a.statusMessage(a.sentInv))
}
