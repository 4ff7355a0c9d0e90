package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"google.golang.org/protobuf/proto"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/roostfleet/roost/agent"
	"github.com/roostfleet/roost/agent/internal/fakehub"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type runner struct {
	a    *agent.Agent
	log  *syncBuf
	stop context.CancelFunc
	done chan error
}

func startAgent(t *testing.T, o agent.Options) *runner {
	t.Helper()
	r := &runner{log: &syncBuf{}, done: make(chan error, 1)}
	o.Logger = slog.New(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if o.BackoffBase == 0 {
		o.BackoffBase, o.BackoffMax = 20*time.Millisecond, 200*time.Millisecond
	}
	a, err := agent.New(o)
	if err != nil {
		t.Fatal(err)
	}
	r.a = a
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { r.done <- a.Run(ctx) }()
	t.Cleanup(func() {
		r.halt(t)
		if t.Failed() {
			t.Logf("agent log:\n%s", r.log)
		}
	})
	return r
}

func (r *runner) halt(t *testing.T) error {
	r.stop()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("agent did not stop within 10 s")
		return nil
	}
}

func simServer(i int) (agent.FakeIdentity, *agent.FakeInventory) { return agent.SimulatedServer(7, i) }

func TestEnrollConnectResume(t *testing.T) {
	ca := fakehub.NewCA(t)
	hub := fakehub.Start(t, ca)
	hub.Hubs = []string{hub.Addr}
	dir := t.TempDir()
	store := agent.FileStore{Dir: filepath.Join(dir, "state")}
	id, inv := simServer(1)
	o := agent.Options{Hubs: []string{hub.Addr}, CA: ca.CertPEM, Token: hub.Token, Version: "v-test",
		Store: store, Identity: id, Inventory: inv}
	r := startAgent(t, o)

	fakehub.Eventually(t, "hello", func() bool { h, _, _, _, _, _ := hub.Snapshot(); return len(h) == 1 })
	hellos, peers, _, _, _, enrolls := hub.Snapshot()
	if enrolls != 1 || hellos[0].GetServerName() != id.UUID || peers[0] != id.UUID || hellos[0].GetAgentVersion() != "v-test" {
		t.Fatalf("enrolls=%d hello=%v peer=%s", enrolls, hellos[0], peers[0])
	}
	// The enrollment request carried the identity and inventory.
	hub.Mu.Lock()
	req := hub.Enrolls[0]
	hub.Mu.Unlock()
	if req.GetIdentity().GetSystemUuid() != id.UUID || len(req.GetIdentity().GetPermanentMacs()) != 2 || req.GetInventory().GetCpu().GetCores() != 16 {
		t.Errorf("enroll request: %v", req)
	}
	// Status follows the hello; heartbeats follow at the interval the hub
	// asked for (1 s).
	fakehub.Eventually(t, "status and two heartbeats", func() bool { _, _, s, b, _, _ := hub.Snapshot(); return len(s) >= 1 && b >= 2 })

	// State on disk: key 0600, certificate, CA, state with the name and hubs.
	st, err := os.Stat(filepath.Join(store.Dir, agent.KeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	key1, _ := os.ReadFile(filepath.Join(store.Dir, agent.KeyFile))
	state, _ := store.State()
	if state.ServerName != id.UUID || len(state.Hubs) != 1 {
		t.Errorf("state: %+v", state)
	}

	// Desired state: the generation is recorded and reported.
	hub.Send(&roostv1.HubMessage{Message: &roostv1.HubMessage_Desired{Desired: &roostv1.DesiredState{Generation: 5, Revision: 2}}})
	fakehub.Eventually(t, "generation 5 recorded", func() bool { s, _ := store.State(); return s.LastAppliedGeneration == 5 })
	fakehub.Eventually(t, "status with generation 5", func() bool {
		_, _, s, _, _, _ := hub.Snapshot()
		return s[len(s)-1].GetAppliedGeneration() == 5
	})
	if !strings.Contains(r.log.String(), "desired state received") {
		t.Error("the desired state is not logged")
	}
	// The hub's member list: kept in the state dir for the next reconnect.
	joined := []string{hub.Addr, "127.0.0.1:1"} // a member that is down
	hub.Send(&roostv1.HubMessage{Message: &roostv1.HubMessage_Members{Members: &roostv1.HubMembers{ApiAddresses: joined}}})
	fakehub.Eventually(t, "hub members recorded", func() bool { s, _ := store.State(); return slices.Equal(s.Hubs, joined) })
	hub.Send(&roostv1.HubMessage{Message: &roostv1.HubMessage_Members{Members: &roostv1.HubMembers{ApiAddresses: []string{"not an address"}}}})
	fakehub.Eventually(t, "an invalid list ignored", func() bool { return strings.Contains(r.log.String(), "ignoring the hub's member list") })
	if s, _ := store.State(); !slices.Equal(s.Hubs, joined) {
		t.Errorf("hubs after an invalid list: %v", s.Hubs)
	}
	if err := r.halt(t); err != nil {
		t.Fatal(err)
	}

	// Restart without a token: the certificate alone reconnects, and the
	// hello resumes from generation 5; the key is the same.
	o.Token = ""
	startAgent(t, o)
	fakehub.Eventually(t, "second hello", func() bool { h, _, _, _, _, _ := hub.Snapshot(); return len(h) == 2 })
	hellos, peers, _, _, _, enrolls = hub.Snapshot()
	if enrolls != 1 || hellos[1].GetLastAppliedGeneration() != 5 || peers[1] != id.UUID {
		t.Errorf("after restart: enrolls=%d hello=%v peer=%s", enrolls, hellos[1], peers[1])
	}
	key2, _ := os.ReadFile(filepath.Join(store.Dir, agent.KeyFile))
	if !bytes.Equal(key1, key2) {
		t.Error("the key changed across restarts")
	}
}

func TestEnrollRefused(t *testing.T) {
	ca := fakehub.NewCA(t)
	hub := fakehub.Start(t, ca)
	hub.Refuse = status.Error(codes.PermissionDenied, "enrollment token abcdef has expired")
	id, inv := simServer(2)
	store := &agent.MemStore{}
	r := startAgent(t, agent.Options{Hubs: []string{hub.Addr}, CA: ca.CertPEM, Token: hub.Token, Store: store, Identity: id, Inventory: inv})
	select {
	case err := <-r.done:
		r.done <- err
		var refused *agent.RefusedError
		if !errors.As(err, &refused) || refused.Code != codes.PermissionDenied || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a refused agent kept running")
	}
	if c, _, _ := store.Certificate(); c != nil {
		t.Error("a refused agent stored a certificate")
	}
	if !strings.Contains(r.log.String(), `reason="enrollment token abcdef has expired"`) {
		t.Errorf("log lacks the reason:\n%s", r.log)
	}
}

// A hub member that limits enrollments (ResourceExhausted with a
// RetryInfo of 500 ms) is retried no sooner than it asked, however short
// the agent's own backoff, and the agent keeps trying.
func TestEnrollWaitsForRetryInfo(t *testing.T) {
	ca := fakehub.NewCA(t)
	hub := fakehub.Start(t, ca)
	st, err := status.New(codes.ResourceExhausted, "too many calls without a client certificate; retry in 500ms").
		WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	hub.Refuse = st.Err()
	id, inv := simServer(2)
	r := startAgent(t, agent.Options{Hubs: []string{hub.Addr}, CA: ca.CertPEM, Token: hub.Token, Store: &agent.MemStore{}, Identity: id, Inventory: inv})
	time.Sleep(1800 * time.Millisecond)
	hub.Mu.Lock()
	n := len(hub.Enrolls)
	hub.Mu.Unlock()
	// 20-200 ms of backoff alone would make about 15 attempts.
	if n < 2 || n > 4 {
		t.Errorf("%d enrollment attempts in 1.8 s, want 2 to 4 (one per 500-600 ms)", n)
	}
	select {
	case err := <-r.done:
		r.done <- err
		t.Fatalf("the agent stopped: %v", err)
	default:
	}
	if !strings.Contains(r.log.String(), "the hub member limits calls now; retrying later") {
		t.Errorf("log lacks the retry line:\n%s", r.log)
	}
}

func TestNotEnrolledWithoutToken(t *testing.T) {
	ca := fakehub.NewCA(t)
	id, inv := simServer(3)
	a, err := agent.New(agent.Options{Hubs: []string{"127.0.0.1:1"}, CA: ca.CertPEM, Store: &agent.MemStore{}, Identity: id, Inventory: inv})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "no enrollment token") {
		t.Fatalf("Run: %v", err)
	}
	if _, err := agent.New(agent.Options{Token: "short", Store: &agent.MemStore{}, Identity: id, Inventory: inv}); err == nil {
		t.Error("malformed token accepted")
	}
}

// TestFailover: one member answers Unavailable, another is dead; the agent
// ends on the live one, and when that one goes away it comes back to a
// member that works again.
func TestFailover(t *testing.T) {
	ca := fakehub.NewCA(t)
	a, b := fakehub.Start(t, ca), fakehub.Start(t, ca)
	a.Unavailable = true
	dead := "127.0.0.1:1"
	a.Hubs = []string{a.Addr, b.Addr, dead}
	b.Hubs = a.Hubs
	id, inv := simServer(4)
	// Enroll through b only (a is "not the leader" for streams but enrolls).
	startAgent(t, agent.Options{Hubs: []string{a.Addr, b.Addr, dead}, CA: ca.CertPEM, Token: a.Token, Store: &agent.MemStore{}, Identity: id, Inventory: inv})
	fakehub.Eventually(t, "stream on b", func() bool { h, _, _, _, _, _ := b.Snapshot(); return len(h) == 1 })
	if h, _, _, _, _, _ := a.Snapshot(); len(h) != 0 {
		t.Fatal("a stream was accepted by the unavailable member")
	}
	// b dies; a becomes available: the agent moves to a.
	a.Mu.Lock()
	a.Unavailable = false
	a.Mu.Unlock()
	start := time.Now()
	b.Srv.Stop()
	fakehub.Eventually(t, "stream on a", func() bool { h, _, _, _, _, _ := a.Snapshot(); return len(h) == 1 })
	t.Logf("reconnected to another member in %v", time.Since(start).Round(time.Millisecond))
}

func TestCertificateRenewal(t *testing.T) {
	ca := fakehub.NewCA(t)
	hub := fakehub.Start(t, ca)
	hub.Life = 3 * time.Second // renewed after 2 s
	id, inv := simServer(5)
	store := &agent.MemStore{}
	enrolled := &certAtEnrollment{store: store}
	startAgent(t, agent.Options{Hubs: []string{hub.Addr}, CA: ca.CertPEM, Token: hub.Token, Store: store, Identity: id, Inventory: inv, Observer: enrolled})
	fakehub.Eventually(t, "hello", func() bool { h, _, _, _, _, _ := hub.Snapshot(); return len(h) == 1 })
	c1 := enrolled.get()
	key1, _ := store.Key()
	fakehub.Eventually(t, "renewal", func() bool { _, _, _, _, r, _ := hub.Snapshot(); return r >= 1 })
	// The hub counts the request before the agent stores the answer.
	var c2 []byte
	fakehub.Eventually(t, "renewed certificate stored", func() bool { c2, _, _ = store.Certificate(); return !bytes.Equal(c1, c2) })
	key2, _ := store.Key()
	if bytes.Equal(c1, c2) || !bytes.Equal(key1, key2) {
		t.Errorf("after renewal: certificate changed=%v, key same=%v", !bytes.Equal(c1, c2), bytes.Equal(key1, key2))
	}
	cert1, _ := agent.ParseCertificate(c1)
	if got, want := agent.RenewAt(cert1), cert1.NotBefore.Add(cert1.NotAfter.Sub(cert1.NotBefore)*2/3); !got.Equal(want) {
		t.Errorf("RenewAt %v, want %v", got, want)
	}
	// The stream stayed up through the renewal (one hello).
	if h, _, _, _, _, _ := hub.Snapshot(); len(h) != 1 {
		t.Errorf("%d hellos: the renewal dropped the stream", len(h))
	}
}

// TestBackoffAcrossMembers runs the agent against three dead members on a
// fake clock: it tries them in turn, waiting a full-jitter delay under the
// exponential bound before each new attempt.
func TestBackoffAcrossMembers(t *testing.T) {
	ca := fakehub.NewCA(t)
	clock := agent.NewFakeClock(time.Unix(1_700_000_000, 0))
	dead := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	id, inv := simServer(6)
	r := startAgent(t, agent.Options{Hubs: dead, CA: ca.CertPEM, Token: "abcdef.0123456789abcdef", Store: &agent.MemStore{},
		Identity: id, Inventory: inv, Clock: clock, BackoffBase: 200 * time.Millisecond, BackoffMax: 15 * time.Second})
	re := regexp.MustCompile(`msg="hub unreachable, retrying" hub=(\S+) .* next=\S+ after=(\S+) attempt=(\d+)`)
	bound := 200 * time.Millisecond
	tried := map[string]int{}
	for i := 1; i <= 9; i++ {
		fakehub.Eventually(t, fmt.Sprintf("retry %d waiting on the clock", i), func() bool {
			return clock.Pending() == 1 && len(re.FindAllStringSubmatch(r.log.String(), -1)) == i
		})
		m := re.FindAllStringSubmatch(r.log.String(), -1)[i-1]
		after, err := time.ParseDuration(m[2])
		if err != nil || after < 0 || after > bound || m[3] != fmt.Sprint(i) {
			t.Fatalf("retry %d: after=%s attempt=%s, want ≤ %v", i, m[2], m[3], bound)
		}
		tried[m[1]]++
		clock.Advance(bound)
		bound = min(2*bound, 15*time.Second)
	}
	for _, h := range dead {
		if tried[h] != 3 {
			t.Errorf("member %s tried %d times of 9, want 3 (round robin): %v", h, tried[h], tried)
		}
	}
}

// certAtEnrollment keeps the certificate the store held when the agent
// said it enrolled.
type certAtEnrollment struct {
	store *agent.MemStore
	mu    sync.Mutex
	cert  []byte
}

func (c *certAtEnrollment) Enrolled(string) {
	cert, _, _ := c.store.Certificate()
	c.mu.Lock()
	c.cert = cert
	c.mu.Unlock()
}
func (c *certAtEnrollment) Connected(string)             {}
func (c *certAtEnrollment) Disconnected(string, error)   {}
func (c *certAtEnrollment) SessionRefused(string, error) {}
func (c *certAtEnrollment) get() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert
}

