package agent

import (
	"context"
	"crypto"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/agent/config"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Defaults of the stream.
const (
	// DefaultHeartbeat is the heartbeat interval until the hub says otherwise
	// (HubMessage.heartbeat_interval_seconds).
	DefaultHeartbeat = 10 * time.Second
	// DefaultInventoryInterval is how often the inventory is gathered again;
	// a change is sent as AgentStatus.
	DefaultInventoryInterval = 10 * time.Minute
	// CallTimeout bounds one unary call (Enroll, RenewCertificate).
	CallTimeout = 30 * time.Second
	// stableSession is how long a stream must have lasted for the reconnect
	// backoff to start over.
	stableSession = 5 * time.Second
)

// Keepalive of the agent's connections: an idle-looking connection with an
// open stream is pinged every KeepaliveTime and declared dead when a ping
// is unanswered for KeepaliveTimeout (a member that vanished without
// closing its sockets, or hangs). Together at most 13 s (10 s is the
// least gRPC allows for KeepaliveTime), inside the shortest liveness TTL
// (30 s, with heartbeats every 10 s a silent agent turns Unreachable 18 s
// after its member hung at the earliest): agents of a hung member reach
// another before the leader would mark them Unreachable. The hub must
// permit pings this often (hub/api TransportOptions).
const (
	KeepaliveTime    = 10 * time.Second
	KeepaliveTimeout = 3 * time.Second
)

// TransportDialOptions returns the agent's connection settings: keepalive
// pings every KeepaliveTime (dead after KeepaliveTimeout), and lean buffers
// as on the hub (hub/api TransportOptions), since the simulator runs
// thousands of agents in one process: no read buffer of gRPC's own
// (crypto/tls already buffers a whole record; DATA frames of artifact
// downloads go to pooled buffers), a 32 KiB write buffer held only while
// writing, and 64 KiB flow-control windows.
func TransportDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
		grpc.WithReadBufferSize(0),
		grpc.WithWriteBufferSize(32 << 10),
		grpc.WithSharedWriteBuffer(true),
		grpc.WithInitialWindowSize(64 << 10),
		grpc.WithInitialConnWindowSize(64 << 10),
	}
}

// Options configure an Agent. Identity, Inventory and Store are the OS
// adapters: the real ones read sysfs and the state dir, the simulator's are
// fakes; everything else is the same code.
type Options struct {
	// Hubs are the configured hub API addresses. The list the hub returns at
	// enrollment and renewal is kept in the Store and used first.
	Hubs []string
	// CA is the pinned hub CA (PEM). The bundle the hub returns at
	// enrollment is kept in the Store and preferred afterwards.
	CA []byte
	// Token is the enrollment token; only needed until enrolled.
	Token string
	// Version is the agent version sent to the hub.
	Version string

	Store     Store
	Identity  IdentitySource
	Inventory InventorySource
	Clock     Clock
	Logger    *slog.Logger

	// Heartbeat overrides the interval the hub asks for; 0 follows the hub.
	Heartbeat time.Duration
	// InventoryInterval is how often the inventory is gathered again; 0
	// means DefaultInventoryInterval, negative never.
	InventoryInterval time.Duration
	// BackoffBase and BackoffMax bound reconnect delays (defaults 200 ms, 15 s).
	BackoffBase, BackoffMax time.Duration
	// RebalanceInterval is the shortest wait on a hub member that is not
	// the Server's first choice before checking the first choice (see
	// DefaultRebalanceInterval, its default when 0); negative never moves.
	RebalanceInterval time.Duration
	// DialOptions are appended to the agent's own (tests, simulator).
	DialOptions []grpc.DialOption
	// EnrollGate, when set, is called before each Enroll call and must
	// return a release function (the simulator bounds concurrent enrollments).
	EnrollGate func(ctx context.Context) (release func(), err error)
	// Observer is told about progress (may be nil).
	Observer Observer
	// Host installs and boots Revisions; nil only records desired state.
	Host *Host
}

