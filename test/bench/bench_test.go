// Package bench measures the hub's write path: Raft commit throughput and
// latency for 1 and 3 voters on loopback, with 1 and 16 concurrent clients
// (and 256 for 3 voters on raft-wal), for both Raft log stores (raft-wal,
// the default, and raft-boltdb/v2), and etcd's Puts in the same shape (3
// members, TLS, one client connection) for a side-by-side comparison.
// Run it with `make bench`; summary tables are printed after the
// benchmarks.
package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roostfleet/roost/hub/raftnode"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/test/harness"
)

// maxRun bounds one run of a sub-benchmark (b.N operations), whatever b.N is.
const maxRun = 2 * time.Minute

type result struct {
	procs           bool // roost-hub processes, not in-process hubs
	store           string
	voters, clients int
	ops             int
	cmdsPerSec      float64
	p50, p99        time.Duration
	// cpuPerOp is the CPU time (user and system) the cluster's member
	// processes spent per operation; 0 for in-process hubs.
	cpuPerOp time.Duration
}

var (
	resultsMu sync.Mutex
	results   = map[string]result{} // by sub-benchmark name; the last (largest) run wins
)

// BenchmarkCommit measures committed commands per second and the p50 and
// p99 latency of one commit. Each operation is one gRPC Apply of a new
// Cluster object through client.Dial (TLS) to the leader — the real write
// path: validation at the edge, one ApplyObjects command proposed through
// Raft (log append with fsync on a quorum), applied to the FSM, answered.
// All clients share one connection. The cluster runs on 127.0.0.1 with
// Raft's default timeouts: in this process (hubs=in-process: every log
// store and size), and as 3 roost-hub processes on raft-wal
// (hubs=processes), the shape of BenchmarkEtcdPut's etcd, which it is
// compared with: on a busy machine, members sharing one Go runtime get
// fewer CPU threads than three processes do.
func BenchmarkCommit(b *testing.B) {
	type config struct {
		procs  bool
		store  string
		voters int
	}
	configs := []config{{procs: true, store: raftnodeWAL, voters: etcdVoters}}
	for _, store := range []string{raftnode.LogStoreWAL, raftnode.LogStoreBolt} {
		for _, voters := range []int{1, 3} {
			configs = append(configs, config{store: store, voters: voters})
		}
	}
	for _, cfg := range configs {
		b.Run(fmt.Sprintf("hubs=%s/store=%s/voters=%d", hubsName(cfg.procs), cfg.store, cfg.voters), func(b *testing.B) {
			hc, pids := startHub(b, cfg.procs, cfg.store, cfg.voters)
			var runs atomic.Int64
			for _, clients := range clientCounts(cfg.store, cfg.voters) {
				b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
					run := runs.Add(1)
					r := commitRun(b, clients, pids, func(ctx context.Context, i int) error {
						_, err := hc.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{cluster(fmt.Sprintf("r%d-%d", run, i))}})
						return err
					})
					r.procs, r.store, r.voters = cfg.procs, cfg.store, cfg.voters
					resultsMu.Lock()
					results[b.Name()] = r
					resultsMu.Unlock()
				})
			}
		})
	}
}

// hubsName is the hubs= part of a sub-benchmark's name.
func hubsName(procs bool) string {
	if procs {
		return "processes"
	}
	return "in-process"
}

// startHub starts a hub of the given size and log store, as roost-hub
// processes (harness.StartCluster) or in this process
// (harness.StartInProcess), and returns a client of its leader and the
// process IDs of the members (none in-process).
func startHub(b *testing.B, procs bool, store string, voters int) (roostv1.HubServiceClient, []int) {
	if procs {
		c := harness.StartCluster(b, voters, harness.ClusterOptions{LogStore: store})
		var pids []int
		for _, m := range c.Members {
			pids = append(pids, m.PID())
		}
		return c.Client(b, c.Leader(b).APIAddr), pids
	}
	c := harness.StartInProcess(b, harness.InProcessOptions{Voters: voters, LogStore: store})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	leader := c.Leader(ctx)
	cancel()
	if leader == nil {
		b.Fatal("no leader")
	}
	return c.Dial(b, []string{leader.APIAddr()}), nil
}

// raftnodeWAL is the log store of the row compared with etcd.
const raftnodeWAL = raftnode.LogStoreWAL