// TestExpiredCertificateReenrolls: a Server whose certificate expired while
// it was off enrolls again with its token (same key, same name).
func TestExpiredCertificateReenrolls(t *testing.T) {
	ca := fakehub.NewCA(t)
	hub := fakehub.Start(t, ca)
	id, inv := simServer(8)
	store := &agent.MemStore{}
	keyPEM, _ := agent.NewKey()
	store.SaveKey(keyPEM)
	key, _ := agent.ParseKey(keyPEM)
	store.SaveCertificate(ca.Sign(t, key.Public(), id.UUID, agent.RoleAgent, -time.Hour, false), ca.CertPEM)
	store.SaveState(agent.State{ServerName: id.UUID, LastAppliedGeneration: 3})
	startAgent(t, agent.Options{Hubs: []string{hub.Addr}, CA: ca.CertPEM, Token: hub.Token, Store: store, Identity: id, Inventory: inv})
	fakehub.Eventually(t, "hello after re-enrollment", func() bool { h, _, _, _, _, _ := hub.Snapshot(); return len(h) == 1 })
	hellos, peers, _, _, renewals, enrolls := hub.Snapshot()
	if enrolls != 1 || renewals != 0 || peers[0] != id.UUID || hellos[0].GetLastAppliedGeneration() != 3 {
		t.Errorf("enrolls=%d renewals=%d peer=%s hello=%v", enrolls, renewals, peers[0], hellos[0])
	}
	if k, _ := store.Key(); !bytes.Equal(k, keyPEM) {
		t.Error("re-enrollment changed the key")
	}
}

