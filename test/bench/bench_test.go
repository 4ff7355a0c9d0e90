// Package bench measures the hub's write path: Raft commit throughput and
// latency for 1 and 3 voters on loopback, with one and with 16 concurrent
// clients, for both Raft log stores (raft-wal, the default, and
// raft-boltdb/v2). Run it with `make bench`; a summary table is printed
// after the benchmarks.
package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
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
	store           string
	voters, clients int
	ops             int
	cmdsPerSec      float64
	p50, p99        time.Duration
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
// The cluster runs in this process on 127.0.0.1 with Raft's default timeouts.
func BenchmarkCommit(b *testing.B) {
	for _, store := range []string{raftnode.LogStoreWAL, raftnode.LogStoreBolt} {
		for _, voters := range []int{1, 3} {
			b.Run(fmt.Sprintf("store=%s/voters=%d", store, voters), func(b *testing.B) {
				c := harness.StartInProcess(b, harness.InProcessOptions{Voters: voters, LogStore: store})
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				leader := c.Leader(ctx)
				cancel()
				if leader == nil {
					b.Fatal("no leader")
				}
				hc := c.Dial(b, []string{leader.APIAddr()})
				var runs atomic.Int64
				for _, clients := range []int{1, 16} {
					b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
						r := commitRun(b, hc, clients, runs.Add(1))
						r.store, r.voters = store, voters
						resultsMu.Lock()
						results[b.Name()] = r
						resultsMu.Unlock()
					})
				}
			})
		}
	}
}

// commitRun applies b.N objects with the given number of concurrent clients
// and reports the metrics.
func commitRun(b *testing.B, hc roostv1.HubServiceClient, clients int, run int64) result {
	ctx, cancel := context.WithTimeout(context.Background(), maxRun)
	defer cancel()
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
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
				obj := cluster(fmt.Sprintf("r%d-%d", run, i))
				t0 := time.Now()
				_, err := hc.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{obj}})
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
	if firstErr != nil {
		b.Fatalf("%d of %d applies failed; first: %v", failed.Load(), b.N, firstErr)
	}
	if ctx.Err() != nil {
		b.Fatalf("run of %d applies exceeded %s", b.N, maxRun)
	}
	slices.Sort(lat)
	r := result{
		clients: clients, ops: b.N,
		cmdsPerSec: float64(b.N) / elapsed.Seconds(),
		p50:        lat[percentileIndex(len(lat), 50)],
		p99:        lat[percentileIndex(len(lat), 99)],
	}
	b.ReportMetric(r.cmdsPerSec, "cmds/s")
	b.ReportMetric(ms(r.p50), "p50-ms")
	b.ReportMetric(ms(r.p99), "p99-ms")
	return r
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
	for _, r := range results {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.voters != b.voters {
			return a.voters < b.voters
		}
		if a.clients != b.clients {
			return a.clients < b.clients
		}
		return a.store > b.store // wal first
	})
	var sb strings.Builder
	sb.WriteString("\nRaft commit (gRPC Apply to the leader over TLS on loopback; one ApplyObjects command each)\n")
	fmt.Fprintf(&sb, "%-7s %6s %7s %7s %10s %8s %8s\n", "store", "voters", "clients", "ops", "cmds/s", "p50-ms", "p99-ms")
	byKey := map[string]result{}
	for _, r := range rs {
		fmt.Fprintf(&sb, "%-7s %6d %7d %7d %10.0f %8.2f %8.2f\n", r.store, r.voters, r.clients, r.ops, r.cmdsPerSec, ms(r.p50), ms(r.p99))
		byKey[fmt.Sprintf("%s/%d/%d", r.store, r.voters, r.clients)] = r
	}
	var cmp []string
	for _, v := range []int{1, 3} {
		for _, cl := range []int{1, 16} {
			w, okw := byKey[fmt.Sprintf("%s/%d/%d", raftnode.LogStoreWAL, v, cl)]
			bo, okb := byKey[fmt.Sprintf("%s/%d/%d", raftnode.LogStoreBolt, v, cl)]
			if okw && okb && bo.cmdsPerSec > 0 {
				cmp = append(cmp, fmt.Sprintf("voters=%d clients=%-2d wal/boltdb throughput %.2fx, p50 %.2f vs %.2f ms, p99 %.2f vs %.2f ms",
					v, cl, w.cmdsPerSec/bo.cmdsPerSec, ms(w.p50), ms(bo.p50), ms(w.p99), ms(bo.p99)))
			}
		}
	}
	if len(cmp) > 0 {
		sb.WriteString(strings.Join(cmp, "\n") + "\n")
	}
	return sb.String()
}
