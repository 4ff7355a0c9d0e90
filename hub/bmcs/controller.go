package bmcs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/roostfleet/roost/bmc"
	"github.com/roostfleet/roost/bmc/redfish"
	"github.com/roostfleet/roost/hub/controller"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// DefaultProbeInterval is how often a BMC's power state is read.
const DefaultProbeInterval = 30 * time.Second

// DefaultRecoveryAfter is how long a rebooting Server's agent may stay away
// before the hub power-cycles the Server through its BMC: a reboot into a
// new Revision takes a few minutes, a hung firmware or kernel forever.
const DefaultRecoveryAfter = 10 * time.Minute

// Controller keeps Servers' BMC status and carries out BMC operations.
// Set the fields, then call Run.
type Controller struct {
	IsLeader func() bool
	Barrier  func(context.Context) error
	FSM      *state.FSM
	// Propose writes a command through Raft (on the leader).
	Propose func(context.Context, *roostv1.Command) error
	// Connect returns the BMC of spec; nil means Redfish (redfish.New).
	// It must not contact the BMC.
	Connect func(spec *roostv1.BMC) (bmc.BMC, error)
	// MediaURL returns the address a BMC fetches the image digest of
	// server from, with a fresh download token; an error when the hub
	// serves no virtual media (no --media-url).
	MediaURL func(server, digest string) (string, error)
	// FetchMedia, if set, makes sure this member stores the image digest
	// (fetching it from the other members), before the BMC is sent to it.
	FetchMedia func(ctx context.Context, digest string) error
	// Timeout bounds each request to a BMC; zero means
	// redfish.DefaultTimeout.
	Timeout time.Duration
	// ProbeInterval is the time between two reads of a BMC's power state;
	// default DefaultProbeInterval.
	ProbeInterval time.Duration
	// RecoveryAfter is how long a Server that holds a reboot Lease may stay
	// Unreachable before the hub power-cycles it, once per Lease (sooner
	// when the Lease would expire first: then halfway between the last
	// heartbeat and the Lease's expiry); default DefaultRecoveryAfter.
	RecoveryAfter time.Duration
	// Now is the clock; nil means time.Now.
	Now     func() time.Time
	Metrics *controller.Metrics
	Log     *slog.Logger
}

// Run reconciles, while this member leads and until ctx ends, every
// Server with a BMC: when it changes and every ProbeInterval.
func (c *Controller) Run(ctx context.Context) {
	(&controller.Controller{
		Name: "bmc", Reconcile: c.Reconcile, Watch: c.FSM.Subscribe, IsLeader: c.IsLeader, Barrier: c.Barrier,
		Sources: []controller.Source{{Kind: "Server", Keys: c.serverKeys}, {Kind: "Lease", Keys: leaseKeys}}, Workers: 4, Metrics: c.Metrics, Log: c.Log,
	}).Run(ctx)
}

// serverKeys queues Servers that have a BMC.
func (c *Controller) serverKeys(ev *roostv1.WatchEvent) []string {
	if ev.GetObject().GetServer().GetSpec().GetBmc() == nil {
		return nil
	}
	return controller.ByName(ev)
}

// leaseKeys queues the Server of a Lease.
func leaseKeys(ev *roostv1.WatchEvent) []string {
	if s := ev.GetObject().GetLease().GetSpec().GetServer(); s != "" {
		return []string{s}
	}
	return nil
}

func (c *Controller) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Controller) recoveryAfter() time.Duration {
	if c.RecoveryAfter > 0 {
		return c.RecoveryAfter
	}
	return DefaultRecoveryAfter
}