// Observer receives the agent's progress (the simulator counts it). Every
// method may be called from the agent's goroutine and must not block.
type Observer interface {
	Enrolled(serverName string)
	Connected(hub string)
	Disconnected(hub string, err error)
	// SessionRefused: the hub at hub refused the Server's session (its
	// certificate is known but the Server deleted or decommissioned); the
	// agent keeps retrying slowly until it connects again.
	SessionRefused(hub string, err error)
}

// Locker is a Store that one Agent at a time may use (FileStore): Run
// holds the lock while it runs.
type Locker interface {
	Lock() (unlock func(), err error)
}

// RefusedError is a permanent refusal of enrollment by the hub: a wrong,
// expired, revoked or used-up token, or a request the hub finds malformed.
// The agent stops; retrying with the same token would not help.
type RefusedError struct {
	Code   codes.Code
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("enrollment refused (%s): %s", e.Code, e.Reason)
}

// Agent is roost-agent's logic: enroll once, then keep a stream to the hub.
type Agent struct {
	o   Options
	log *slog.Logger

	key    crypto.Signer
	keyPEM []byte
	cert   atomic.Pointer[tls.Certificate]
	caPEM  []byte
	state  State

	hubs   []string // try order
	next   int
	ranked bool       // hubs are in the Server's order of preference (rendezvousOrder)
	hubsMu sync.Mutex // guards hubs writes and reads off the stream goroutine
	// tried is the hub of the last enrollment or session; moveTo the
	// first choice that session's ErrRebalanced found serving.
	tried, moveTo string

	anonTLS, mtls *tls.Config
	conn          *grpc.ClientConn
	connAddr      string
	connAnon      bool

	heartbeat time.Duration // as the hub asked
	sentInv   *roostv1.Inventory
	// inv is the last inventory sent, for the host loop.
	inv atomic.Pointer[roostv1.Inventory]
	// host and hs are set when Options.Host is.
	host    *Host
	hs      *hostState
	invErr  error
	backoff Backoff
}

