package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/roostfleet/roost/client"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Cluster is a set of roost-hub processes forming one hub: Members[0]
// bootstrapped it, the others joined with a join token.
type Cluster struct {
	t           testing.TB
	Members     []*Member
	AdminConfig string // path of the bootstrap member's admin.conf

	mu      sync.Mutex
	clients map[string]roostv1.HubServiceClient
}

// SimulatorArgs lift a member's limits on calls without a certificate
// (roost-hub --unauthenticated-*) to their maximum: the agent simulator
// enrolls thousands of agents from one address at once, which the default
// limits would spread over minutes. Pass them in ClusterOptions.Args.
var SimulatorArgs = []string{
	"--unauthenticated-rate-per-address", "1000000", "--unauthenticated-burst-per-address", "1000000",
	"--unauthenticated-rate", "1000000", "--unauthenticated-burst", "1000000",
}

// ClusterOptions describe a process cluster.
type ClusterOptions struct {
	// LogStore is every member's --raft-log-store; empty keeps the default.
	LogStore string
	// Args are extra flags for every member.
	Args []string
}

// StartCluster starts n roost-hub processes: "hub-1" bootstraps, the
// others join through it with one join token. It returns once every
// member is healthy and every member lists n voters.
func StartCluster(t testing.TB, n int, o ClusterOptions) *Cluster {
	t.Helper()
	first := StartMember(t, MemberOptions{NodeID: "hub-1", LogStore: o.LogStore, Args: o.Args})
	c := &Cluster{t: t, Members: []*Member{first}}
	c.AdminConfig = first.WaitAdminConfig(HealthyTimeout)
	if n == 1 {
		return c
	}
	ctx := Context(t, 2*HealthyTimeout)
	admin := c.Client(t, first.APIAddr)
	tok, err := admin.CreateJoinToken(ctx, &roostv1.CreateJoinTokenRequest{MaxUses: int32(n - 1)})
	if err != nil {
		t.Fatalf("create join token: %v", err)
	}
	for i := 2; i <= n; i++ {
		m := NewMember(t, MemberOptions{NodeID: fmt.Sprintf("hub-%d", i), Join: first.APIAddr, JoinToken: tok.GetToken(), LogStore: o.LogStore, Args: o.Args})
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
		c.Members = append(c.Members, m)
	}
	for _, m := range c.Members {
		if err := m.WaitHealthy(HealthyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range c.Members {
		mc := c.Client(t, m.APIAddr)
		if err := Poll(ctx, func() error {
			resp, err := mc.ListMembers(ctx, &roostv1.ListMembersRequest{})
			if err != nil {
				return err
			}
			if got := len(resp.GetMembers()); got != n {
				return fmt.Errorf("member %s lists %d members, want %d", m.NodeID, got, n)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// APIAddrs returns every member's API address.
func (c *Cluster) APIAddrs() []string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = m.APIAddr
	}
	return out
}

// Member returns the member with a node ID, or nil.
func (c *Cluster) Member(id string) *Member {
	for _, m := range c.Members {
		if m.NodeID == id {
			return m
		}
	}
	return nil
}

// Leader asks the running members (ListMembers) which one leads and
// returns it once every running member names the same leader, within
// HealthyTimeout.
func (c *Cluster) Leader(t testing.TB) *Member {
	t.Helper()
	ctx := Context(t, HealthyTimeout)
	var leader *Member
	err := Poll(ctx, func() error {
		leader = nil
		for _, m := range c.Members {
			if !m.Running() {
				continue
			}
			resp, err := c.Client(t, m.APIAddr).ListMembers(ctx, &roostv1.ListMembersRequest{})
			if err != nil {
				return err
			}
			var named *Member
			for _, lm := range resp.GetMembers() {
				if lm.GetLeader() {
					named = c.Member(lm.GetId())
				}
			}
			if named == nil {
				return fmt.Errorf("member %s knows no leader", m.NodeID)
			}
			if leader != nil && leader != named {
				return fmt.Errorf("members disagree on the leader: %s and %s", leader.NodeID, named.NodeID)
			}
			leader = named
		}
		if leader == nil {
			return errors.New("no running member")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("find leader: %v", err)
	}
	return leader
}

// Client returns a HubService client authenticated with the cluster's
// admin.conf, failing over between addrs (default: all members); one
// connection per address list, closed when the cluster's test ends.
func (c *Cluster) Client(t testing.TB, addrs ...string) roostv1.HubServiceClient {
	t.Helper()
	if len(addrs) == 0 {
		addrs = c.APIAddrs()
	}
	key := strings.Join(addrs, ",")
	c.mu.Lock()
	defer c.mu.Unlock()
	if hc, ok := c.clients[key]; ok {
		return hc
	}
	if c.clients == nil {
		c.clients = map[string]roostv1.HubServiceClient{}
	}
	hc := roostv1.NewHubServiceClient(DialConfig(c.t, c.AdminConfig, addrs))
	c.clients[key] = hc
	return hc
}

// DialConfig loads a client configuration and dials addrs (default: the
// configuration's hubs) with client.Dial; the connection closes when the
// test ends.
func DialConfig(t testing.TB, cfgPath string, addrs []string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cfg, err := client.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := client.Dial(context.Background(), cfg, addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Poll calls f every 50 ms until it returns nil or ctx ends; then it
// returns f's last error.
func Poll(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// CtlResult is what one roostctl run printed and returned.
type CtlResult struct {
	Args           []string
	Stdout, Stderr string
	Code           int
	Duration       time.Duration
}

func (r CtlResult) String() string {
	return fmt.Sprintf("roostctl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.Args, " "), r.Code, r.Stdout, r.Stderr)
}

// CtlTimeout bounds one roostctl run.
const CtlTimeout = 60 * time.Second

// Ctl runs `roostctl --config cfgPath args...` and returns its output and
// exit code; it skips the test when roostctl is missing and fails it when
// roostctl cannot run or outlives CtlTimeout.
func Ctl(t testing.TB, cfgPath string, args ...string) CtlResult {
	t.Helper()
	bin := CtlBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), CtlTimeout)
	defer cancel()
	full := append([]string{"--config", cfgPath}, args...)
	cmd := exec.CommandContext(ctx, bin, full...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = withoutEnv(os.Environ(), client.EnvConfig)
	start := time.Now()
	err := cmd.Run()
	r := CtlResult{Args: full, Stdout: out.String(), Stderr: errb.String(), Duration: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		t.Fatalf("roostctl %s: still running after %s", strings.Join(full, " "), CtlTimeout)
	case errors.As(err, &exit):
		r.Code = exit.ExitCode()
	default:
		t.Fatalf("roostctl %s: %v", strings.Join(full, " "), err)
	}
	return r
}

// MustCtl is Ctl that fails the test unless roostctl exits 0.
func MustCtl(t testing.TB, cfgPath string, args ...string) CtlResult {
	t.Helper()
	r := Ctl(t, cfgPath, args...)
	if r.Code != 0 {
		t.Fatalf("%s", r)
	}
	return r
}

func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
