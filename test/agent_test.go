package test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/roostfleet/roost/agent"
	"github.com/roostfleet/roost/agent/config"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/test/harness"
)

// The agent acceptance tests (issue 3): a real roost-agent process and the
// simulator (roost-agent simulate, a separate process) against real
// roost-hub processes on loopback.

func skipShort(t *testing.T, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("process-level test (%s): run `make test-root`", what)
	}
}

// listServers returns the hub's Servers (a linearizable List).
func listServers(t *testing.T, hc roostv1.HubServiceClient) []*roostv1.Server {
	t.Helper()
	out, err := tryListServers(hc)
	if err != nil {
		t.Fatalf("list servers: %v", err)
	}
	return out
}

func tryListServers(hc roostv1.HubServiceClient) ([]*roostv1.Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := hc.List(ctx, &roostv1.ListRequest{Kind: "Server"})
	if err != nil {
		return nil, err
	}
	var out []*roostv1.Server
	for _, o := range resp.GetObjects() {
		if s := o.GetServer(); s != nil {
			out = append(out, s)
		}
	}
	return out, nil
}

// TestAgentEnrollsThisMachine: a real roost-agent process, configured by an
// agent.yaml written with agent/config (as the enrollment image does),
// enrolls against a single roost-hub with a token; the hub then shows a
// Server with this machine's real inventory.
func TestAgentEnrollsThisMachine(t *testing.T) {
	skipShort(t, "real roost-hub and roost-agent")
	if os.Geteuid() != 0 {
		t.Skip("the agent reads SMBIOS and sysfs as root: run `make test-root` as root")
	}
	c := harness.StartCluster(t, 1, harness.ClusterOptions{})
	secret, tokenName := harness.CreateToken(t, c.AdminConfig, "--ttl", "1h", "--uses", "1")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "etc", "agent.yaml")
	ca, _ := os.ReadFile(harness.WriteCA(t, c.AdminConfig))
	cfg := &config.AgentConfig{Hubs: c.APIAddrs(), CABundle: string(ca), Token: secret, StateDir: filepath.Join(dir, "state")}
	if err := cfg.Write(cfgPath); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p := harness.StartProc(t, "roost-agent", harness.AgentBinary(t), "--config", cfgPath, "--manage-host=false")
	if err := p.WaitLog("msg=connected", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	harness.Report(t, "real agent enrolled and connected in %v (token %s)", time.Since(start).Round(time.Millisecond), tokenName)

	hc := c.Client(t)
	var srv *roostv1.Server
	if err := harness.WaitUntil(20*time.Second, func() error {
		servers := listServers(t, hc)
		if len(servers) != 1 || servers[0].GetStatus().GetInventory() == nil {
			return fmt.Errorf("%d servers, want 1 with an inventory", len(servers))
		}
		srv = servers[0]
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	inv := srv.GetStatus().GetInventory()
	harness.Report(t, "server %s state=%s reachability=%s\n%s", srv.GetMetadata().GetName(), srv.GetStatus().GetState(), srv.GetStatus().GetReachability(), agent.FormatInventory(inv))

	if got := int(inv.GetCpu().GetThreads()); got < runtime.NumCPU() {
		t.Errorf("inventory threads %d, runtime.NumCPU %d", got, runtime.NumCPU())
	}
	meminfo, _ := os.ReadFile("/proc/meminfo")
	want := agent.ParseMeminfoTotal(string(meminfo))
	if got := inv.GetMemoryBytes(); got < want*99/100 || got > want*101/100 {
		t.Errorf("inventory memory %d, /proc/meminfo MemTotal %d", got, want)
	}
	if inv.GetArch() != runtime.GOARCH {
		t.Errorf("arch %q, want %q", inv.GetArch(), runtime.GOARCH)
	}
	_, efiErr := os.Stat("/sys/firmware/efi")
	if wantFW := map[bool]string{true: "UEFI", false: "BIOS"}[efiErr == nil]; inv.GetFirmware() != wantFW {
		t.Errorf("firmware %q, want %q", inv.GetFirmware(), wantFW)
	}
	id, _ := agent.SysfsIdentity{PermAddr: agent.DefaultPermAddr}.Identity(context.Background())
	if u := id.GetSystemUuid(); u != "" && srv.GetSpec().GetSystemUuid() != u {
		t.Errorf("server UUID %q, this machine's %q", srv.GetSpec().GetSystemUuid(), u)
	}
	// The key stays private; the token is no longer needed.
	if st, err := os.Stat(filepath.Join(cfg.StateDir, agent.KeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("agent key: %v %v", st, err)
	}
	p.Stop()
	if code := p.ExitCode(); code != 0 {
		t.Errorf("roost-agent exit code %d after SIGTERM, want 0", code)
	}
}

// fakeSysRoot makes a sysfs tree with one physical NIC and the given
// SMBIOS UUID, so that several real roost-agent processes on this machine
// are different Servers.
func fakeSysRoot(t *testing.T, uuid string, mac string) string {
	t.Helper()
	root := t.TempDir()
	for path, content := range map[string]string{
		"class/dmi/id/product_uuid":         uuid + "\n",
		"class/net/eth0/address":            mac + "\n",
		"class/net/eth0/addr_assign_type":   "0\n",
		"class/net/eth0/operstate":          "up\n",
		"devices/pci0000:00/0000:00:03.0/x": "",
	} {
		full := filepath.Join(root, path)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../../../devices/pci0000:00/0000:00:03.0", filepath.Join(root, "class/net/eth0/device")); err != nil {
		t.Fatal(err)
	}
	return root
}

// tokenAgent runs roost-agent number i by hand (flags only) as a distinct
// Server.
type tokenAgent struct {
	t        *testing.T
	uuid     string
	sysRoot  string
	stateDir string
	hubs     string
	caFile   string
}

func newTokenAgent(t *testing.T, i int, hubs []string, caFile string) *tokenAgent {
	uuid := fmt.Sprintf("5a1e0000-0000-4000-8000-%012d", i)
	return &tokenAgent{t: t, uuid: uuid, sysRoot: fakeSysRoot(t, uuid, fmt.Sprintf("52:54:00:aa:00:%02x", i)),
		stateDir: t.TempDir(), hubs: strings.Join(hubs, ","), caFile: caFile}
}

func (a *tokenAgent) start(token string) *harness.Proc {
	args := []string{"--config", "", "--hub", a.hubs, "--ca", a.caFile, "--state-dir", a.stateDir, "--sys-root", a.sysRoot}
	if token != "" {
		args = append(args, "--token", token)
	}
	return harness.StartProc(a.t, "agent-"+a.uuid[len(a.uuid)-4:], harness.AgentBinary(a.t), args...)
}

// refused runs an agent with token and expects the hub to refuse it: exit
// status 2, with a reason containing want.
func (a *tokenAgent) refused(token, want string) string {
	a.t.Helper()
	p := a.start(token)
	if !p.Wait(60 * time.Second) {
		a.t.Fatalf("agent with a bad token (%s) still runs after 60 s", want)
	}
	log := p.Log()
	if p.ExitCode() != 2 || !strings.Contains(strings.ToLower(log), want) {
		a.t.Fatalf("agent with a bad token: exit %d, want 2 and a reason with %q:\n%s", p.ExitCode(), want, log)
	}
	reason := ""
	for _, line := range strings.Split(log, "\n") {
		if i := strings.Index(line, "reason="); i >= 0 && strings.Contains(line, "enrollment refused") {
			reason = line[i+len("reason="):]
			break
		}
	}
	return reason
}

// TestEnrollmentTokenRules: expired, revoked, used-up and wrong tokens are
// refused with a clear reason and leave no Server; revoking a token does
// not disconnect a Server enrolled with it; an enrolled agent restarted
// without a token reconnects with its certificate alone.
func TestEnrollmentTokenRules(t *testing.T) {
	skipShort(t, "real roost-hub and roost-agent processes")
	c := harness.StartCluster(t, 1, harness.ClusterOptions{})
	hc := c.Client(t)
	caFile := harness.WriteCA(t, c.AdminConfig)
	hubs := c.APIAddrs()
	agentN := 0
	next := func() *tokenAgent { agentN++; return newTokenAgent(t, agentN, hubs, caFile) }

	// Wrong: well-formed, never created.
	harness.Report(t, "wrong token:   %s", next().refused("zzzzzz.zzzzzzzzzzzzzzzz", "token"))

	// Expired.
	expired, _ := harness.CreateToken(t, c.AdminConfig, "--ttl", "1s", "--uses", "5")
	time.Sleep(2 * time.Second)
	harness.Report(t, "expired token: %s", next().refused(expired, "expired"))

	// Used up: the first agent enrolls, the second is refused.
	once, _ := harness.CreateToken(t, c.AdminConfig, "--ttl", "1h", "--uses", "1")
	first := next()
	p1 := first.start(once)
	if err := p1.WaitLog("msg=connected", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	harness.Report(t, "used-up token: %s", next().refused(once, "used"))

	// Revoked: an agent enrolled with the token stays connected after the
	// revocation; a new one is refused.
	multi, multiName := harness.CreateToken(t, c.AdminConfig, "--ttl", "1h", "--uses", "5")
	kept := next()
	p2 := kept.start(multi)
	if err := p2.WaitLog("msg=connected", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	harness.RevokeToken(t, c.AdminConfig, multiName)
	harness.Report(t, "revoked token: %s", next().refused(multi, "revoked"))
	time.Sleep(3 * time.Second)
	if strings.Contains(p2.Log(), "msg=disconnected") || !p2.Running() {
		t.Fatalf("revoking the token disconnected an enrolled agent:\n%s", p2.Log())
	}

	// No Server records for the refused agents: exactly the two enrolled.
	var names []string
	for _, s := range listServers(t, hc) {
		names = append(names, s.GetMetadata().GetName())
		if r := s.GetStatus().GetReachability(); r == "Unreachable" {
			t.Errorf("server %s is %s", s.GetMetadata().GetName(), r)
		}
	}
	if len(names) != 2 || !strings.Contains(strings.Join(names, " "), first.uuid) || !strings.Contains(strings.Join(names, " "), kept.uuid) {
		t.Fatalf("servers %v, want exactly %s and %s", names, first.uuid, kept.uuid)
	}

	// Restart without a token: the certificate alone reconnects.
	p2.Stop()
	p3 := kept.start("")
	if err := p3.WaitLog("msg=connected", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(p3.Log(), "msg=enrolled") {
		t.Error("the restarted agent enrolled again instead of using its certificate")
	}
	harness.Report(t, "restarted agent reconnected without a token; servers: %v", names)
	p1.Signal(syscall.SIGTERM)
}

// TestAgentsSurviveLeaderKill: 200 simulated agents connected to a 3-member
// hub; the leader is killed with SIGKILL. All agents are connected again
// within 30 s, and no Server turns Unreachable because of the failover
// (watched for the liveness TTL plus 15 s after the kill). The agents are
// spread over the members (each one's first choice, agent/rebalance.go),
// and once the killed member is back, exactly its agents return to it.
// Then a follower hangs (SIGSTOP): its agents find out by keepalive and
// move before any Server turns Unreachable, and return once it is thawed.
// Last it is stopped with SIGTERM: it tells its agents to move on and
// stops without waiting out its drain.
func TestAgentsSurviveLeaderKill(t *testing.T) {
	skipShort(t, "three roost-hub processes and the agent simulator")
	const n = 200
	c := harness.StartCluster(t, 3, harness.ClusterOptions{Args: harness.SimulatorArgs})
	secret, _ := harness.CreateToken(t, c.AdminConfig, "--ttl", "1h", "--uses", fmt.Sprint(n))
	caFile := harness.WriteCA(t, c.AdminConfig)
	start := time.Now()
	sim := harness.StartProc(t, "simulate", harness.AgentBinary(t), "simulate", "--count", fmt.Sprint(n),
		"--hub", strings.Join(c.APIAddrs(), ","), "--ca", caFile, "--token", secret, "--seed", "3", "--log-level", "warn", "--progress", "100ms",
		"--rebalance-interval", "2s")
	if _, err := sim.WaitCounter("connected", func(v int64) bool { return v == n }, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	harness.Report(t, "%d simulated agents enrolled and connected in %v", n, time.Since(start).Round(time.Millisecond))
	hc := c.Client(t)
	if err := harness.WaitUntil(60*time.Second, func() error {
		reach := 0
		for _, s := range listServers(t, hc) {
			if s.GetStatus().GetReachability() == "Reachable" {
				reach++
			}
		}
		if reach != n {
			return fmt.Errorf("%d of %d servers Reachable", reach, n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Spread: every member is the first choice of about a third.
	shares := func() (map[string]int, error) {
		out := map[string]int{}
		for _, m := range c.Members {
			v, err := m.Metric("roost_agent_streams")
			if err != nil {
				return nil, fmt.Errorf("member %s: %w", m.NodeID, err)
			}
			out[m.NodeID] = int(v)
		}
		return out, nil
	}
	var spread map[string]int
	if err := harness.WaitUntil(30*time.Second, func() (err error) {
		if spread, err = shares(); err != nil {
			return err
		}
		total := 0
		for id, v := range spread {
			if v < n/6 {
				return fmt.Errorf("member %s serves %d of %d agents: %v", id, v, n, spread)
			}
			total += v
		}
		if total != n {
			return fmt.Errorf("%d streams on the members, want %d: %v", total, n, spread)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	harness.Report(t, "agent streams per member: %v", spread)
	// backToSpread waits until the members serve the same agents as
	// before the kill (each agent on its first choice) and returns the
	// streams per member.
	backToSpread := func() map[string]int {
		t.Helper()
		var now map[string]int
		if err := harness.WaitUntil(60*time.Second, func() (err error) {
			if now, err = shares(); err != nil {
				return err
			}
			if !maps.Equal(now, spread) {
				return fmt.Errorf("agent streams per member %v, want %v as before", now, spread)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return now
	}

	leader := c.Leader(t)
	before, _ := sim.Counter("reconnects")
	kill := time.Now()
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	leader.Wait(harness.StopTimeout)
	harness.Report(t, "killed leader %s", leader.NodeID)

	// All connected again: the reconnect count has moved and every agent is
	// connected; the figure is the first progress line (every 100 ms)
	// showing it.
	var back time.Duration
	dip := int64(n)
	deadline := kill.Add(30 * time.Second)
	for {
		conn, _ := sim.Counter("connected")
		rec, _ := sim.Counter("reconnects")
		dip = min(dip, conn)
		if rec > before && conn == n {
			back = time.Since(kill)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the kill: connected=%d reconnects=%d (before %d)", conn, rec, before)
		}
		time.Sleep(20 * time.Millisecond)
	}
	rec, _ := sim.Counter("reconnects")
	harness.Report(t, "all %d agents connected again %v after the kill (%d reconnected; lowest connected count seen %d)", n, back.Round(time.Millisecond), rec-before, dip)

	// No Server becomes Unreachable: watch through the liveness TTL (30 s
	// at this fleet size) and the new leader's grace period.
	var survivors []string
	for _, m := range c.Members {
		if m != leader {
			survivors = append(survivors, m.APIAddr)
		}
	}
	sc := c.Client(t, survivors...)
	watchUntil := kill.Add(45 * time.Second)
	polls, failed := 0, 0
	for time.Now().Before(watchUntil) {
		servers, err := tryListServers(sc)
		if err != nil { // e.g. during the election: reads go to the leader
			failed++
			time.Sleep(time.Second)
			continue
		}
		if len(servers) != n {
			t.Fatalf("%d servers listed, want %d", len(servers), n)
		}
		var bad []string
		for _, s := range servers {
			if s.GetStatus().GetReachability() == "Unreachable" {
				bad = append(bad, s.GetMetadata().GetName())
			}
		}
		if len(bad) > 0 {
			t.Fatalf("%v after the kill, %d servers are Unreachable: %v", time.Since(kill).Round(time.Second), len(bad), bad[:min(5, len(bad))])
		}
		polls++
		time.Sleep(time.Second)
	}
	if polls < 30 {
		t.Fatalf("only %d successful polls after the kill (%d failed)", polls, failed)
	}
	harness.Report(t, "no server Unreachable in %d polls over %v after the kill (%d polls failed during the election)", polls, time.Since(kill).Round(time.Second), failed)
	if now, err := shares(); err == nil {
		harness.Report(t, "agent streams per member with %s down: %v", leader.NodeID, now)
	}

	// The killed member returns: its agents (and only they) move back.
	rebalanced0, _ := sim.Counter("rebalanced")
	restarted := time.Now()
	back = leader.Restart()
	now := backToSpread()
	// The counter is on the simulator's progress line (every 100 ms).
	var moved int64
	if err := harness.WaitUntil(5*time.Second, func() error {
		moved, _ = sim.Counter("rebalanced")
		if moved-rebalanced0 != int64(spread[leader.NodeID]) {
			return fmt.Errorf("%d agents rebalanced, want the %d of %s", moved-rebalanced0, spread[leader.NodeID], leader.NodeID)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	harness.Report(t, "%s back (healthy after %v); %d agents moved back to it within %v: %v", leader.NodeID, back.Round(time.Millisecond), moved-rebalanced0, time.Since(restarted).Round(time.Second), now)

	// A hung member (SIGSTOP: its sockets stay open, nothing answers): its
	// agents find out by keepalive and beat through the others before any
	// Server turns Unreachable; thawed, it gets them back.
	var hung *harness.Member
	for _, m := range c.Members {
		if !m.LeadsByMetrics() && spread[m.NodeID] > 0 {
			hung = m
		}
	}
	if err := hung.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if err := hung.Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	defer thaw()
	before, _ = sim.Counter("reconnects")
	var others []string
	for _, m := range c.Members {
		if m != hung {
			others = append(others, m.APIAddr)
		}
	}
	oc := c.Client(t, others...)
	var moved2 time.Duration
	for time.Since(frozen) < 45*time.Second {
		if moved2 == 0 {
			if rec, _ := sim.Counter("reconnects"); rec-before >= int64(spread[hung.NodeID]) {
				moved2 = time.Since(frozen)
			}
		}
		servers, err := tryListServers(oc)
		if err == nil {
			for _, s := range servers {
				if s.GetStatus().GetReachability() == "Unreachable" {
					t.Fatalf("%v after %s hung, server %s is Unreachable", time.Since(frozen).Round(time.Second), hung.NodeID, s.GetMetadata().GetName())
				}
			}
		}
		time.Sleep(time.Second)
	}
	if moved2 == 0 {
		rec, _ := sim.Counter("reconnects")
		t.Fatalf("45 s after %s hung, only %d of its %d agents reconnected elsewhere", hung.NodeID, rec-before, spread[hung.NodeID])
	}
	harness.Report(t, "%s hung (SIGSTOP): its %d agents reconnected elsewhere within %v; no server Unreachable in 45 s", hung.NodeID, spread[hung.NodeID], moved2.Round(100*time.Millisecond))
	thaw()
	now = backToSpread()
	harness.Report(t, "%s thawed: its agents are back: %v", hung.NodeID, now)

	// SIGTERM: the member tells its agents to move on (HubMessage.go_away)
	// and stops without waiting out its 5 s drain; they come back when it
	// is up again.
	before, _ = sim.Counter("reconnects")
	stopping := time.Now()
	hung.Stop(syscall.SIGTERM)
	stopped := time.Since(stopping)
	if stopped >= 5*time.Second {
		t.Errorf("%s took %v to stop: its agent streams held the drain until the hard stop", hung.NodeID, stopped.Round(time.Millisecond))
	}
	if !strings.Contains(hung.LogTail(40), fmt.Sprintf(`msg="stopping: told agents to move to other members" member=%s agents=%d`, hung.NodeID, spread[hung.NodeID])) {
		t.Errorf("%s did not log telling its %d agents to move:\n%s", hung.NodeID, spread[hung.NodeID], hung.LogTail(40))
	}
	if err := harness.WaitUntil(30*time.Second, func() error {
		conn, _ := sim.Counter("connected")
		rec, _ := sim.Counter("reconnects")
		if conn != n || rec-before < int64(spread[hung.NodeID]) {
			return fmt.Errorf("connected=%d, %d reconnected since the SIGTERM", conn, rec-before)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	harness.Report(t, "%s stopped %v after SIGTERM, its agents connected elsewhere", hung.NodeID, stopped.Round(time.Millisecond))
	hung.Restart()
	harness.Report(t, "%s restarted: its agents are back: %v", hung.NodeID, backToSpread())
	sim.Stop()
}