// recovery says whether srv, holding a Granted reboot Lease and
// Unreachable, is due for its power cycle now (and the Lease's fencing
// token), or else how long until it would be (0: not waiting for one).
func (c *Controller) recovery(srv *roostv1.Server) (due bool, fencing uint64, wait time.Duration) {
	l := c.FSM.Reader().Get("Lease", srv.GetMetadata().GetName()).GetLease().GetSpec()
	if l == nil || (l.GetPhase() != "" && l.GetPhase() != state.LeaseGranted) || srv.GetStatus().GetReachability() != state.Unreachable {
		return false, 0, 0
	}
	if srv.GetStatus().GetBmc().GetRecoveryFencingToken() == l.GetFencingToken() {
		return false, 0, 0 // once per Lease
	}
	now, expires := c.now(), l.GetExpiresAt().AsTime()
	if !now.Before(expires) {
		return false, 0, 0 // too late: the Lease counts the reboot as failed
	}
	last := srv.GetStatus().GetLastSeen().AsTime()
	at := last.Add(c.recoveryAfter())
	if !at.Before(expires) {
		at = last.Add(expires.Sub(last) / 2)
	}
	if now.Before(at) {
		return false, 0, at.Sub(now)
	}
	return true, l.GetFencingToken(), 0
}

func (c *Controller) probeInterval() time.Duration {
	if c.ProbeInterval > 0 {
		return c.ProbeInterval
	}
	return DefaultProbeInterval
}

func (c *Controller) log() *slog.Logger {
	if c.Log != nil {
		return c.Log
	}
	return slog.Default()
}

// connect is the BMC of spec.
func (c *Controller) connect(spec *roostv1.BMC) (bmc.BMC, error) {
	if c.Connect != nil {
		return c.Connect(spec)
	}
	addr, err := redfish.ParseAddress(spec.GetAddress())
	if err != nil {
		return nil, err
	}
	return redfish.New(addr, redfish.Options{
		Credentials: redfish.Credentials{Username: spec.GetUsername(), Password: spec.GetPassword()},
		Insecure:    spec.GetInsecureSkipVerify(),
		Timeout:     c.Timeout,
	})
}

// uuidReader is a BMC that reports the system's UUID (Redfish does).
type uuidReader interface {
	SystemUUID(ctx context.Context) (string, error)
}

