package test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/test/harness"
)

const (
	linSeeds        = 20
	linControlSeeds = 2 // seeds with stale reads, which the check must catch
	linClients      = 4
	linKeys         = 3
	linSeedDuration = 1200 * time.Millisecond
	linTransfers    = 3 // forced leader changes per seed
	linOpTimeout    = time.Second
	linCheckTimeout = 30 * time.Second

	linKillSeeds        = 6
	linKillSeedDuration = 3 * time.Second
	linKills            = 2                      // leaders killed per seed
	linKillDowntime     = 300 * time.Millisecond // before the killed member restarts
)

// linDisruption is how a seed changes leaders.
type linDisruption int

const (
	linTransfer linDisruption = iota // the leader hands over leadership
	linKill                          // the leader crashes (Raft stops at once) and restarts
)

// kvInput is one operation on the register of one key.
type kvInput struct {
	Write bool
	Key   string
	Value string // written value (writes only)
}

// kvOutput is a read's result: the key's spec.kubernetesVersion, "" when
// the object does not exist.
type kvOutput struct{ Value string }

// kvModel is a register per key (porcupine partitions the history by key):
// the state is the last written value, "" before the first write.
var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(kvInput).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in := input.(kvInput)
		if in.Write {
			return true, in.Value
		}
		return output.(kvOutput).Value == state.(string), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(kvInput)
		if in.Write {
			return fmt.Sprintf("put(%s, %q)", in.Key, in.Value)
		}
		return fmt.Sprintf("get(%s) → %q", in.Key, output.(kvOutput).Value)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%q", state) },
}

