package feeds

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/hub/controller"
	"github.com/roostfleet/roost/hub/state"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// PromotionResync is how often every Channel is checked again for what
// time changes (a soak ending) and for Machines that became Good;
// releases and Pools changing queue the Channels at once.
const PromotionResync = time.Minute

// Promoter promotes each Channel's candidate from the channel it follows
// (state.FSM.Promotion decides; the FSM checks the same evidence again
// when PromoteAfterSoak applies) and records why a candidate waits in the
// Channel's status. A hub/controller loop keyed by Channel name.
type Promoter struct {
	IsLeader func() bool
	FSM      *state.FSM
	Propose  func(context.Context, *roostv1.Command) error
	Barrier  func(context.Context) error
	// Now is the clock; nil means time.Now.
	Now     func() time.Time
	Metrics *controller.Metrics
	Log     *slog.Logger
}

// Run reconciles the Channels while this member leads, until ctx ends.
func (p *Promoter) Run(ctx context.Context) {
	all := func(*roostv1.WatchEvent) []string { return p.channels() }
	(&controller.Controller{
		Name: "promotion", Reconcile: p.Reconcile, Watch: p.FSM.Subscribe, IsLeader: p.IsLeader, Barrier: p.Barrier,
		Sources: []controller.Source{
			{Kind: "Channel", Keys: controller.ByName},
			// Channels are few: every release and Pool (a halt) change
			// re-checks them all. Machines becoming Good on a release are
			// counted at the next resync: they change too often to fan
			// out, and a soak is counted in days.
			{Kind: "ImageRelease", Keys: all},
			{Kind: "Pool", Keys: all},
		},
		Resync: PromotionResync, ResyncKeys: p.channels,
		Metrics: p.Metrics, Log: p.Log,
	}).Run(ctx)
}

func (p *Promoter) channels() []string { return controller.Names(p.FSM.Reader().List("Channel")) }

func (p *Promoter) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}

// Reconcile promotes Channel name's candidate when it is ready, else
// records what it waits for (only when that changed), and asks to run
// again when its soak ends. A Channel that does not exist is done.
func (p *Promoter) Reconcile(ctx context.Context, name string) (controller.Result, error) {
	now := p.now()
	ch, pr, err := p.FSM.Promotion(name, now)
	if err != nil || ch == nil {
		return controller.Result{}, err
	}
	if pr.Ready {
		version := pr.Candidate.GetSpec().GetVersion()
		if err := p.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_PromoteAfterSoak{PromoteAfterSoak: &roostv1.PromoteAfterSoak{
			Channel: name, Version: version}}}); err != nil {
			return controller.Result{}, fmt.Errorf("channel %s: promote %s: %w", name, version, err)
		}
		if p.Log != nil {
			p.Log.Info("promoted release", "channel", name, "version", version, "evidence", pr.Evidence)
		}
		return controller.Result{}, nil
	}
	st := proto.Clone(ch.GetStatus()).(*roostv1.ChannelStatus)
	if st == nil {
		st = &roostv1.ChannelStatus{}
	}
	st.Candidate = pr.Candidate.GetSpec().GetVersion()
	status := "True"
	if pr.Candidate == nil {
		status = "False"
	}
	st.Conditions = state.SetCondition(st.GetConditions(), state.ChannelPromoting, status, pr.Reason, pr.Message, now)
	var res controller.Result
	if pr.Wait > 0 {
		res.RequeueAfter = pr.Wait
	}
	if proto.Equal(st, ch.GetStatus()) {
		return res, nil
	}
	if err := p.Propose(ctx, &roostv1.Command{Command: &roostv1.Command_UpdateChannelStatus{UpdateChannelStatus: &roostv1.UpdateChannelStatus{
		Channel: name, Status: st}}}); err != nil {
		return controller.Result{}, fmt.Errorf("channel %s: %w", name, err)
	}
	return res, nil
}