// New checks o and returns an Agent; Run starts it.
func New(o Options) (*Agent, error) {
	if o.Store == nil || o.Identity == nil || o.Inventory == nil {
		return nil, errors.New("agent: Store, Identity and Inventory are required")
	}
	if o.Clock == nil {
		o.Clock = RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if err := config.ValidateHubs(o.Hubs); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if o.Token != "" && !config.ValidToken(o.Token) {
		return nil, errors.New("agent: token: not an enrollment token (want abcdef.0123456789abcdef)")
	}
	a := &Agent{o: o, log: o.Logger, heartbeat: DefaultHeartbeat}
	a.backoff = Backoff{Base: o.BackoffBase, Max: o.BackoffMax}
	if o.Host != nil {
		a.host, a.hs = o.Host.withDefaults(), newHostState()
		if n := a.host.BootedRevision; n > 0 {
			// The first report of a boot says the assessment is pending,
			// so the hub never takes the last boot's Healthy for this one.
			a.hs.set(CondHealthy, "False", "Assessing", fmt.Sprintf("revision %d: the boot assessment has not finished", n))
		}
	}
	return a, nil
}

// Run enrolls when needed and then keeps a stream to one hub member,
// moving to another with jittered backoff when it fails. It returns nil
// when ctx ends, a *RefusedError when the hub refuses enrollment, and other
// errors for what retrying cannot fix (no hubs, no CA, unusable state dir).
func (a *Agent) Run(ctx context.Context) error {
	if l, ok := a.o.Store.(Locker); ok {
		unlock, err := l.Lock()
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		defer unlock()
	}
	if err := a.load(); err != nil {
		return err
	}
	defer a.dropConn()
	if a.host != nil {
		if a.state.BootedRevision != a.host.BootedRevision {
			a.state.BootedRevision = a.host.BootedRevision
			if err := a.o.Store.SaveState(a.state); err != nil {
				return fmt.Errorf("agent: %w", err)
			}
		}
		hctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go a.hostLoop(hctx)
	}
	for ctx.Err() == nil {
		var err error
		started := a.o.Clock.Now()
		switch {
		case a.needsEnrollment():
			if a.o.Token == "" {
				return errors.New("agent: not enrolled and no enrollment token (give --token or token: in the config)")
			}
			err = a.enroll(ctx)
			if err == nil {
				continue
			}
			var refused *RefusedError
			if errors.As(err, &refused) {
				return err
			}
		default:
			err = a.session(ctx)
		}
		if ctx.Err() != nil {
			break
		}
		if status.Code(err) == codes.NotFound {
			// The hub has no record of this Server (it restored an older
			// snapshot, or an operator deleted it): record it again with
			// the certificate, for an operator's approval.
			if err = a.reregister(ctx); err == nil {
				continue
			}
		}
		refused := status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated
		// A refusal is no stable session however long it took: the wait
		// keeps growing until an operator acts.
		if !refused && a.o.Clock.Now().Sub(started) >= stableSession {
			a.backoff.Reset()
		}
		a.dropConn()
		if err == nil { // the hub list changed: start over on the new order
			continue
		}
		if errors.Is(err, ErrRebalanced) {
			a.log.Info("moving to this Server's first-choice hub member", "from", a.tried, "to", a.moveTo)
			a.setCurrent(a.moveTo, 0)
			continue
		}
		failed := a.tried
		a.setCurrent(failed, 1)
		d := a.backoff.Next()
		// A member that limits calls (ResourceExhausted) says how long to
		// wait: at least that long, still growing the backoff.
		hint := retryHint(err)
		d = max(d, hint)
		var away *goAwayError
		switch {
		case hint > 0:
			a.log.Warn("the hub member limits calls now; retrying later", "hub", failed, "err", err, "next", a.currentHub(), "after", d.Round(time.Millisecond), "attempt", a.backoff.Attempts())
		case errors.As(err, &away):
			a.log.Info("the hub member asked the agent to move on", "hub", failed, "reason", away.reason, "next", a.currentHub(), "after", d.Round(time.Millisecond))
		case refused:
			// The hub knows the certificate but refuses the Server (deleted,
			// decommissioned): an operator must act; keep trying slowly.
			if a.o.Observer != nil {
				a.o.Observer.SessionRefused(failed, err)
			}
			a.log.Error("the hub refuses this Server's certificate", "hub", failed, "err", err, "next", a.currentHub(), "after", d.Round(time.Millisecond), "attempt", a.backoff.Attempts(),
				"fix", reenrollHint(a.o.Store))
		default:
			a.log.Info("hub unreachable, retrying", "hub", failed, "err", err, "next", a.currentHub(), "after", d.Round(time.Millisecond), "attempt", a.backoff.Attempts())
		}
		select {
		case <-ctx.Done():
		case <-a.o.Clock.After(d):
		}
	}
	return nil
}

// reenrollHint says how to bring back a Server whose certificate the hub
// refuses: the agent enrolls only without a stored certificate, so a token
// alone (which the configuration may still hold) never undoes a
// decommission.
func reenrollHint(s Store) string {
	where := "the state dir"
	if fs, ok := s.(FileStore); ok {
		where = fs.Dir
	}
	return "to enroll this Server again, stop the agent, delete " + CertFile + " in " + where + " and start it with a valid token (--token or token: in the config)"
}

// ServerName returns the Server's name once enrolled.
func (a *Agent) ServerName() string { return a.state.ServerName }

func (a *Agent) load() error {
	s := a.o.Store
	keyPEM, err := s.Key()
	if err != nil {
		return fmt.Errorf("agent: key: %w", err)
	}
	if keyPEM == nil {
		if keyPEM, err = NewKey(); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		if err := s.SaveKey(keyPEM); err != nil {
			return fmt.Errorf("agent: save key: %w", err)
		}
		a.log.Info("generated the agent key")
	}
	if a.key, err = ParseKey(keyPEM); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.keyPEM = keyPEM
	if a.state, err = s.State(); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	certPEM, caPEM, err := s.Certificate()
	if err != nil {
		return fmt.Errorf("agent: certificate: %w", err)
	}
	if certPEM != nil {
		kp, err := keyPair(certPEM, keyPEM)
		if err != nil {
			a.log.Warn("stored certificate unusable; enrolling again", "err", err)
		} else {
			a.cert.Store(kp)
			if a.state.ServerName == "" {
				a.state.ServerName = kp.Leaf.Subject.CommonName
			}
		}
	}
	a.caPEM = caPEM
	if a.caPEM == nil {
		a.caPEM = a.o.CA
	}
	if a.caPEM == nil {
		return errors.New("agent: no hub CA (give --ca or caBundle:/caFile: in the config)")
	}
	if err := a.setTLS(); err != nil {
		return err
	}
	switch {
	case len(a.o.Hubs) == 0:
		a.o.Hubs = a.state.ConfiguredHubs
	case !slices.Equal(a.o.Hubs, a.state.ConfiguredHubs):
		a.state.ConfiguredHubs = slices.Clone(a.o.Hubs)
		if err := s.SaveState(a.state); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	a.setHubs(a.state.Hubs)
	if len(a.hubs) == 0 {
		return errors.New("agent: no hub addresses (give --hub or hubs: in the config)")
	}
	return nil
}

func (a *Agent) setTLS() error {
	var err error
	if a.anonTLS, err = TLSConfig(a.caPEM, nil); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if a.mtls, err = TLSConfig(a.caPEM, a.cert.Load); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}

// setHubs sets the try order: the hub's own list (from) followed by the
// configured addresses it lacks, each part in the Server's order of
// preference (rendezvousOrder) once enrolled, shuffled before, so that
// agents spread over the members. Malformed addresses from the hub are
// dropped.
func (a *Agent) setHubs(from []string) {
	var members, extra []string
	for i, h := range append(slices.Clone(from), a.o.Hubs...) {
		if config.ValidateHubs([]string{h}) != nil || slices.Contains(members, h) || slices.Contains(extra, h) {
			continue
		}
		if i < len(from) {
			members = append(members, h)
		} else {
			extra = append(extra, h)
		}
	}
	key := a.state.ServerName
	var order []string
	if key != "" {
		order = append(rendezvousOrder(key, members), rendezvousOrder(key, extra)...)
	} else {
		order = append(members, extra...)
		if slices.Equal(sorted(order), sorted(a.hubs)) {
			return
		}
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	if slices.Equal(order, a.hubs) && a.ranked == (key != "") {
		return
	}
	a.hubsMu.Lock()
	a.hubs, a.next, a.ranked = order, 0, key != ""
	a.hubsMu.Unlock()
}

// learnHubs keeps the hub members' API addresses the hub sent
// (HubMembers) in the state dir and tries them on the next reconnect, so
// members that joined after enrollment are used when others fail. A list
// with an invalid address is ignored.
func (a *Agent) learnHubs(hubs []string) {
	if len(hubs) == 0 || slices.Equal(sorted(hubs), sorted(a.state.Hubs)) {
		return
	}
	if err := config.ValidateHubs(hubs); err != nil {
		a.log.Warn("ignoring the hub's member list", "err", err)
		return
	}
	st := a.state
	st.Hubs = slices.Clone(hubs)
	if err := a.o.Store.SaveState(st); err != nil {
		a.log.Warn("cannot save the hub's member list", "err", err)
		return
	}
	a.state = st
	a.setHubs(st.Hubs)
	a.log.Info("hub members changed", "hubs", hubs)
}

// hubList returns the hubs in try order, starting with the current one.
func (a *Agent) hubList() []string {
	a.hubsMu.Lock()
	defer a.hubsMu.Unlock()
	out := make([]string, 0, len(a.hubs))
	for i := range a.hubs {
		out = append(out, a.hubs[(a.next+i)%len(a.hubs)])
	}
	return out
}

// sentInventory is the inventory last sent to the hub (nil before).
func (a *Agent) sentInventory() *roostv1.Inventory { return a.inv.Load() }

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

func (a *Agent) currentHub() string { return a.hubs[a.next%len(a.hubs)] }

// setCurrent makes the hub after hub (skip 1) or hub itself (skip 0) the
// current one; when hub is no longer listed, the current one stays.
func (a *Agent) setCurrent(hub string, skip int) {
	a.hubsMu.Lock()
	defer a.hubsMu.Unlock()
	if i := slices.Index(a.hubs, hub); i >= 0 {
		a.next = (i + skip) % len(a.hubs)
	}
}

func (a *Agent) needsEnrollment() bool {
	c := a.cert.Load()
	if c == nil {
		return true
	}
	// An expired certificate cannot reconnect; with a token the agent
	// enrolls again (same key, same identity: the same Server).
	return a.o.Token != "" && !a.o.Clock.Now().Before(c.Leaf.NotAfter)
}

// dialOptions are the options of the agent's connections: TLS without
// a client certificate (anon, to enroll) or with it.
func (a *Agent) dialOptions(anon bool) []grpc.DialOption {
	cfg := a.mtls
	if anon {
		cfg = a.anonTLS
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(cfg)),
		grpc.WithUserAgent("roost-agent/" + a.o.Version),
		grpc.WithDisableServiceConfig(),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 15 * time.Second},
			MinConnectTimeout: 10 * time.Second,
		}),
	}
	opts = append(opts, TransportDialOptions()...)
	return append(opts, a.o.DialOptions...)
}