// TestLinearizabilityModel checks that the model tells a stale read from a
// fresh one, and accepts a write of unknown outcome either way.
func TestLinearizabilityModel(t *testing.T) {
	op := func(client int, in kvInput, out any, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
	}
	w := func(v string) kvInput { return kvInput{Write: true, Key: "k", Value: v} }
	r := kvInput{Key: "k"}
	for _, tc := range []struct {
		name    string
		history []porcupine.Operation
		want    porcupine.CheckResult
	}{
		{"fresh read", []porcupine.Operation{op(0, w("a"), nil, 0, 10), op(1, r, kvOutput{"a"}, 20, 30)}, porcupine.Ok},
		{"stale read", []porcupine.Operation{op(0, w("a"), nil, 0, 10), op(0, w("b"), nil, 11, 15), op(1, r, kvOutput{"a"}, 20, 30)}, porcupine.Illegal},
		{"read of nothing after a write", []porcupine.Operation{op(0, w("a"), nil, 0, 10), op(1, r, kvOutput{""}, 20, 30)}, porcupine.Illegal},
		{"ambiguous write seen", []porcupine.Operation{op(0, w("a"), nil, 0, math.MaxInt64), op(1, r, kvOutput{"a"}, 20, 30)}, porcupine.Ok},
		{"ambiguous write not seen", []porcupine.Operation{op(0, w("a"), nil, 0, math.MaxInt64), op(1, r, kvOutput{""}, 20, 30)}, porcupine.Ok},
		{"never-written value", []porcupine.Operation{op(1, r, kvOutput{"z"}, 20, 30)}, porcupine.Illegal},
	} {
		if got := porcupine.CheckOperationsTimeout(kvModel, tc.history, 5*time.Second); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestLinearizability is the consistency acceptance test: against one
// in-process cluster of three members (short Raft timeouts, reused across
// seeds), for each of linSeeds seeds, linClients clients — each talking to
// one member, so writes and reads arriving at followers are forwarded to
// the leader — run random writes (Apply of a Cluster whose
// spec.kubernetesVersion is a value never written before) and
// linearizable reads (Get) over linKeys objects for linSeedDuration, while
// the leader is made to hand over leadership linTransfers times. The
// history must be linearizable as one register per object.
//
// Clients dial with client.Dial plus grpc.WithDisableRetry(): each
// recorded operation is exactly one RPC. (With Dial's default retry policy
// a write whose first attempt fails with Unavailable after it was
// committed — raft.ErrLeadershipLost — would be sent again and could apply
// twice, after a concurrent write: that is the client's retry policy, not
// the hub.) A write that fails with Unavailable, DeadlineExceeded or
// Canceled may or may not have taken effect: it stays in the history with
// an unknown (infinite) return time, unless no read returned its value (see
// pruneUnobserved); writes failing otherwise, and failed reads, are left
// out. A control run with stale reads must be found not linearizable.
func TestLinearizability(t *testing.T) {
	if testing.Short() {
		t.Skip("Raft cluster test (3 in-process members, ~40 s): run `make test-root`")
	}
	c := harness.StartInProcess(t, harness.InProcessOptions{Voters: 3, FastRaft: true})
	clients := make([]roostv1.HubServiceClient, linClients)
	for i := range clients {
		clients[i] = c.Dial(t, []string{c.Hubs[i%len(c.Hubs)].APIAddr()}, grpc.WithDisableRetry())
	}
	var total linStats
	for seed := uint64(1); seed <= linSeeds; seed++ {
		t.Run(fmt.Sprintf("seed=%02d", seed), func(t *testing.T) {
			waitStableLeader(t, c)
			st, _ := runLinearizabilitySeed(t, c, clients, seed, roostv1.Consistency_CONSISTENCY_LINEARIZABLE, linSeedDuration, linTransfers, linTransfer)
			total.add(st)
		})
	}
	// Control: the same load with stale reads (answered by the member a
	// client talks to, which may lag) must be caught, or the check above
	// proves nothing.
	t.Run("control=stale-reads", func(t *testing.T) {
		caught := 0
		for seed := uint64(101); seed < 101+linControlSeeds; seed++ {
			waitStableLeader(t, c)
			if _, res := runLinearizabilitySeed(t, c, clients, seed, roostv1.Consistency_CONSISTENCY_STALE, linSeedDuration, linTransfers, linTransfer); res == porcupine.Illegal {
				caught++
			}
		}
		harness.Report(t, "control with CONSISTENCY_STALE reads: %d of %d seeds found not linearizable", caught, linControlSeeds)
		if caught == 0 {
			t.Errorf("stale reads passed the linearizability check in all %d control seeds: the check is not sensitive enough", linControlSeeds)
		}
	})
	harness.Report(t, "%d seeds: %d ops checked of %d writes and %d reads; %d ambiguous writes (%d observed, kept); left out: %d failed writes, %d failed reads; %d leader changes",
		linSeeds, total.ops, total.writes, total.reads, total.ambiguous, total.ambiguousKept, total.failedWrites, total.failedReads, total.transfers)
	harness.Report(t, "errors: %s", formatCounts(total.errors))
}

// TestLinearizabilityLeaderKills is TestLinearizability with crashes
// instead of hand-overs: in each of linKillSeeds seeds of
// linKillSeedDuration, the leader is killed linKills times (its Raft stops
// at once, with writes in flight; harness.InProcess.Kill) and restarted on
// its data dir linKillDowntime later. Clients of the killed member fail
// until it is back (writes: outcome unknown, kept as ambiguous). The
// history must be linearizable: a new leader answers linearizable reads
// only once it has committed an entry of its term and verified its
// leadership, and never from the dead leader's last view.
func TestLinearizabilityLeaderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("Raft cluster test (3 in-process members, ~40 s): run `make test-root`")
	}
	c := harness.StartInProcess(t, harness.InProcessOptions{Voters: 3, FastRaft: true})
	clients := make([]roostv1.HubServiceClient, linClients)
	for i := range clients {
		clients[i] = c.Dial(t, []string{c.Hubs[i%len(c.Hubs)].APIAddr()}, grpc.WithDisableRetry())
	}
	var total linStats
	for seed := uint64(201); seed < 201+linKillSeeds; seed++ {
		t.Run(fmt.Sprintf("seed=%03d", seed), func(t *testing.T) {
			waitStableLeader(t, c)
			st, _ := runLinearizabilitySeed(t, c, clients, seed, roostv1.Consistency_CONSISTENCY_LINEARIZABLE, linKillSeedDuration, linKills, linKill)
			total.add(st)
		})
	}
	harness.Report(t, "%d seeds with leader kills: %d ops checked of %d writes and %d reads; %d ambiguous writes (%d observed, kept); left out: %d failed writes, %d failed reads; %d leaders killed",
		linKillSeeds, total.ops, total.writes, total.reads, total.ambiguous, total.ambiguousKept, total.failedWrites, total.failedReads, total.transfers)
	harness.Report(t, "errors: %s", formatCounts(total.errors))
}

type linStats struct {
	ops, writes, reads, ambiguous, ambiguousKept, failedWrites, failedReads, transfers int
	errors                                                                             map[string]int
}

