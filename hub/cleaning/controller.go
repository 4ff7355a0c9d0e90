package cleaning

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/roostfleet/roost/hub/controller"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Bounds of RetryBackoff.
const (
	FirstRetry = time.Minute
	MaxRetry   = time.Hour
)

// RetryBackoff is how long after its failed attempt number attempts (1
// for the first) a cleaning is retried: FirstRetry, doubling with each
// attempt, at most MaxRetry.
func RetryBackoff(attempts int32) time.Duration {
	d := FirstRetry
	for i := int32(1); i < attempts && d < MaxRetry; i++ {
		d *= 2
	}
	return min(d, MaxRetry)
}

// Controller retries the cleaning of CleaningFailed Servers while this
// member leads.
type Controller struct {
	IsLeader func() bool
	Barrier  func(context.Context) error
	FSM      *state.FSM
	// Propose writes a command through Raft (the leader's).
	Propose func(context.Context, *roostv1.Command) error
	// Now is the controller's clock; default time.Now.
	Now     func() time.Time
	Metrics *controller.Metrics
	Log     *slog.Logger
}

// Run runs the loop until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	(&controller.Controller{
		Name: "cleaning", Reconcile: c.Reconcile, Watch: c.FSM.Subscribe, IsLeader: c.IsLeader, Barrier: c.Barrier,
		Sources: []controller.Source{{Kind: "Server", Keys: controller.ByName}},
		Metrics: c.Metrics, Log: c.Log,
	}).Run(ctx)
}

func (c *Controller) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Reconcile retries Server name's cleaning when it is CleaningFailed and
// its backoff has passed; before that it asks to be called again then.
// Any other Server needs nothing.
func (c *Controller) Reconcile(ctx context.Context, name string) (controller.Result, error) {
	o := c.FSM.Reader().Get("Server", name)
	if o == nil {
		return controller.Result{}, nil
	}
	st := o.GetServer().GetStatus()
	if st.GetState() != state.ServerCleaningFailed {
		return controller.Result{}, nil
	}
	cl := st.GetCleaning()
	due := cl.GetFinishedAt().AsTime().Add(RetryBackoff(cl.GetAttempts()))
	if wait := due.Sub(c.now()); wait > 0 {
		return controller.Result{RequeueAfter: wait}, nil
	}
	if c.Log != nil {
		c.Log.Info("retrying a failed cleaning", "server", name, "attempt", cl.GetAttempts()+1, "last_error", cl.GetError())
	}
	err := c.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_ModifyServer{ModifyServer: &roostv1.ModifyServer{
		Name: name, Action: roostv1.ServerAction_SERVER_ACTION_CLEAN}}})
	if err != nil {
		return controller.Result{}, fmt.Errorf("retrying the cleaning of Server %s: %w", name, err)
	}
	return controller.Result{}, nil
}