// clientCounts returns the numbers of concurrent clients a configuration
// runs with: 1, 16 and 256 for 3 voters on raft-wal (the processes are
// compared with etcd), 1 and 16 for the others.
func clientCounts(store string, voters int) []int {
	if store == raftnodeWAL && voters == etcdVoters {
		return []int{1, 16, 256}
	}
	return []int{1, 16}
}

// commitRun calls op b.N times (i from 0 to b.N-1) from the given number
// of concurrent clients and reports the throughput, the p50 and p99
// latency of one call and, when the servers run as the processes pids,
// the CPU time they spent per call.
func commitRun(b *testing.B, clients int, pids []int, op func(ctx context.Context, i int) error) result {
	ctx, cancel := context.WithTimeout(context.Background(), maxRun)
	defer cancel()
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	cpu0 := cpuTime(b, pids)
	b.ResetTimer()
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				t0 := time.Now()
				err := op(ctx, i)
				lat[i] = time.Since(t0)
				if err != nil {
					failed.Add(1)
					errOnce.Do(func() { firstErr = err })
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := cpuTime(b, pids) - cpu0
	if firstErr != nil {
		b.Fatalf("%d of %d calls failed; first: %v", failed.Load(), b.N, firstErr)
	}
	if ctx.Err() != nil {
		b.Fatalf("run of %d calls exceeded %s", b.N, maxRun)
	}
	slices.Sort(lat)
	r := result{
		clients: clients, ops: b.N,
		cmdsPerSec: float64(b.N) / elapsed.Seconds(),
		p50:        lat[percentileIndex(len(lat), 50)],
		p99:        lat[percentileIndex(len(lat), 99)],
		cpuPerOp:   cpu / time.Duration(b.N),
	}
	b.ReportMetric(r.cmdsPerSec, "cmds/s")
	if len(pids) > 0 {
		b.ReportMetric(float64(r.cpuPerOp)/float64(time.Microsecond), "cpu-µs/op")
	}
	b.ReportMetric(ms(r.p50), "p50-ms")
	b.ReportMetric(ms(r.p99), "p99-ms")
	return r
}

// clockTicks is the unit of the CPU times of /proc/PID/stat (USER_HZ,
// 100 on every Linux architecture Go supports).
const clockTicks = 100

// cpuTime returns the CPU time (user and system, all threads) the
// processes pids have spent so far, from /proc/PID/stat.
func cpuTime(b *testing.B, pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Fatalf("CPU time of process %d: %v", pid, err)
		}
		// Fields after the command name, which is in parentheses and may
		// hold spaces: state is the 3rd field, utime and stime the 14th and 15th.
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(f) < 13 {
			b.Fatalf("CPU time of process %d: short /proc/%d/stat", pid, pid)
		}
		for _, v := range f[11:13] {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatalf("CPU time of process %d: %v", pid, err)
			}
			total += time.Duration(n) * time.Second / clockTicks
		}
	}
	return total
}

