package agent

import (
	"context"
	"crypto"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	// Journal reads the host's journal for the hub (roostctl server logs,
	// and the support bundle); nil answers those requests with an error.
	Journal Journal
	// Commands runs the support bundle's diagnostic programs; nil leaves
	// their entries out (each named in the bundle's errors.txt).
	Commands Commands
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

// Agent is roost-agent's logic: enroll once, then keep a stream to the hub.
type Agent struct {
	o   Options
	log *slog.Logger

	// lockMu guards unlock, the release of the state dir's lock (Locker),
	// which a cleaning takes again on the RAM state dir (relock).
	lockMu sync.Mutex
	unlock func()

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
		if _, err := os.Stat(filepath.Join(a.host.StateDir, CleanedFile)); err == nil {
			// restarted after a cleaning in this boot (clean.go)
			a.host.BootedRevision = 0
			a.hs.cleaned = true
		}
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
		a.lockMu.Lock()
		a.unlock = unlock
		a.lockMu.Unlock()
		defer func() {
			a.lockMu.Lock()
			defer a.lockMu.Unlock()
			if a.unlock != nil {
				a.unlock()
				a.unlock = nil
			}
		}()
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
		if a.host.BootedRevision > 0 { // an installed Server: its journal is on STATE
			a.host.pruneJournals(a.log)
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
			err = a.runSession(ctx)
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

// sentInventory is the inventory last sent to the hub (nil before).
func (a *Agent) sentInventory() *roostv1.Inventory { return a.inv.Load() }

func (a *Agent) needsEnrollment() bool {
	c := a.cert.Load()
	if c == nil {
		return true
	}
	// An expired certificate cannot reconnect; with a token the agent
	// enrolls again (same key, same identity: the same Server).
	return a.o.Token != "" && !a.o.Clock.Now().Before(c.Leaf.NotAfter)
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

// relock takes the state dir's lock again (after a cleaning detached the
// file system that held the lock file, whose open descriptor would keep
// it busy): the old lock is released, a new one taken in the same dir.
func (a *Agent) relock() error {
	a.lockMu.Lock()
	defer a.lockMu.Unlock()
	l, ok := a.o.Store.(Locker)
	if !ok || a.unlock == nil {
		return nil
	}
	a.unlock()
	a.unlock = nil
	unlock, err := l.Lock()
	if err != nil {
		return err
	}
	a.unlock = unlock
	return nil
}