func (s *linStats) add(o linStats) {
	s.ops += o.ops
	s.writes += o.writes
	s.reads += o.reads
	s.ambiguous += o.ambiguous
	s.ambiguousKept += o.ambiguousKept
	s.failedWrites += o.failedWrites
	s.failedReads += o.failedReads
	s.transfers += o.transfers
	for k, v := range o.errors {
		s.countError(k, v)
	}
}

func (s *linStats) countError(k string, n int) {
	if s.errors == nil {
		s.errors = map[string]int{}
	}
	s.errors[k] += n
}

// errorKind condenses an RPC error for the summary: its code and the start
// of its message with member names and addresses cut off.
func errorKind(err error) string {
	st := status.Convert(err)
	msg := st.Message()
	if i := strings.IndexAny(msg, ":;("); i > 0 {
		msg = msg[:i]
	}
	if len(msg) > 60 {
		msg = msg[:60]
	}
	return st.Code().String() + " " + strings.TrimSpace(msg)
}

// pruneUnobserved drops ambiguous writes (return time unknown) whose value
// no read returned. That changes nothing about linearizability: such a
// write can always be linearized after every other operation, where it
// affects no read, and removing it from a linearization breaks none (no
// read returned its value). It keeps the checker's search small when many
// writes fail during elections.
func pruneUnobserved(history []porcupine.Operation) []porcupine.Operation {
	seen := map[string]bool{}
	for _, op := range history {
		if in := op.Input.(kvInput); !in.Write {
			seen[in.Key+"="+op.Output.(kvOutput).Value] = true
		}
	}
	out := history[:0:0]
	for _, op := range history {
		in := op.Input.(kvInput)
		if in.Write && op.Return == math.MaxInt64 && !seen[in.Key+"="+in.Value] {
			continue
		}
		out = append(out, op)
	}
	return out
}

