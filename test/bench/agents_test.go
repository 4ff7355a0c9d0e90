package bench

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/test/harness"
)

// BenchmarkAgents measures the hub with simulated agents (roost-agent
// simulate, a separate process from the roost-hub process):
//
//   - enroll: the time for 1,000 simulated agents to enroll (all started at
//     once, at most 64 Enroll calls in flight), and the hub's CPU time per
//     enrollment;
//   - fleet: hub RSS per connected agent with $ROOST_BENCH_AGENTS agents
//     (default 10,000) on 10 s heartbeats (goal ≤ 40 KB/agent), measured
//     from /proc/PID/status of the hub process before the agents start and
//     once all are connected and settled; the hub heap per agent as the
//     process holds it and, after a forced collection, as live heap, heap
//     in partly used spans and goroutine stacks; the same once the agents
//     are gone, which splits the enrolled Servers' state from what the
//     connections cost; Raft entries per second in steady state from
//     roost_raft_last_log_index over 30 s (goal ≤ 1 per 100 agents) and the
//     hub's CPU in that window;
//   - grpc-floor (run before fleet): the same number of agent connections
//     to a bare gRPC server in its own process (grpcFloor), so the fleet
//     part can say how much of the hub's memory per agent is gRPC and TLS
//     and how much is Roost.
//
// The hub runs with $ROOST_HUB_PPROF=1 so the benchmark can force a
// collection (/debug/pprof/heap?gc=1); profile it while it runs with
// `go tool pprof http://HTTP_ADDR/debug/pprof/heap`, or set
// $ROOST_BENCH_PROFILES=DIR to have the fleet part save the hub's heap and
// goroutine profiles (DIR/heap.pb.gz, DIR/goroutine.txt) once every agent
// is connected.
//
// Each part runs once on a fresh single-member hub, whatever b.N is.
func BenchmarkAgents(b *testing.B) {
	if testing.Short() {
		b.Skip("process-level benchmark: run `make bench`")
	}
	b.Run("enroll=1000", func(b *testing.B) {
		const n = 1000
		m, ca, token := agentHub(b, n)
		cpu0 := cpuSeconds(b, m.PID())
		sim := harness.StartProc(b, "simulate", harness.AgentBinary(b), "simulate", "--count", fmt.Sprint(n),
			"--hub", m.APIAddr, "--ca", ca, "--token", token, "--seed", "11", "--log-level", "warn")
		secs := waitMilestone(b, sim, "enrolled", n, 5*time.Minute)
		cpu := cpuSeconds(b, m.PID()) - cpu0
		sim.Stop()
		b.ReportMetric(secs, "s/1000-enrollments")
		b.ReportMetric(float64(n)/secs, "enrollments/s")
		b.ReportMetric(cpu/n*1000, "hub-cpu-ms/enrollment")
		report(b, "%d simulated agents enrolled in %.2f s (%.0f/s); hub CPU %.2f ms per enrollment", n, secs, float64(n)/secs, cpu/n*1000)
	})
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("ROOST_BENCH_AGENTS")); err == nil && v > 0 {
		n = v
	}
	var floor *floorResult
	b.Run(fmt.Sprintf("grpc-floor=%d", n), func(b *testing.B) {
		r := grpcFloor(b, n)
		floor = &r
		b.ReportMetric(r.rss, "KiB-RSS/conn")
		b.ReportMetric(r.live, "KiB-live-heap/conn")
		b.ReportMetric(r.stack, "KiB-stack/conn")
		report(b, "a bare gRPC server (AgentService.Connect reading and dropping messages; the hub's transport options, TLS and GOGC) with %d agent connections: RSS %.1f KiB per connection; heap in use %.1f KiB, live heap %.1f KiB, goroutine stacks %.1f KiB, %.1f goroutines per connection",
			n, r.rss, r.heap, r.live, r.stack, r.goroutines)
	})
	b.Run(fmt.Sprintf("fleet=%d", n), func(b *testing.B) {
		// /debug/pprof/heap?gc=1 lets the benchmark force a collection in
		// the hub, so live heap and stacks are measured, not garbage.
		b.Setenv(hub.EnvPprof, "1")
		m, ca, token := agentHub(b, n)
		time.Sleep(3 * time.Second)
		rss0, err := harness.RSSBytes(m.PID())
		if err != nil {
			b.Fatal(err)
		}
		heap0, _ := m.Metric("go_memstats_heap_inuse_bytes")
		idle := hubMem(b, m)
		start := time.Now()
		sim := harness.StartProc(b, "simulate", harness.AgentBinary(b), "simulate", "--count", fmt.Sprint(n),
			"--hub", m.APIAddr, "--ca", ca, "--token", token, "--seed", "12", "--heartbeat", "10s", "--log-level", "warn")
		connected, err := sim.WaitCounter("connected", func(v int64) bool { return v == int64(n) }, 12*time.Minute)
		if err != nil {
			if connected == 0 {
				b.Fatal(err)
			}
			report(b, "NOTE: only %d of %d agents connected in time (%v); figures are per connected agent", connected, n, err)
		}
		report(b, "%d agents connected after %.1f s", connected, time.Since(start).Seconds())
		time.Sleep(20 * time.Second) // settle: statuses applied, heartbeats in their rhythm
		rss1, err := harness.RSSBytes(m.PID())
		if err != nil {
			b.Fatal(err)
		}
		simRSS, _ := harness.RSSBytes(sim.PID())
		heap1, _ := m.Metric("go_memstats_heap_inuse_bytes")
		connected, _ = sim.Counter("connected")
		full := hubMem(b, m) // after a forced collection
		saveProfiles(b, m)
		per := func(a, b float64) float64 { return (a - b) / float64(connected) / 1024 }
		perAgent := float64(rss1-rss0) / float64(connected)
		idx0, err := m.Metric("roost_raft_last_log_index")
		if err != nil {
			b.Fatal(err)
		}
		cpu0 := cpuSeconds(b, m.PID())
		const window = 30 * time.Second
		time.Sleep(window)
		idx1, _ := m.Metric("roost_raft_last_log_index")
		cpu := (cpuSeconds(b, m.PID()) - cpu0) / window.Seconds()
		rate := (idx1 - idx0) / window.Seconds()
		sim.Stop()
		// What stays once every agent is gone is the enrolled Servers'
		// state (FSM, Raft log); the rest was the connections.
		deadline := time.Now().Add(30 * time.Second)
		for v, err := m.Metric("roost_agent_streams"); (err != nil || v > 0) && time.Now().Before(deadline); v, err = m.Metric("roost_agent_streams") {
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(2 * time.Second)
		gone := hubMem(b, m)
		b.ReportMetric(perAgent/1024, "hub-KiB-RSS/agent")
		b.ReportMetric((heap1-heap0)/float64(connected)/1024, "hub-KiB-heap/agent")
		b.ReportMetric(per(full.live, idle.live), "hub-KiB-live-heap/agent")
		b.ReportMetric(per(full.stack, idle.stack), "hub-KiB-stack/agent")
		b.ReportMetric(rate, "raft-entries/s")
		b.ReportMetric(rate/float64(connected)*100, "raft-entries/s-per-100-agents")
		report(b, "hub RSS %.1f MiB idle → %.1f MiB with %d agents: hub RSS per agent %.1f KiB (goal ≤ 40 KB = 39.1 KiB); simulator RSS %.1f KiB per agent",
			mib(rss0), mib(rss1), connected, perAgent/1024, float64(simRSS)/float64(connected)/1024)
		report(b, "hub heap per agent: %.1f KiB in use (live and not yet collected); after a forced GC %.1f KiB live, %.1f KiB in partly used spans; goroutine stacks %.1f KiB per agent, %.1f goroutines per agent (GOGC %.0f, GOMEMLIMIT %s)",
			(heap1-heap0)/float64(connected)/1024, per(full.live, idle.live), per(full.spans, idle.spans), per(full.stack, idle.stack),
			(full.goroutines-idle.goroutines)/float64(connected), full.gogc, memLimit(full.memLimit))
		report(b, "after the agents disconnected: live heap %.1f KiB per enrolled Server stays (Server records, Raft log, watch history); so the connections held %.1f KiB live heap + %.1f KiB stacks per agent",
			per(gone.live, idle.live), per(full.live, gone.live), per(full.stack, gone.stack))
		if floor != nil {
			report(b, "of the hub's %.1f KiB RSS per agent, a bare gRPC server with TLS takes %.1f KiB per connection (grpc-floor); Roost adds %.1f KiB (live heap %.1f, stacks %.1f)",
				perAgent/1024, floor.rss, perAgent/1024-floor.rss, per(full.live, idle.live)-floor.live, per(full.stack, idle.stack)-floor.stack)
		}
		report(b, "raft entries in steady state: %.0f in %v = %.2f/s = %.3f per 100 agents per s (goal ≤ 1); hub CPU %.1f%% of one core",
			idx1-idx0, window, rate, rate/float64(connected)*100, cpu*100)
		b.ReportMetric(cpu*100, "hub-cpu-%")
	})
}

