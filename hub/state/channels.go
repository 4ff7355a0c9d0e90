package state

import (
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-memdb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/internal/english"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Channels (apply rules 14): an ImageRelease records when it joined each
// of its channels (status.channels), and a Channel object promotes the
// releases of the channel it follows after a soak, on evidence the FSM
// checks itself (PromoteAfterSoak): the leader's promotion controller
// only proposes.

const kindChannel = "Channel"

// The Channel condition and its reasons.
const (
	ChannelPromoting       = "Promoting"
	ReasonSoaking          = "Soaking"
	ReasonHalted           = "Halted"
	ReasonTooFewMachines   = "TooFewMachines"
	ReasonReadyToPromote   = "ReadyToPromote"
	ReasonNoCandidate      = "NoCandidate"
	EventReasonPromoted    = "Promoted"
	EventReasonNotPromoted = "PromotionBlocked"
)

// syncChannelMemberships makes ir.status.channels list exactly the
// channels of ir.spec.channels: a channel that joined gets the command's
// time (and from, the channel it was promoted from after a soak, or "");
// one that left is dropped. Nothing under rules before RulesReleaseFeeds
// or without a command time. ir is a fresh clone the caller stores.
func (a *applier) syncChannelMemberships(ir *roostv1.ImageRelease, from string) {
	if a.rules < RulesReleaseFeeds || a.time == nil {
		return
	}
	var keep []*roostv1.ChannelMembership
	for _, m := range ir.GetStatus().GetChannels() {
		if slices.Contains(ir.GetSpec().GetChannels(), m.GetChannel()) {
			keep = append(keep, m)
		}
	}
	for _, ch := range ir.GetSpec().GetChannels() {
		if !slices.ContainsFunc(keep, func(m *roostv1.ChannelMembership) bool { return m.GetChannel() == ch }) {
			keep = append(keep, &roostv1.ChannelMembership{Channel: ch, Since: a.time, PromotedFrom: from})
		}
	}
	st := &roostv1.ImageReleaseStatus{}
	if ir.Status != nil {
		st = proto.Clone(ir.Status).(*roostv1.ImageReleaseStatus) // merge may share the stored status
	}
	st.Channels = keep
	ir.Status = st
}

// ChannelSince is when ir joined channel: its status.channels entry, else
// its creation time (a release recorded before apply rules 14); false
// when ir is not on channel.
func ChannelSince(ir *roostv1.ImageRelease, channel string) (time.Time, bool) {
	if !slices.Contains(ir.GetSpec().GetChannels(), channel) {
		return time.Time{}, false
	}
	for _, m := range ir.GetStatus().GetChannels() {
		if m.GetChannel() == channel && m.GetSince() != nil {
			return m.GetSince().AsTime(), true
		}
	}
	return ir.GetMetadata().GetCreationTimestamp().AsTime(), true
}

// Promotion is the promotion controller's and the FSM's view of a
// Channel's candidate at one time.
type Promotion struct {
	// Candidate is the newest release (by create index) on the Channel's
	// spec.follows that is not on the Channel; nil when there is none.
	Candidate *roostv1.ImageRelease
	// Ready says the candidate may be promoted now; otherwise Reason
	// (Soaking, Halted, TooFewMachines, NoCandidate) and Message say why
	// not, and Wait how long the soak still runs (0 when it is over).
	Ready           bool
	Reason, Message string
	Wait            time.Duration
	// Evidence says what the decision rests on, for the Promoted Event.
	Evidence string
}

// checkPromotion computes ch's Promotion at now from txn: the soak since
// the candidate joined spec.follows, the Pools whose rollout halted on it
// (phase Halted with it as target), and the Machines Ready on a Server
// that runs it.
func checkPromotion(txn *memdb.Txn, ch *roostv1.Channel, now time.Time) (Promotion, error) {
	name, spec := ch.GetMetadata().GetName(), ch.GetSpec()
	it, err := txn.Get(kindImageRelease, indexID)
	if err != nil {
		return Promotion{}, err
	}
	var p Promotion
	for raw := it.Next(); raw != nil; raw = it.Next() {
		ir := raw.(*roostv1.Object).GetImageRelease()
		chs := ir.GetSpec().GetChannels()
		if !slices.Contains(chs, spec.GetFollows()) || slices.Contains(chs, name) {
			continue
		}
		if p.Candidate == nil || ir.GetMetadata().GetCreateIndex() > p.Candidate.GetMetadata().GetCreateIndex() {
			p.Candidate = ir
		}
	}
	if p.Candidate == nil {
		p.Reason, p.Message = ReasonNoCandidate, fmt.Sprintf("every release of channel %s is on %s", spec.GetFollows(), name)
		return p, nil
	}
	version := p.Candidate.GetSpec().GetVersion()
	since, _ := ChannelSince(p.Candidate, spec.GetFollows())
	soak := resource.ChannelSoak(spec)
	soaked := now.Sub(since)
	var halted []string
	it, err = txn.Get(kindPool, indexID)
	if err != nil {
		return p, err
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		pl := raw.(*roostv1.Object).GetPool()
		if ro := pl.GetStatus().GetRollout(); ro.GetPhase() == RolloutHalted && ro.GetTargetVersion() == version {
			halted = append(halted, pl.GetMetadata().GetName())
		}
	}
	good, err := goodMachines(txn, version)
	if err != nil {
		return p, err
	}
	want := resource.ChannelMinMachines(spec)
	p.Evidence = fmt.Sprintf("release %s soaked %s on %s (soak %s), %s Good on it (at least %d wanted), no Pool halted on it",
		version, soaked.Truncate(time.Second), spec.GetFollows(), soak, english.Count(good, "Machine", "Machines"), want)
	switch {
	case len(halted) > 0:
		p.Reason, p.Message = ReasonHalted, fmt.Sprintf("release %s halted the rollout of %s: a halt blocks its promotion (roostctl rollout resume POOL after a fix)",
			version, english.Count(len(halted), "Pool", "Pools")+" ("+fewNames(halted)+")")
	case soaked < soak:
		p.Reason, p.Wait = ReasonSoaking, soak-soaked
		p.Message = fmt.Sprintf("release %s soaks on %s until %s (soak %s)", version, spec.GetFollows(),
			since.Add(soak).UTC().Format(time.RFC3339), soak)
	case int32(good) < want:
		p.Reason, p.Message = ReasonTooFewMachines, fmt.Sprintf("release %s runs Good on %s, %d wanted (spec.minMachines)", version, english.Count(good, "Machine", "Machines"), want)
	default:
		p.Ready, p.Reason, p.Message = true, ReasonReadyToPromote, p.Evidence
	}
	return p, nil
}

// goodMachines counts the Machines Ready on a Server that runs version.
func goodMachines(txn *memdb.Txn, version string) (int, error) {
	it, err := txn.Get(kindMachine, indexID)
	if err != nil {
		return 0, err
	}
	n := 0
	for raw := it.Next(); raw != nil; raw = it.Next() {
		m := raw.(*roostv1.Object).GetMachine()
		if !conditionTrue(m.GetStatus().GetConditions(), MachineReady) || m.GetSpec().GetServer() == "" {
			continue
		}
		s, err := txn.First(kindServer, indexID, m.GetSpec().GetServer())
		if err != nil {
			return 0, err
		}
		if s != nil && s.(*roostv1.Object).GetServer().GetStatus().GetImageVersion() == version {
			n++
		}
	}
	return n, nil
}

// Promotion returns Channel name's Promotion at now (read only; nil
// error and a zero Promotion with Reason NoCandidate when the Channel is
// gone).
func (f *FSM) Promotion(name string, now time.Time) (*roostv1.Channel, Promotion, error) {
	txn := f.db.Load().Txn(false)
	raw, err := txn.First(kindChannel, indexID, name)
	if err != nil || raw == nil {
		return nil, Promotion{Reason: ReasonNoCandidate}, err
	}
	ch := raw.(*roostv1.Object).GetChannel()
	p, err := checkPromotion(txn, ch, now)
	return ch, p, err
}

// getChannel returns the stored Channel name, or nil.
func (a *applier) getChannel(name string) (*roostv1.Channel, *apierror.Error) {
	raw, err := a.txn.First(kindChannel, indexID, name)
	if err != nil {
		return nil, internal(err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*roostv1.Object).GetChannel(), nil
}

// promoteAfterSoak puts release c.version on Channel c.channel when the
// FSM's own check at the command's time says it may (checkPromotion: it is
// the Channel's candidate, soaked, no Pool halted on it, enough Machines
// Good), records the promotion in the Channel's status and a Promoted
// Event with the evidence. Errors: NotFound (no such Channel),
// FailedPrecondition (another candidate, or the check refuses: the
// message says why).
func (a *applier) promoteAfterSoak(c *roostv1.PromoteAfterSoak) ([]*roostv1.ApplyResult, *apierror.Error) {
	if a.rules < RulesReleaseFeeds {
		return nil, a.unknownCommand()
	}
	ch, aerr := a.getChannel(c.GetChannel())
	if aerr != nil {
		return nil, aerr
	}
	if ch == nil {
		return nil, apierror.NotFound(kindChannel, c.GetChannel())
	}
	now, aerr := a.now()
	if aerr != nil {
		return nil, aerr
	}
	p, err := checkPromotion(a.txn, ch, now.AsTime())
	if err != nil {
		return nil, internal(err)
	}
	if p.Candidate == nil || p.Candidate.GetSpec().GetVersion() != c.GetVersion() {
		return nil, apierror.FailedPrecondition("release %s is not the candidate of channel %s: %s", c.GetVersion(), c.GetChannel(), p.Message)
	}
	if !p.Ready {
		return nil, apierror.FailedPrecondition("release %s is not promoted to %s: %s", c.GetVersion(), c.GetChannel(), p.Message)
	}
	ir := proto.Clone(p.Candidate).(*roostv1.ImageRelease)
	ir.Spec.Channels = append(ir.Spec.Channels, c.GetChannel())
	a.syncChannelMemberships(ir, ch.GetSpec().GetFollows())
	a.touch(ir.Metadata, true)
	if aerr := a.put(ir, false); aerr != nil {
		return nil, aerr
	}
	next := proto.Clone(ch).(*roostv1.Channel)
	if next.Status == nil {
		next.Status = &roostv1.ChannelStatus{}
	}
	next.Status.LastPromoted, next.Status.LastPromotion, next.Status.Evidence = c.GetVersion(), now, p.Evidence
	next.Status.Candidate = ""
	next.Status.Conditions = setCondition(next.Status.Conditions, ChannelPromoting, "False", EventReasonPromoted,
		fmt.Sprintf("release %s promoted from %s", c.GetVersion(), ch.GetSpec().GetFollows()), now)
	a.touch(next.Metadata, false)
	if aerr := a.put(next, false); aerr != nil {
		return nil, aerr
	}
	if aerr := a.recordEvent(kindChannel, c.GetChannel(), EventNormal, EventReasonPromoted, p.Evidence, "promotion"); aerr != nil {
		return nil, aerr
	}
	return []*roostv1.ApplyResult{{Kind: kindImageRelease, Name: ir.GetMetadata().GetName(), Action: ActionConfigured}}, nil
}

// updateChannelStatus replaces Channel c.channel's status but its last
// promotion (written only by promoteAfterSoak). A change of the Promoting
// condition to Halted records a PromotionBlocked Event. Errors: NotFound.
func (a *applier) updateChannelStatus(c *roostv1.UpdateChannelStatus) *apierror.Error {
	if a.rules < RulesReleaseFeeds {
		return a.unknownCommand()
	}
	old, aerr := a.getChannel(c.GetChannel())
	if aerr != nil {
		return aerr
	}
	if old == nil {
		return apierror.NotFound(kindChannel, c.GetChannel())
	}
	next := proto.Clone(old).(*roostv1.Channel)
	st := proto.Clone(c.GetStatus()).(*roostv1.ChannelStatus)
	if st == nil {
		st = &roostv1.ChannelStatus{}
	}
	st.LastPromoted, st.LastPromotion, st.Evidence = old.GetStatus().GetLastPromoted(), old.GetStatus().GetLastPromotion(), old.GetStatus().GetEvidence()
	next.Status = st
	if proto.Equal(next, old) {
		return nil
	}
	a.touch(next.Metadata, false)
	if aerr := a.put(next, false); aerr != nil {
		return aerr
	}
	was, is := FindCondition(old.GetStatus().GetConditions(), ChannelPromoting), FindCondition(st.GetConditions(), ChannelPromoting)
	if is.GetReason() == ReasonHalted && was.GetReason() != ReasonHalted {
		return a.recordEvent(kindChannel, c.GetChannel(), EventWarning, EventReasonNotPromoted, is.GetMessage(), "promotion")
	}
	return nil
}

// SetCondition returns a copy of conds with typ set (its transition time
// moves to now only when the status changes), for controllers that write
// a whole status.
func SetCondition(conds []*roostv1.Condition, typ, status, reason, msg string, now time.Time) []*roostv1.Condition {
	return setCondition(conds, typ, status, reason, msg, timestamppb.New(now))
}