// TestInventoryChangeSent: a changed inventory is sent as a new status; an
// unchanged one is not.
func TestInventoryChangeSent(t *testing.T) {
	ca := fakehub.NewCA(t)
	hub := fakehub.Start(t, ca)
	id, inv := simServer(9)
	var mu sync.Mutex
	src := &lockedInventory{mu: &mu, f: inv}
	startAgent(t, agent.Options{Hubs: []string{hub.Addr}, CA: ca.CertPEM, Token: hub.Token, Store: &agent.MemStore{},
		Identity: id, Inventory: src, InventoryInterval: 100 * time.Millisecond})
	fakehub.Eventually(t, "first status", func() bool { _, _, s, _, _, _ := hub.Snapshot(); return len(s) == 1 })
	time.Sleep(400 * time.Millisecond) // several unchanged gatherings
	if _, _, s, _, _, _ := hub.Snapshot(); len(s) != 1 {
		t.Fatalf("%d statuses for an unchanged inventory, want 1", len(s))
	}
	mu.Lock()
	inv.Inv.MemoryBytes = 128 << 30
	mu.Unlock()
	fakehub.Eventually(t, "status with the new memory", func() bool {
		_, _, s, _, _, _ := hub.Snapshot()
		return len(s) == 2 && s[1].GetInventory().GetMemoryBytes() == 128<<30
	})
}