func (a *Agent) dial(addr string, anon bool) (*grpc.ClientConn, error) {
	if a.conn != nil && a.connAddr == addr && a.connAnon == anon {
		return a.conn, nil
	}
	a.dropConn()
	conn, err := grpc.NewClient("passthrough:///"+addr, a.dialOptions(anon)...)
	if err != nil {
		return nil, err
	}
	a.conn, a.connAddr, a.connAnon = conn, addr, anon
	return conn, nil
}

func (a *Agent) dropConn() {
	if a.conn != nil {
		a.conn.Close()
		a.conn = nil
	}
}

func (a *Agent) gatherInventory(ctx context.Context) *roostv1.Inventory {
	inv, err := a.o.Inventory.Inventory(ctx)
	if err != nil {
		a.log.Warn("inventory incomplete", "err", err)
	}
	a.invErr = err
	if inv == nil {
		inv = &roostv1.Inventory{}
	}
	return inv
}

// reregister asks the hub member the agent tried last to record this
// Server again (AgentService.Reregister) with the identity and inventory
// it reports now; the hub holds it for an operator's approval. A Server
// the hub has again meanwhile (AlreadyExists) is no error.
func (a *Agent) reregister(ctx context.Context) error {
	addr := a.tried
	id, err := a.o.Identity.Identity(ctx)
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	inv := a.gatherInventory(ctx)
	conn, err := a.dial(addr, false)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	_, err = roostv1.NewAgentServiceClient(conn).Reregister(cctx, &roostv1.ReregisterRequest{Identity: id, Inventory: inv, AgentVersion: a.o.Version})
	switch status.Code(err) {
	case codes.OK:
		a.log.Warn("the hub had no record of this Server; re-registered it with its certificate: it waits for an operator's approval",
			"hub", addr, "server", a.state.ServerName, "fix", "roostctl server approve "+a.state.ServerName)
		return nil
	case codes.AlreadyExists:
		return nil
	}
	return fmt.Errorf("re-register: %w", err)
}