// runLinearizabilitySeed runs one seed of duration with reads at the given
// consistency and changes leaders `changes` times (by hand-over or kill),
// and returns its figures and porcupine's verdict; it fails the test when
// the run itself went wrong (no leader change, out of time).
func runLinearizabilitySeed(t *testing.T, c *harness.InProcess, clients []roostv1.HubServiceClient, seed uint64, readConsistency roostv1.Consistency,
	duration time.Duration, changes int, how linDisruption) (linStats, porcupine.CheckResult) {
	keys := make([]string, linKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("s%d-k%d", seed, i)
	}
	var (
		counter atomic.Int64
		mu      sync.Mutex
		history []porcupine.Operation
		st      linStats
		wg      sync.WaitGroup
	)
	ctx := harness.Context(t, time.Minute)
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	stop := start.Add(duration)

	// Forced leader changes at random times within the run.
	rng := rand.New(rand.NewPCG(seed, 0))
	wg.Add(1)
	go func() {
		defer wg.Done()
		slot := duration / time.Duration(changes+1)
		for i := range changes {
			at := start.Add(slot*time.Duration(i+1) + time.Duration(rng.Int64N(int64(slot/2))) - slot/4)
			time.Sleep(time.Until(at))
			lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			if leader := c.Leader(lctx); leader != nil && how == linKill {
				i := slices.Index(c.Hubs, leader)
				t.Logf("killing leader %s", leader.ID())
				c.Kill(i)
				mu.Lock()
				st.transfers++
				mu.Unlock()
				time.Sleep(linKillDowntime)
				rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
				if err := c.Restart(rctx, i); err != nil {
					t.Errorf("restart after the kill: %v", err)
				}
				rcancel()
			} else if leader != nil {
				if err := leader.Node().LeadershipTransfer(lctx); err == nil {
					mu.Lock()
					st.transfers++
					mu.Unlock()
				} else {
					t.Logf("leadership transfer from %s: %v", leader.ID(), err)
				}
			}
			cancel()
		}
	}()

	var firstOddity error
	for ci, hc := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(ci+1)))
			for time.Now().Before(stop) && ctx.Err() == nil {
				key := keys[r.IntN(len(keys))]
				op := porcupine.Operation{ClientId: ci}
				octx, cancel := context.WithTimeout(ctx, linOpTimeout)
				if r.IntN(2) == 0 {
					in := kvInput{Write: true, Key: key, Value: fmt.Sprintf("v1.%d.%d", seed, counter.Add(1))}
					op.Input = in
					op.Call = now()
					_, err := hc.Apply(octx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{clusterObject(key, in.Value)}})
					op.Return = now()
					cancel()
					mu.Lock()
					st.writes++
					switch code := status.Code(err); {
					case err == nil:
						history = append(history, op)
					case code == codes.Unavailable || code == codes.Unknown || code == codes.DeadlineExceeded || code == codes.Canceled:
						op.Return = math.MaxInt64 // outcome unknown: it may take effect at any later time
						st.ambiguous++
						history = append(history, op)
					default:
						st.failedWrites++
						if firstOddity == nil {
							firstOddity = fmt.Errorf("write %s=%s: %w", key, in.Value, err)
						}
					}
					if err != nil {
						st.countError("write: "+errorKind(err), 1)
					}
					mu.Unlock()
					if err != nil {
						backoff(r)
					}
					continue
				}
				op.Input = kvInput{Key: key}
				op.Call = now()
				resp, err := hc.Get(octx, &roostv1.GetRequest{Kind: "Cluster", Name: key, Consistency: readConsistency})
				op.Return = now()
				cancel()
				mu.Lock()
				st.reads++
				switch {
				case err == nil:
					op.Output = kvOutput{resp.GetObject().GetCluster().GetSpec().GetKubernetesVersion()}
					history = append(history, op)
				case status.Code(err) == codes.NotFound:
					op.Output = kvOutput{""}
					history = append(history, op)
				default:
					st.failedReads++
					st.countError("read: "+errorKind(err), 1)
				}
				mu.Unlock()
				if err != nil && status.Code(err) != codes.NotFound {
					backoff(r)
				}
			}
		}()
	}
	wg.Wait()
	history = pruneUnobserved(history)
	st.ops = len(history)
	for _, op := range history {
		if op.Return == math.MaxInt64 {
			st.ambiguousKept++
		}
	}

	checkStart := time.Now()
	res, info := porcupine.CheckOperationsVerbose(kvModel, history, linCheckTimeout)
	harness.Report(t, "seed %2d: %4d ops checked of %d writes and %d reads; %3d ambiguous writes (%d observed, kept); left out: %d failed writes, %d failed reads; %d leader changes: %s (checked in %s)",
		seed, st.ops, st.writes, st.reads, st.ambiguous, st.ambiguousKept, st.failedWrites, st.failedReads, st.transfers, res, time.Since(checkStart).Round(time.Millisecond))
	if firstOddity != nil {
		t.Logf("first write failing with a definite error (left out): %v", firstOddity)
	}
	if res != porcupine.Ok && readConsistency == roostv1.Consistency_CONSISTENCY_LINEARIZABLE {
		t.Errorf("history of seed %d is %s, want %s; visualization: %s", seed, res, porcupine.Ok, writeVisualization(t, info, seed))
	}
	if st.transfers == 0 {
		t.Errorf("seed %d: no leader change happened", seed)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("seed %d ran out of time", seed)
	}
	return st, res
}

// backoff pauses a client after a failed operation, as a real client
// would: on two cores, clients retrying at once while there is no leader
// starve the election they wait for.
func backoff(r *rand.Rand) {
	time.Sleep(20*time.Millisecond + time.Duration(r.Int64N(int64(20*time.Millisecond))))
}

// waitStableLeader waits until every member names the same leader and that
// member leads, so a seed starts on a settled cluster (the previous seed's
// check can starve Raft on a small machine).
func waitStableLeader(t *testing.T, c *harness.InProcess) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := harness.Poll(ctx, func() error {
		var id string
		for _, h := range c.Hubs {
			_, l := h.Node().Leader()
			if l == "" || (id != "" && l != id) {
				return fmt.Errorf("members disagree on the leader (%q, %q)", id, l)
			}
			id = l
		}
		for _, h := range c.Hubs {
			if h.ID() == id && !h.Node().IsLeader() {
				return fmt.Errorf("%s is named leader but does not lead", id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("no stable leader before the seed: %v", err)
	}
}

// writeVisualization writes porcupine's HTML view of a failed check to a
// directory that outlives the test (t.TempDir is removed when it ends) and
// returns its path.
func writeVisualization(t *testing.T, info porcupine.LinearizationInfo, seed uint64) string {
	dir := os.Getenv("ROOST_TEST_ARTIFACTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "roost-linearizability-"); err != nil {
			return fmt.Sprintf("(none: %v)", err)
		}
	}
	path := filepath.Join(dir, fmt.Sprintf("linearizability-seed-%02d.html", seed))
	if err := porcupine.VisualizePath(kvModel, info, path); err != nil {
		return fmt.Sprintf("(none: %v)", err)
	}
	return path
}