type lockedInventory struct {
	mu *sync.Mutex
	f  *agent.FakeInventory
}

func (l *lockedInventory) Inventory(ctx context.Context) (*roostv1.Inventory, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Inventory(ctx)
}

// A decommissioned Server's agent logged only the hub's "enroll it again
// with a token"; restarting it with --token did nothing, as the agent
// enrolls only without a stored certificate. The log now says what to do.
func TestRefusedCertificateSaysHowToEnrollAgain(t *testing.T) {
	ca := fakehub.NewCA(t)
	hub := fakehub.Start(t, ca)
	hub.Mu.Lock()
	hub.RefuseConnect = status.Error(codes.PermissionDenied, "server x is decommissioned; enroll it again with a token to bring it back")
	hub.Mu.Unlock()
	store := agent.FileStore{Dir: filepath.Join(t.TempDir(), "state")}
	id, inv := simServer(4)
	r := startAgent(t, agent.Options{Hubs: []string{hub.Addr}, CA: ca.CertPEM, Token: hub.Token, Store: store, Identity: id, Inventory: inv})
	want := "delete " + agent.CertFile + " in " + store.Dir + " and start it with a valid token"
	fakehub.Eventually(t, "the refusal is logged with the fix", func() bool { return strings.Contains(r.log.String(), want) })
	if _, _, _, _, _, enrolls := hub.Snapshot(); enrolls != 1 {
		t.Errorf("enrolls = %d: the agent must not enroll again by itself", enrolls)
	}
}