func (a *Agent) enroll(ctx context.Context) error {
	addr := a.currentHub()
	a.tried = addr
	id, err := a.o.Identity.Identity(ctx)
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	inv := a.gatherInventory(ctx)
	csr, err := NewCSR(a.key, "roost-agent")
	if err != nil {
		return err
	}
	conn, err := a.dial(addr, true)
	if err != nil {
		return err
	}
	if a.o.EnrollGate != nil {
		release, err := a.o.EnrollGate(ctx)
		if err != nil {
			return err
		}
		defer release()
	}
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	resp, err := roostv1.NewAgentServiceClient(conn).Enroll(cctx, &roostv1.EnrollRequest{
		Token: a.o.Token, CsrPem: csr, Identity: id, Inventory: inv, AgentVersion: a.o.Version,
	})
	if err != nil {
		if st, ok := status.FromError(err); ok {
			switch st.Code() {
			case codes.PermissionDenied, codes.InvalidArgument, codes.Unauthenticated, codes.FailedPrecondition, codes.Unimplemented:
				a.log.Error("enrollment refused", "hub", addr, "code", st.Code().String(), "reason", st.Message())
				return &RefusedError{Code: st.Code(), Reason: st.Message()}
			}
		}
		return fmt.Errorf("enroll: %w", err)
	}
	kp, err := keyPair(resp.GetCertificatePem(), a.keyPEM)
	if err != nil {
		return fmt.Errorf("enroll: the hub's certificate does not fit the agent key: %w", err)
	}
	if resp.GetServerName() == "" {
		return errors.New("enroll: the hub returned no server name")
	}
	ca := resp.GetCaBundlePem()
	if len(ca) > 0 {
		if _, err := config.ParseCABundle(ca); err != nil {
			return fmt.Errorf("enroll: the hub's CA bundle: %w", err)
		}
	}
	st := a.state
	st.ServerName = resp.GetServerName()
	if len(resp.GetHubs()) > 0 {
		st.Hubs = resp.GetHubs()
	}
	if err := a.o.Store.SaveState(st); err != nil {
		return fmt.Errorf("enroll: %w", err)
	}
	if err := a.o.Store.SaveCertificate(resp.GetCertificatePem(), ca); err != nil {
		return fmt.Errorf("enroll: %w", err)
	}
	a.state = st
	a.cert.Store(kp)
	if len(ca) > 0 {
		a.caPEM = ca
		if err := a.setTLS(); err != nil {
			return err
		}
	}
	a.dropConn()
	a.setHubs(st.Hubs)
	a.log.Info("enrolled", "server", st.ServerName, "hub", addr, "certificate_expires", kp.Leaf.NotAfter.UTC().Format(time.RFC3339), "hubs", len(a.hubs))
	if a.o.Observer != nil {
		a.o.Observer.Enrolled(st.ServerName)
	}
	return nil
}