func percentileIndex(n, p int) int {
	return min(n-1, (n*p+99)/100-1)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func cluster(name string) *roostv1.Object {
	return &roostv1.Object{Kind: &roostv1.Object_Cluster{Cluster: &roostv1.Cluster{
		Metadata: &roostv1.ObjectMeta{Name: name, Labels: map[string]string{"bench": "commit"}},
		Spec:     &roostv1.ClusterSpec{ApiEndpoint: "https://10.0.0.1:6443", KubernetesVersion: "v1.34.4"},
	}}}
}

// TestMain runs the benchmarks (or, with $ROOST_BENCH_GRPC_FLOOR_SERVER,
// the bare gRPC server of BenchmarkAgents), then prints a summary table of
// BenchmarkCommit and, per configuration, how the two log stores compare.
func TestMain(m *testing.M) {
	if dir := os.Getenv(envFloorServer); dir != "" {
		os.Exit(runFloorServer(dir))
	}
	code := m.Run()
	if s := summary(); s != "" {
		fmt.Print(s)
	}
	os.Exit(code)
}

func summary() string {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if len(results) == 0 {
		return ""
	}
	rs := make([]result, 0, len(results))
	byKey := map[string]result{}
	for _, r := range results {
		byKey[key(r.procs, r.store, r.voters, r.clients)] = r
		if r.store != storeEtcd {
			rs = append(rs, r)
		}
	}
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.procs != b.procs {
			return !a.procs // in-process first
		}
		if a.voters != b.voters {
			return a.voters < b.voters
		}
		if a.clients != b.clients {
			return a.clients < b.clients
		}
		return a.store > b.store // wal first
	})
	var sb strings.Builder
	if len(rs) > 0 {
		sb.WriteString("\nRaft commit (gRPC Apply to the leader over TLS on loopback; one ApplyObjects command each)\n")
		fmt.Fprintf(&sb, "%-10s %-7s %6s %7s %7s %10s %8s %8s\n", "hubs", "store", "voters", "clients", "ops", "cmds/s", "p50-ms", "p99-ms")
		for _, r := range rs {
			fmt.Fprintf(&sb, "%-10s %-7s %6d %7d %7d %10.0f %8.2f %8.2f\n", hubsName(r.procs), r.store, r.voters, r.clients, r.ops, r.cmdsPerSec, ms(r.p50), ms(r.p99))
		}
	}
	var cmp []string
	for _, v := range []int{1, 3} {
		for _, cl := range []int{1, 16} {
			w, okw := byKey[key(false, raftnode.LogStoreWAL, v, cl)]
			bo, okb := byKey[key(false, raftnode.LogStoreBolt, v, cl)]
			if okw && okb && bo.cmdsPerSec > 0 {
				cmp = append(cmp, fmt.Sprintf("in-process voters=%d clients=%-2d wal/boltdb throughput %.2fx, p50 %.2f vs %.2f ms, p99 %.2f vs %.2f ms",
					v, cl, w.cmdsPerSec/bo.cmdsPerSec, ms(w.p50), ms(bo.p50), ms(w.p99), ms(bo.p99)))
			}
		}
	}
	if len(cmp) > 0 {
		sb.WriteString(strings.Join(cmp, "\n") + "\n")
	}
	sb.WriteString(etcdTable(byKey))
	return sb.String()
}

// etcdTable is the side-by-side table of etcd's Puts (BenchmarkEtcdPut)
// and the hub's commits (BenchmarkCommit, 3 roost-hub processes, raft-wal) at each
// client count both ran, with the ratios Roost ÷ etcd of throughput, p50
// and p99 (throughput above 1 and latencies below 1 favour Roost), and
// the CPU time the members spent per operation; "" when no client count
// has both.
func etcdTable(byKey map[string]result) string {
	var sb strings.Builder
	for _, cl := range clientCounts(raftnodeWAL, etcdVoters) {
		e, oke := byKey[key(true, storeEtcd, etcdVoters, cl)]
		r, okr := byKey[key(true, raftnodeWAL, etcdVoters, cl)]
		if !oke || !okr || e.cmdsPerSec == 0 || e.p50 == 0 || e.p99 == 0 {
			continue
		}
		if sb.Len() == 0 {
			fmt.Fprintf(&sb, "\nRoost vs etcd: %d members, TLS, loopback, one client connection to the leader, fsync on; "+
				"Roost: Apply of one Cluster (roost-hub processes, raft-wal), etcd: Put of a %d-byte value\n", etcdVoters, etcdValueBytes)
			fmt.Fprintf(&sb, "%7s | %-28s | %-28s | %-31s | %s\n", "clients", "etcd puts/s (p50 / p99 ms)", "Roost commits/s (p50 / p99)",
				"Roost ÷ etcd: ops/s, p50, p99", "members' CPU µs/op: etcd, Roost")
		}
		fmt.Fprintf(&sb, "%7d | %-28s | %-28s | %-31s | %.0f, %.0f\n", cl, cell(e), cell(r),
			fmt.Sprintf("%.2fx, %.2fx, %.2fx", r.cmdsPerSec/e.cmdsPerSec, float64(r.p50)/float64(e.p50), float64(r.p99)/float64(e.p99)),
			float64(e.cpuPerOp)/float64(time.Microsecond), float64(r.cpuPerOp)/float64(time.Microsecond))
	}
	return sb.String()
}

// key identifies a configuration and client count in summary.
func key(procs bool, store string, voters, clients int) string {
	return fmt.Sprintf("%s/%s/%d/%d", hubsName(procs), store, voters, clients)
}

// cell is one side of a row of etcdTable: "N/s (p50 / p99 ms)".
func cell(r result) string {
	return fmt.Sprintf("%.0f (%.1f / %.1f)", r.cmdsPerSec, ms(r.p50), ms(r.p99))
}