// Two agents started on one state dir (one by hand next to the service)
// each generated a key and enrolled; the certificate left on disk did not
// fit the key left on disk, and the Server needed a new token. The second
// agent now stops at once.
func TestSecondAgentOnAStateDirIsRefused(t *testing.T) {
	ca := fakehub.NewCA(t)
	hub := fakehub.Start(t, ca)
	store := agent.FileStore{Dir: filepath.Join(t.TempDir(), "state")}
	id, inv := simServer(5)
	o := agent.Options{Hubs: []string{hub.Addr}, CA: ca.CertPEM, Token: hub.Token, Store: store, Identity: id, Inventory: inv}
	startAgent(t, o)
	fakehub.Eventually(t, "hello", func() bool { h, _, _, _, _, _ := hub.Snapshot(); return len(h) == 1 })
	second := startAgent(t, o)
	select {
	case err := <-second.done:
		second.done <- err
		if err == nil || !strings.Contains(err.Error(), "in use by another roost-agent") {
			t.Fatalf("second agent: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second agent kept running")
	}
	if _, _, _, _, _, enrolls := hub.Snapshot(); enrolls != 1 {
		t.Errorf("enrolls = %d, want 1", enrolls)
	}
}

// An agent whose Server the hub lost (a restored older snapshot, a delete)
// records it again with its certificate instead of retrying forever: no new
// token, no new enrollment.
func TestAgentReregistersALostServer(t *testing.T) {
	ca := fakehub.NewCA(t)
	hub := fakehub.Start(t, ca)
	hub.Mu.Lock()
	hub.Lost = true
	hub.Mu.Unlock()
	store := agent.FileStore{Dir: filepath.Join(t.TempDir(), "state")}
	id, inv := simServer(6)
	r := startAgent(t, agent.Options{Hubs: []string{hub.Addr}, CA: ca.CertPEM, Token: hub.Token, Store: store, Identity: id, Inventory: inv})
	fakehub.Eventually(t, "the stream after re-registering", func() bool { h, _, _, _, _, _ := hub.Snapshot(); return len(h) == 1 })
	hub.Mu.Lock()
	rereg := hub.Reregisters
	hub.Mu.Unlock()
	want, _ := id.Identity(context.Background())
	if len(rereg) != 1 || !proto.Equal(rereg[0].GetIdentity(), want) || rereg[0].GetInventory() == nil {
		t.Fatalf("re-registrations %v, want one with the Server's identity", rereg)
	}
	if _, _, _, _, _, enrolls := hub.Snapshot(); enrolls != 1 {
		t.Errorf("enrolls = %d, want the first one only", enrolls)
	}
	if !strings.Contains(r.log.String(), "re-registered it with its certificate") {
		t.Errorf("log does not say so:\n%s", r.log.String())
	}
}