// renew asks the hub to sign a new certificate for the agent's key.
func (a *Agent) renew(ctx context.Context, conn *grpc.ClientConn) error {
	csr, err := NewCSR(a.key, a.state.ServerName)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	resp, err := roostv1.NewAgentServiceClient(conn).RenewCertificate(cctx, &roostv1.RenewCertificateRequest{CsrPem: csr})
	if err != nil {
		return fmt.Errorf("renew certificate: %w", err)
	}
	kp, err := keyPair(resp.GetCertificatePem(), a.keyPEM)
	if err != nil {
		return fmt.Errorf("renew certificate: the hub's certificate does not fit the agent key: %w", err)
	}
	if err := a.o.Store.SaveCertificate(resp.GetCertificatePem(), resp.GetCaBundlePem()); err != nil {
		return err
	}
	a.cert.Store(kp)
	if len(resp.GetHubs()) > 0 {
		st := a.state
		st.Hubs = resp.GetHubs()
		if err := a.o.Store.SaveState(st); err != nil {
			return err
		}
		a.state = st
		a.setHubs(st.Hubs)
	}
	if ca := resp.GetCaBundlePem(); len(ca) > 0 && string(ca) != string(a.caPEM) {
		a.caPEM = ca
		if err := a.setTLS(); err != nil {
			return err
		}
	}
	a.log.Info("certificate renewed", "expires", kp.Leaf.NotAfter.UTC().Format(time.RFC3339))
	return nil
}

