// Package sim runs many simulated agents in one process against a real
// hub: the agent's own code (package agent) with fake OS adapters — a
// synthetic identity and inventory per Server and an in-memory (or
// per-agent directory) state store — and, with a FakeHost, the agent's own
// host loop over in-memory disks and per-Server folders, so simulated
// Servers install, stage, lease and reboot into Revisions. It is
// `roost-agent simulate`.
package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/roostfleet/roost/agent"
)

// Options of a simulation.
type Options struct {
	Count int
	Hubs  []string
	CA    []byte
	Token string
	// StateDir, when set, gives agent i the directory StateDir/agent-NNNNN
	// (so a second run resumes as the same Servers); empty keeps state in
	// memory.
	StateDir string
	// Heartbeat overrides the hub's heartbeat interval (0: as the hub says).
	Heartbeat time.Duration
	// RebalanceInterval is agent.Options.RebalanceInterval (0: the
	// default; negative: never).
	RebalanceInterval time.Duration
	// Seed makes the simulated identities (same seed, same Servers).
	Seed int64
	// Rate is how many agents start per second (0: all at once).
	Rate float64
	// EnrollParallel bounds concurrent Enroll calls (0: 64).
	EnrollParallel int
	Version        string
	// Logger receives the agents' logs (default: discard below Error).
	Logger *slog.Logger
	// Progress receives a progress line every ProgressEvery (default 1 s;
	// nil: none).
	Progress      io.Writer
	ProgressEvery time.Duration
	// Host, when set, gives every simulated Server a fake host that
	// installs, stages and boots Revisions (see FakeHost); nil runs agents
	// that only enroll, connect and report.
	Host *FakeHost
}

// filesPerAgent is how many open files Run budgets per simulated agent.
const filesPerAgent = 4

// Counters are the simulation's progress.
// Refused counts agents whose enrollment the hub refused (they stop);
// Rejected agents whose last session the hub refused (deleted or
// decommissioned Servers: they retry slowly); Rebalanced counts sessions
// agents left for their first-choice hub member (agent.ErrRebalanced).
// With a fake host, Reboots counts simulated reboots, FailedBoots the
// boots whose assessment the Server fails (FakeHost.FailRate), and
// Restarts the agents restarted after they stopped with an error (as
// systemd's Restart=always does on a Server; Failed counts them too).
type Counters struct {
	Started, Enrolled, Connected, Reconnects, Rebalanced, Refused, Rejected, Failed atomic.Int64
	Reboots, FailedBoots, Restarts                                                  atomic.Int64
}

// String returns the counters as a progress line (reboots and
// failed-boots only with a fake host).
func (c *Counters) String() string {
	return c.line(false)
}

func (c *Counters) line(host bool) string {
	s := fmt.Sprintf("started=%d enrolled=%d connected=%d reconnects=%d rebalanced=%d refused=%d rejected=%d failed=%d",
		c.Started.Load(), c.Enrolled.Load(), c.Connected.Load(), c.Reconnects.Load(), c.Rebalanced.Load(), c.Refused.Load(), c.Rejected.Load(), c.Failed.Load())
	if host {
		s += fmt.Sprintf(" reboots=%d failed-boots=%d restarts=%d", c.Reboots.Load(), c.FailedBoots.Load(), c.Restarts.Load())
	}
	return s
}

type observer struct {
	c         *Counters
	milestone func(what string, n int64)
	connected atomic.Bool
	ever      atomic.Bool
	rejected  atomic.Bool
}

func (o *observer) Enrolled(string) { o.milestone("enrolled", o.c.Enrolled.Add(1)) }
func (o *observer) Connected(string) {
	if o.rejected.CompareAndSwap(true, false) {
		o.c.Rejected.Add(-1)
	}
	if o.connected.CompareAndSwap(false, true) {
		o.milestone("connected", o.c.Connected.Add(1))
	}
	if !o.ever.CompareAndSwap(false, true) {
		o.c.Reconnects.Add(1)
	}
}
func (o *observer) Disconnected(_ string, err error) {
	if o.connected.CompareAndSwap(true, false) {
		o.c.Connected.Add(-1)
	}
	if errors.Is(err, agent.ErrRebalanced) {
		o.c.Rebalanced.Add(1)
	}
}
func (o *observer) SessionRefused(string, error) {
	if o.rejected.CompareAndSwap(false, true) {
		o.c.Rejected.Add(1)
	}
}