// Reconcile brings one Server's BMC up to date: it carries out the
// pending operation, ejects the enrollment media of an enrolled Server
// and reads the power state, then records what changed in one
// UpdateServerBMC.
func (c *Controller) Reconcile(ctx context.Context, name string) (controller.Result, error) {
	o := c.FSM.Reader().Get("Server", name)
	srv := o.GetServer()
	spec := srv.GetSpec().GetBmc()
	if spec == nil {
		return controller.Result{}, nil
	}
	st := srv.GetStatus()
	upd := &roostv1.UpdateServerBMC{Server: name}
	b, err := c.connect(spec)
	if err != nil {
		upd.Set = append(upd.Set, &roostv1.Condition{Type: state.ConditionBMCReachable, Status: "False", Reason: "InvalidAddress", Message: err.Error()})
		if op := st.GetBmc().GetOperation(); op != nil {
			upd.DoneOperation = op.GetId()
			upd.Set = append(upd.Set, failed(op, "InvalidAddress", err))
		}
		return controller.Result{}, c.record(ctx, srv, upd)
	}
	if closer, ok := b.(interface{ Close(context.Context) error }); ok {
		defer closer.Close(context.WithoutCancel(ctx))
	}
	reached := true // no call failed for a reason of the BMC's reachability
	var lastErr error
	note := func(err error) {
		if err != nil && unreachable(err) {
			reached, lastErr = false, err
		}
	}
	if op := st.GetBmc().GetOperation(); op != nil {
		err := c.carryOut(ctx, b, name, op, upd)
		note(err)
		upd.DoneOperation = op.GetId()
		if err != nil {
			upd.Set = append(upd.Set, failed(op, bmc.Reason(err), err))
			c.log().Warn("BMC operation failed", "server", name, "action", op.GetAction(), "reason", bmc.Reason(err), "err", err)
		} else {
			upd.Set = append(upd.Set, &roostv1.Condition{Type: state.ConditionBMCOperation, Status: "True", Reason: "Succeeded", Message: done(op)})
			c.log().Info("BMC operation done", "server", name, "action", op.GetAction())
		}
	} else if due, fencing, _ := c.recovery(srv); due {
		// The agent did not come back from its reboot: cycle the power
		// once, before the Lease runs out.
		err := b.SetPower(ctx, bmc.PowerActionCycle)
		note(err)
		upd.RecoveryFencingToken = fencing
		msg := fmt.Sprintf("power cycled: the agent did not come back within %s of its reboot (Lease fencing token %d)", c.recoveryAfter(), fencing)
		if err != nil {
			upd.Set = append(upd.Set, &roostv1.Condition{Type: state.ConditionBMCOperation, Status: "False", Reason: bmc.Reason(err), Message: "recovery " + msg + " failed: " + err.Error()})
		} else {
			upd.Set = append(upd.Set, &roostv1.Condition{Type: state.ConditionBMCOperation, Status: "True", Reason: "RecoveryPowerCycle", Message: msg})
		}
		c.log().Warn("BMC: power cycling a server whose agent did not come back from its reboot", "server", name, "fencing", fencing, "err", err)
	} else if d := st.GetBmc().GetMediaDigest(); d != "" && enrolled(st.GetState()) {
		// The Server enrolled from the media: take it out, so that its
		// next boot is from its disk.
		err := b.EjectMedia(ctx)
		note(err)
		if err == nil {
			upd.SetMedia, upd.MediaDigest = true, ""
		}
	}
	if reached {
		ps, err := b.PowerState(ctx)
		note(err)
		if err == nil {
			upd.PowerState = string(ps)
		}
		if ur, ok := b.(uuidReader); ok && err == nil && st.GetBmc().GetSystemUuid() == "" {
			if u, err := ur.SystemUUID(ctx); err == nil {
				upd.SystemUuid = u
			}
		}
	}
	if reached {
		upd.Set = append(upd.Set, &roostv1.Condition{Type: state.ConditionBMCReachable, Status: "True", Reason: "Reached", Message: "the BMC answered"})
	} else {
		upd.Set = append(upd.Set, &roostv1.Condition{Type: state.ConditionBMCReachable, Status: "False", Reason: bmc.Reason(lastErr), Message: lastErr.Error()})
	}
	next := c.probeInterval()
	if _, _, wait := c.recovery(srv); wait > 0 && wait < next {
		next = wait
	}
	return controller.Result{RequeueAfter: next}, c.record(ctx, srv, upd)
}

// carryOut does op through b. A provision that fails after inserting the
// media ejects it again (best effort), so that a failed provision leaves
// no media behind.
func (c *Controller) carryOut(ctx context.Context, b bmc.BMC, server string, op *roostv1.BMCOperation, upd *roostv1.UpdateServerBMC) error {
	switch op.GetAction() {
	case state.BMCPowerOn:
		return b.SetPower(ctx, bmc.PowerActionOn)
	case state.BMCPowerOff:
		return b.SetPower(ctx, bmc.PowerActionOff)
	case state.BMCPowerCycle:
		return b.SetPower(ctx, bmc.PowerActionCycle)
	case state.BMCBootOnce:
		return b.SetBootOnce(ctx, bmc.BootDevice(op.GetBootDevice()))
	case state.BMCProvision:
		if c.MediaURL == nil {
			return errors.New("this hub serves no virtual media: start roost-hub with --media-addr and --media-url")
		}
		if c.FetchMedia != nil {
			if err := c.FetchMedia(ctx, op.GetMediaDigest()); err != nil {
				return fmt.Errorf("the enrollment image (sha256 %s) is not on this hub member and could not be fetched from the others: %w", short(op.GetMediaDigest()), err)
			}
		}
		u, err := c.MediaURL(server, op.GetMediaDigest())
		if err != nil {
			return err
		}
		if err := b.InsertMedia(ctx, u); err != nil {
			return err
		}
		undo := func(err error) error {
			if eerr := b.EjectMedia(context.WithoutCancel(ctx)); eerr != nil {
				c.log().Warn("BMC: could not eject the media of a failed provision", "server", server, "err", eerr)
			}
			return err
		}
		if err := b.SetBootOnce(ctx, bmc.BootCD); err != nil {
			return undo(err)
		}
		// Power on, or cycle a running Server so that it boots the CD.
		ps, err := b.PowerState(ctx)
		if err != nil {
			return undo(err)
		}
		action := bmc.PowerActionOn
		if ps != bmc.PowerOff {
			action = bmc.PowerActionCycle
		}
		if err := b.SetPower(ctx, action); err != nil {
			return undo(err)
		}
		upd.SetMedia, upd.MediaDigest = true, op.GetMediaDigest()
		return nil
	}
	return fmt.Errorf("unknown BMC operation %q", op.GetAction())
}