// session runs one stream to the current hub until it fails or ctx ends.
func (a *Agent) session(ctx context.Context) (err error) {
	addr := a.currentHub()
	a.tried = addr
	conn, err := a.dial(addr, false)
	if err != nil {
		return err
	}
	clock := a.o.Clock
	if c := a.cert.Load(); !clock.Now().Before(RenewAt(c.Leaf)) {
		if err := a.renew(ctx, conn); err != nil {
			if !clock.Now().Before(c.Leaf.NotAfter) {
				a.log.Error("certificate expired and renewal failed; the agent needs a new enrollment token", "expired", c.Leaf.NotAfter.UTC().Format(time.RFC3339), "err", err)
			}
			return err
		}
		if addr != a.currentHub() { // the hub list changed: start over on the new order
			return nil
		}
	}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := roostv1.NewAgentServiceClient(conn).Connect(sctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	type recvd struct {
		m   *roostv1.HubMessage
		err error
	}
	ch := make(chan recvd, 1)
	receiving := false
	send := func(m *roostv1.AgentMessage) error {
		err := stream.Send(m)
		if err == nil {
			return nil
		}
		if errors.Is(err, io.EOF) {
			// The hub ended the stream; its status comes from Recv (in the
			// receiving goroutine once it runs: one Recv at a time).
			if !receiving {
				if _, rerr := stream.Recv(); rerr != nil {
					return fmt.Errorf("stream: %w", rerr)
				}
			} else {
				for {
					select {
					case r := <-ch:
						if r.err != nil {
							return fmt.Errorf("stream: %w", r.err)
						}
						continue
					case <-clock.After(5 * time.Second):
					}
					break
				}
			}
		}
		return fmt.Errorf("stream send: %w", err)
	}
	if err := send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Hello{Hello: &roostv1.Hello{
		ServerName: a.state.ServerName, AgentVersion: a.o.Version,
		BootedRevision: a.state.BootedRevision, LastAppliedGeneration: a.state.LastAppliedGeneration,
	}}}); err != nil {
		return err
	}
	inv := a.gatherInventory(ctx)
	if err := send(a.statusMessage(inv)); err != nil {
		return err
	}
	a.sentInv = inv
	a.inv.Store(inv)
	var dirty <-chan struct{}
	if a.hs != nil {
		dirty = a.hs.dirty
	}

	receiving = true
	go func() {
		for {
			m, err := stream.Recv()
			select {
			case ch <- recvd{m, err}:
			case <-sctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	connected := false
	hbC := clock.After(a.jittered(a.interval()))
	// Rebalancing: while not on the Server's first choice, check it now
	// and then and move there once it serves (rebalance.go).
	var (
		rebalC  <-chan time.Time
		probeC  chan error
		probing string
	)
	armRebalance := func() {
		if rebalC == nil && probeC == nil && a.firstChoice(addr) != "" {
			if w := a.rebalanceWait(); w > 0 {
				rebalC = clock.After(w)
			}
		}
	}
	var renewC <-chan time.Time
	if c := a.cert.Load(); c != nil {
		renewC = clock.After(RenewAt(c.Leaf).Sub(clock.Now()))
	}
	var invC <-chan time.Time
	invEvery := a.o.InventoryInterval
	if invEvery == 0 {
		invEvery = DefaultInventoryInterval
	}
	if invEvery > 0 {
		invC = clock.After(invEvery)
	}
	defer func() {
		if connected {
			reason := any(err)
			if err == nil && ctx.Err() != nil {
				reason = "the agent is stopping"
			}
			a.log.Info("disconnected", "hub", addr, "reason", reason)
			if a.o.Observer != nil {
				a.o.Observer.Disconnected(addr, err)
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-ch:
			if r.err != nil {
				if errors.Is(r.err, io.EOF) {
					err = errors.New("the hub closed the stream")
				} else {
					err = fmt.Errorf("stream: %w", r.err)
				}
				return err
			}
			if !connected {
				connected = true
				a.log.Info("connected", "hub", addr, "server", a.state.ServerName, "generation", a.state.LastAppliedGeneration)
				if a.o.Observer != nil {
					a.o.Observer.Connected(addr)
				}
				armRebalance()
			}
			switch m := r.m.GetMessage().(type) {
			case *roostv1.HubMessage_HeartbeatIntervalSeconds:
				if s := m.HeartbeatIntervalSeconds; s > 0 && s <= 3600 {
					if d := time.Duration(s) * time.Second; d != a.heartbeat {
						a.heartbeat = d
						a.log.Debug("heartbeat interval", "interval", d)
					}
					hbC = clock.After(a.jittered(a.interval()))
				}
			case *roostv1.HubMessage_Desired:
				if err = a.applyDesired(m.Desired, send); err != nil {
					return err
				}
			case *roostv1.HubMessage_Members:
				a.learnHubs(m.Members.GetApiAddresses())
				armRebalance()
			case *roostv1.HubMessage_GoAway:
				return &goAwayError{reason: m.GoAway.GetReason()}
			}
		case <-rebalC:
			rebalC = nil
			if probing = a.firstChoice(addr); probing != "" {
				probeC = make(chan error, 1)
				go func(to string, done chan<- error) { done <- a.probeServing(sctx, to) }(probing, probeC)
			}
		case perr := <-probeC:
			probeC = nil
			if perr == nil && a.firstChoice(addr) == probing {
				a.moveTo = probing
				return ErrRebalanced
			}
			if perr != nil {
				a.log.Debug("first-choice hub member not serving; staying", "hub", addr, "first_choice", probing, "err", perr)
			}
			armRebalance()
		case <-hbC:
			if err = send(&roostv1.AgentMessage{Message: &roostv1.AgentMessage_Heartbeat{Heartbeat: &roostv1.Heartbeat{SentAt: timestamppb.New(clock.Now())}}}); err != nil {
				return err
			}
			hbC = clock.After(a.jittered(a.interval()))
		case <-renewC:
			renewC = nil
			if rerr := a.renew(ctx, conn); rerr != nil {
				a.log.Warn("certificate renewal failed; retrying", "err", rerr)
				left := a.cert.Load().Leaf.NotAfter.Sub(clock.Now())
				renewC = clock.After(max(min(time.Minute, left/10), time.Second))
			} else {
				renewC = clock.After(RenewAt(a.cert.Load().Leaf).Sub(clock.Now()))
			}
		case <-invC:
			invC = clock.After(invEvery)
			inv := a.gatherInventory(ctx)
			if !proto.Equal(inv, a.sentInv) {
				a.log.Info("inventory changed")
				if err = send(a.statusMessage(inv)); err != nil {
					return err
				}
				a.sentInv = inv
				a.inv.Store(inv)
			}
		case <-dirty:
			if err = send(a.statusMessage(a.sentInv)); err != nil {
				return err
			}
		}
	}
}

func (a *Agent) interval() time.Duration {
	if a.o.Heartbeat > 0 {
		return a.o.Heartbeat
	}
	return a.heartbeat
}

// jittered spreads heartbeats: d ± 10 %.
func (a *Agent) jittered(d time.Duration) time.Duration {
	return d - d/10 + time.Duration(rand.Float64()*float64(d/5))
}

func (a *Agent) statusMessage(inv *roostv1.Inventory) *roostv1.AgentMessage {
	cond := &roostv1.Condition{Type: "InventoryCollected", Status: "True", Reason: "Collected"}
	if a.invErr != nil {
		cond.Status, cond.Reason, cond.Message = "False", "Incomplete", a.invErr.Error()
	}
	st := &roostv1.AgentStatus{
		Inventory: inv, BootedRevision: a.state.BootedRevision,
		AppliedGeneration: a.state.LastAppliedGeneration, Conditions: []*roostv1.Condition{cond},
	}
	if a.hs != nil {
		a.hs.report(st)
	}
	return &roostv1.AgentMessage{Message: &roostv1.AgentMessage_Status{Status: st}}
}

// applyDesired writes or removes the kubelet's bootstrap kubeconfig, hands
// a desired state to the host loop (which installs, stages and reboots
// into its Revision) and records its generation, so that a reconnecting
// agent resumes from it (Hello.last_applied_generation). Without a Host
// only the generation is recorded.
func (a *Agent) applyDesired(d *roostv1.DesiredState, send func(*roostv1.AgentMessage) error) error {
	if a.hs != nil {
		// every time, not per generation: the file lives in RAM, and a
		// token may come and go without a new Revision
		a.applyKubeletBootstrap(d.GetKubeletBootstrap())
		a.hs.offer(d)
	}
	if d.GetGeneration() <= a.state.LastAppliedGeneration {
		a.log.Debug("desired state already applied", "generation", d.GetGeneration())
		return nil
	}
	a.log.Info("desired state received", "generation", d.GetGeneration(), "revision", d.GetRevision(), "failed", d.GetFailed())
	st := a.state
	st.LastAppliedGeneration = d.GetGeneration()
	if err := a.o.Store.SaveState(st); err != nil {
		return fmt.Errorf("record generation: %w", err)
	}
	a.state = st
	return send(a.statusMessage(a.sentInv))
}
