package harness

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// InProcessOptions describe a hub cluster run inside the test binary.
type InProcessOptions struct {
	// Voters is the number of members (1, 3 or 5).
	Voters int
	// LogStore is the Raft log store of every member; empty keeps the default.
	LogStore string
	// FastRaft sets short Raft timeouts (heartbeat and election 200 ms,
	// leader lease 100 ms, as hub's own tests use) so leader changes are
	// quick; false keeps Raft's defaults.
	FastRaft bool
}

// InProcess is a hub cluster of hub.Start members in this process, on
// loopback; Hubs[0] bootstrapped it.
type InProcess struct {
	Hubs        []*hub.Hub
	AdminConfig string
	LogPath     string // the members' structured logs and Raft's

	opts   func(i int) hub.Options // member i's options (without Join)
	killed map[int]bool            // members Kill closed and Restart did not start again
}

// StartInProcess starts o.Voters members and returns once every member has
// a leader, has applied its own member record, and sees every voter.
// Members close when the test ends; on failure the tail of their log is printed.
func StartInProcess(t testing.TB, o InProcessOptions) *InProcess {
	t.Helper()
	if o.Voters < 1 {
		o.Voters = 1
	}
	dir := t.TempDir()
	c := &InProcess{LogPath: filepath.Join(dir, "hubs.log")}
	logf, err := os.Create(c.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	t.Cleanup(func() {
		for i := len(c.Hubs) - 1; i >= 0; i-- {
			if !c.killed[i] {
				c.Hubs[i].Close()
			}
		}
		logf.Close()
		if t.Failed() {
			t.Logf("--- last lines of %s ---\n%s", c.LogPath, tailFile(c.LogPath, 40))
		}
	})
	ctx := Context(t, 2*HealthyTimeout)
	opts := func(i int) hub.Options {
		id := fmt.Sprintf("hub-%d", i+1)
		ho := hub.Options{
			DataDir: filepath.Join(dir, id), APIAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
			NodeID: id, LogStore: o.LogStore, Logger: logger, RaftLogOutput: logf,
		}
		if o.FastRaft {
			ho.HeartbeatTimeout, ho.ElectionTimeout, ho.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
		}
		return ho
	}
	c.opts = opts
	start := func(o hub.Options) (*hub.Hub, error) { return hub.Start(ctx, o) }
	first, err := start(opts(0))
	if err != nil {
		t.Fatalf("start hub-1: %v", err)
	}
	c.Hubs = append(c.Hubs, first)
	if err := first.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if err := Poll(ctx, func() error { return loadable(first.AdminConfigPath()) }); err != nil {
		t.Fatalf("admin.conf: %v", err)
	}
	c.AdminConfig = first.AdminConfigPath()
	if o.Voters == 1 {
		return c
	}
	admin := roostv1.NewHubServiceClient(DialConfig(t, c.AdminConfig, []string{first.APIAddr()}))
	tok, err := admin.CreateJoinToken(ctx, &roostv1.CreateJoinTokenRequest{MaxUses: int32(o.Voters - 1)})
	if err != nil {
		t.Fatalf("create join token: %v", err)
	}
	for i := 1; i < o.Voters; i++ {
		ho := opts(i)
		ho.Join, ho.JoinToken = first.APIAddr(), tok.GetToken()
		h, err := start(ho)
		if err != nil {
			t.Fatalf("start %s: %v", ho.NodeID, err)
		}
		c.Hubs = append(c.Hubs, h)
	}
	for _, h := range c.Hubs {
		if err := h.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
		if err := Poll(ctx, func() error {
			servers, err := h.Node().Servers()
			if err != nil {
				return err
			}
			if len(servers) != o.Voters || len(h.FSM().Members()) != o.Voters {
				return fmt.Errorf("%s sees %d voters and %d member records, want %d", h.ID(), len(servers), len(h.FSM().Members()), o.Voters)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// Kill stops member i as a crash does for its peers: its Raft stops at
// once (no leadership hand-over; entries it was committing may or may not
// commit), then the member closes, releasing its data dir. Restart starts
// it again.
func (c *InProcess) Kill(i int) {
	h := c.Hubs[i]
	_ = h.Node().Shutdown()
	_ = h.Close()
	if c.killed == nil {
		c.killed = map[int]bool{}
	}
	c.killed[i] = true
}

// Restart starts member i, stopped by Kill, again on its data dir and
// addresses; it returns once the member knows a leader (bounded by ctx).
func (c *InProcess) Restart(ctx context.Context, i int) error {
	old := c.Hubs[i]
	o := c.opts(i)
	o.APIAddr, o.RaftAddr = old.APIAddr(), old.Node().Addr()
	h, err := hub.Start(ctx, o)
	if err != nil {
		return fmt.Errorf("restart %s: %w", o.NodeID, err)
	}
	c.Hubs[i] = h
	delete(c.killed, i)
	return h.WaitLeader(ctx)
}

// Leader returns the member that currently leads, waiting for one (bounded
// by ctx); nil when ctx ends first.
func (c *InProcess) Leader(ctx context.Context) *hub.Hub {
	var leader *hub.Hub
	Poll(ctx, func() error {
		for _, h := range c.Hubs {
			if h.Node().IsLeader() {
				leader = h
				return nil
			}
		}
		return fmt.Errorf("no leader")
	})
	return leader
}

// Dial returns a HubService client on the given members' API addresses
// (default: all), authenticated with admin.conf; opts go to client.Dial.
func (c *InProcess) Dial(t testing.TB, addrs []string, opts ...grpc.DialOption) roostv1.HubServiceClient {
	t.Helper()
	if len(addrs) == 0 {
		for _, h := range c.Hubs {
			addrs = append(addrs, h.APIAddr())
		}
	}
	return roostv1.NewHubServiceClient(DialConfig(t, c.AdminConfig, addrs, opts...))
}

func loadable(path string) error {
	_, err := client.LoadConfig(path)
	return err
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