// unreachable says whether err means the BMC did not serve the request
// (refused credentials, no answer, a failure of its own), rather than
// refusing one value.
func unreachable(err error) bool {
	switch bmc.Reason(err) {
	case bmc.ReasonUnsupported, bmc.ReasonRejected, bmc.ReasonNotFound, bmc.ReasonError:
		return false
	}
	return true
}

// enrolled says whether a Server in state st has enrolled (its media can go).
func enrolled(st string) bool {
	return st != state.ServerRegistered && st != ""
}

func failed(op *roostv1.BMCOperation, reason string, err error) *roostv1.Condition {
	return &roostv1.Condition{Type: state.ConditionBMCOperation, Status: "False", Reason: reason,
		Message: fmt.Sprintf("%s failed: %v", describe(op), err)}
}

func done(op *roostv1.BMCOperation) string { return describe(op) + " done" }

// describe names op for people.
func describe(op *roostv1.BMCOperation) string {
	switch op.GetAction() {
	case state.BMCBootOnce:
		return "boot once from " + op.GetBootDevice()
	case state.BMCProvision:
		return "provision from the enrollment image (sha256 " + short(op.GetMediaDigest()) + ")"
	}
	return op.GetAction()
}

func short(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// record proposes upd when it changes something of srv.
func (c *Controller) record(ctx context.Context, srv *roostv1.Server, upd *roostv1.UpdateServerBMC) error {
	if !changes(srv, upd) {
		return nil
	}
	return c.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_UpdateServerBmc{UpdateServerBmc: upd}})
}

// changes says whether upd would change srv.
func changes(srv *roostv1.Server, upd *roostv1.UpdateServerBMC) bool {
	b := srv.GetStatus().GetBmc()
	if upd.GetDoneOperation() != "" && b.GetOperation().GetId() == upd.GetDoneOperation() {
		return true
	}
	if upd.GetPowerState() != "" && upd.GetPowerState() != b.GetPowerState() {
		return true
	}
	if upd.GetRecoveryFencingToken() != 0 && upd.GetRecoveryFencingToken() != b.GetRecoveryFencingToken() {
		return true
	}
	if upd.GetSystemUuid() != "" && upd.GetSystemUuid() != b.GetSystemUuid() {
		return true
	}
	if upd.GetSetMedia() && upd.GetMediaDigest() != b.GetMediaDigest() {
		return true
	}
	for _, want := range upd.GetSet() {
		have := state.FindCondition(srv.GetStatus().GetConditions(), want.GetType())
		if have == nil || have.GetStatus() != want.GetStatus() || have.GetReason() != want.GetReason() {
			return true
		}
		// A reachability message that only differs in its details (a
		// timeout's duration) is no reason for a Raft write per probe.
		if want.GetType() != state.ConditionBMCReachable && have.GetMessage() != want.GetMessage() {
			return true
		}
	}
	return false
}