// memSample is the hub's memory right after a forced garbage collection.
type memSample struct {
	live, spans, stack, goroutines, gogc, memLimit float64
}

// hubMem forces a collection in the hub (GET /debug/pprof/heap?gc=1, served
// with $ROOST_HUB_PPROF=1) and reads its Go memory metrics: the heap
// allocated right after a collection is the live heap; the heap in use then
// adds the free slots of partly used spans (fragmentation).
func hubMem(b *testing.B, m *harness.Member) memSample {
	b.Helper()
	hc := &http.Client{Timeout: 2 * time.Minute}
	resp, err := hc.Get("http://" + m.HTTPAddr + "/debug/pprof/heap?gc=1")
	if err != nil {
		b.Fatalf("force a GC in the hub: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("force a GC in the hub: %s (is $%s honoured?)", resp.Status, hub.EnvPprof)
	}
	var s memSample
	for name, p := range map[string]*float64{"go_memstats_heap_alloc_bytes": &s.live, "go_memstats_heap_inuse_bytes": &s.spans, "go_memstats_stack_inuse_bytes": &s.stack,
		"go_goroutines": &s.goroutines, "go_gc_gogc_percent": &s.gogc, "go_gc_gomemlimit_bytes": &s.memLimit} {
		v, err := m.Metric(name)
		if err != nil {
			b.Fatal(err)
		}
		*p = v
	}
	return s
}

// saveProfiles saves the hub's heap profile and goroutine dump into
// $ROOST_BENCH_PROFILES, when it is set.
func saveProfiles(b *testing.B, m *harness.Member) {
	b.Helper()
	dir := os.Getenv("ROOST_BENCH_PROFILES")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{Timeout: 2 * time.Minute}
	for file, path := range map[string]string{"heap.pb.gz": "heap", "goroutine.txt": "goroutine?debug=1"} {
		resp, err := hc.Get("http://" + m.HTTPAddr + "/debug/pprof/" + path)
		if err != nil {
			b.Fatalf("profile %s: %v", path, err)
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("profile %s: %s %v", path, resp.Status, err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	report(b, "hub profiles saved in %s", dir)
}

func memLimit(v float64) string {
	if v >= math.MaxInt64/2 {
		return "off"
	}
	return fmt.Sprintf("%.0f MiB", mib(int64(v)))
}

// agentHub starts a single roost-hub process and returns it, the CA file
// for agents and a token for n enrollments.
func agentHub(b *testing.B, n int) (*harness.Member, string, string) {
	c := harness.StartCluster(b, 1, harness.ClusterOptions{Args: harness.SimulatorArgs})
	token, _ := harness.CreateToken(b, c.AdminConfig, "--ttl", "1h", "--uses", fmt.Sprint(n))
	return c.Members[0], harness.WriteCA(b, c.AdminConfig), token
}

var milestoneRE = regexp.MustCompile(`^simulate: all (\d+) (\w+) after ([0-9.]+)s$`)

// waitMilestone waits for the simulator's "all N what after S s" line and
// returns S.
func waitMilestone(b *testing.B, sim *harness.Proc, what string, n int, timeout time.Duration) float64 {
	deadline := time.Now().Add(timeout)
	for {
		for _, line := range sim.Lines() {
			if m := milestoneRE.FindStringSubmatch(line); m != nil && m[2] == what && m[1] == fmt.Sprint(n) {
				s, _ := strconv.ParseFloat(m[3], 64)
				return s
			}
		}
		if !sim.Running() || time.Now().After(deadline) {
			v, _ := sim.Counter(what)
			b.Fatalf("simulator: %s=%d of %d (running=%v)", what, v, n, sim.Running())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cpuSeconds returns a process's user+system CPU time from /proc/PID/stat.
func cpuSeconds(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func report(b *testing.B, format string, args ...any) {
	b.Helper()
	b.Logf(format, args...)
	fmt.Printf("%s: %s\n", b.Name(), fmt.Sprintf(format, args...))
}
