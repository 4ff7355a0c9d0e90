package bench

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

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
//     once all are connected and settled; and Raft entries per second in
//     steady state from roost_raft_last_log_index over 30 s (goal ≤ 1 per
//     100 agents).
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
	b.Run(fmt.Sprintf("fleet=%d", n), func(b *testing.B) {
		m, ca, token := agentHub(b, n)
		time.Sleep(3 * time.Second)
		rss0, err := harness.RSSBytes(m.PID())
		if err != nil {
			b.Fatal(err)
		}
		heap0, _ := m.Metric("go_memstats_heap_inuse_bytes")
		gor0, _ := m.Metric("go_goroutines")
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
		gor1, _ := m.Metric("go_goroutines")
		connected, _ = sim.Counter("connected")
		perAgent := float64(rss1-rss0) / float64(connected)
		idx0, err := m.Metric("roost_raft_last_log_index")
		if err != nil {
			b.Fatal(err)
		}
		const window = 30 * time.Second
		time.Sleep(window)
		idx1, _ := m.Metric("roost_raft_last_log_index")
		rate := (idx1 - idx0) / window.Seconds()
		sim.Stop()
		b.ReportMetric(perAgent/1024, "hub-KiB-RSS/agent")
		b.ReportMetric((heap1-heap0)/float64(connected)/1024, "hub-KiB-heap/agent")
		b.ReportMetric(rate, "raft-entries/s")
		b.ReportMetric(rate/float64(connected)*100, "raft-entries/s-per-100-agents")
		report(b, "hub RSS %.1f MiB idle → %.1f MiB with %d agents: %.1f KiB per agent (goal ≤ 40 KB); simulator RSS %.1f KiB per agent",
			mib(rss0), mib(rss1), connected, perAgent/1024, float64(simRSS)/float64(connected)/1024)
		report(b, "hub Go heap in use %.1f KiB per agent, %.1f goroutines per agent",
			(heap1-heap0)/float64(connected)/1024, (gor1-gor0)/float64(connected))
		report(b, "raft entries in steady state: %.0f in %v = %.2f/s = %.3f per 100 agents per s (goal ≤ 1)",
			idx1-idx0, window, rate, rate/float64(connected)*100)
	})
}

// agentHub starts a single roost-hub process and returns it, the CA file
// for agents and a token for n enrollments.
func agentHub(b *testing.B, n int) (*harness.Member, string, string) {
	c := harness.StartCluster(b, 1, harness.ClusterOptions{})
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