// Run runs the simulation until ctx ends; it returns the counters.
func Run(ctx context.Context, o Options) (*Counters, error) {
	if o.Count <= 0 {
		return nil, fmt.Errorf("simulate: --count must be positive")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.EnrollParallel <= 0 {
		o.EnrollParallel = 64
	}
	sem := make(chan struct{}, o.EnrollParallel)
	gate := func(ctx context.Context) (func(), error) {
		select {
		case sem <- struct{}{}:
			return func() { <-sem }, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c := &Counters{}
	if o.Host != nil {
		if o.Host.Dir == "" {
			return nil, errors.New("simulate: the fake host needs a folder (FakeHost.Dir)")
		}
		o.Host.withDefaults()
	}
	// Each simulated Server holds a connection (two while it reconnects)
	// and its state lock, and opens files as it stages and boots: without
	// room for them the process runs out of descriptors at thousands of
	// agents and agents fail for the simulator's sake, not the hub's.
	want := uint64(o.Count)*filesPerAgent + 256
	if got, err := raiseOpenFiles(want); err == nil && got < want && o.Progress != nil {
		fmt.Fprintf(o.Progress, "simulate: warning: at most %d open files (RLIMIT_NOFILE), %d agents may need %d: raise it (ulimit -n) or run fewer\n", got, o.Count, want)
	}
	start := time.Now()
	if o.Progress != nil {
		go func() {
			every := o.ProgressEvery
			if every <= 0 {
				every = time.Second
			}
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case now := <-t.C:
					fmt.Fprintf(o.Progress, "simulate: t=%.1fs %s\n", now.Sub(start).Seconds(), c.line(o.Host != nil))
				}
			}
		}()
	}
	// The first time every agent is enrolled (connected), say when.
	var reached sync.Map
	milestone := func(what string, n int64) {
		if n != int64(o.Count) || o.Progress == nil {
			return
		}
		if _, seen := reached.LoadOrStore(what, true); !seen {
			fmt.Fprintf(o.Progress, "simulate: all %d %s after %.3fs\n", o.Count, what, time.Since(start).Seconds())
		}
	}
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	for i := 0; i < o.Count; i++ {
		if o.Rate > 0 {
			due := start.Add(time.Duration(float64(i) / o.Rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(d):
				}
			}
		}
		if ctx.Err() != nil {
			break
		}
		id, inv := agent.SimulatedServer(o.Seed, i)
		obs := &observer{c: c, milestone: milestone}
		newAgent := func(store agent.Store, host *agent.Host) (*agent.Agent, error) {
			return agent.New(agent.Options{
				Hubs: o.Hubs, CA: o.CA, Token: o.Token, Version: o.Version,
				Store: store, Identity: id, Inventory: inv, Host: host,
				Logger:            o.Logger.With("agent", i),
				Heartbeat:         o.Heartbeat,
				RebalanceInterval: o.RebalanceInterval,
				InventoryInterval: -1,
				EnrollGate:        gate,
				Observer:          obs,
			})
		}
		var run func(context.Context) error
		if o.Host != nil {
			inv.Inv.Disks = fakeDisks(i)
			srv, err := o.Host.newServer(c, i, o.Seed, o.Logger)
			if err != nil {
				return c, err
			}
			run = func(ctx context.Context) error { return srv.run(ctx, newAgent) }
		} else {
			var store agent.Store = &agent.MemStore{}
			if o.StateDir != "" {
				store = agent.FileStore{Dir: filepath.Join(o.StateDir, fmt.Sprintf("agent-%05d", i))}
			}
			a, err := newAgent(store, nil)
			if err != nil {
				return c, err
			}
			run = a.Run
		}
		c.Started.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil {
				var refused *agent.RefusedError
				if errors.As(err, &refused) {
					c.Refused.Add(1)
				} else {
					c.Failed.Add(1)
				}
				firstErr.CompareAndSwap(nil, &err)
				o.Logger.Error("agent stopped", "agent", i, "err", err)
			}
		}()
	}
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		return c, *p
	}
	return c, nil
}
