package state

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-memdb"
	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Bounds of the operations log (the Event kind). Every member applies them
// inside Apply with the command's time, so all keep the same Events.
const (
	// MaxEvents is how many Events the hub keeps in total; recording one
	// more drops the least recently seen.
	MaxEvents = 10000
	// MaxEventsPerObject is how many Events one object keeps; recording
	// one more for it drops its least recently seen.
	MaxEventsPerObject = 30
	// EventTTL is how long an Event is kept after it was last seen, by
	// command time.
	EventTTL = 7 * 24 * time.Hour
	// MaxEventMessage caps an Event's message, in bytes; a longer one is
	// cut at a character boundary and ends in "…".
	MaxEventMessage = 1024
	// MaxRecordEvents caps the events of one RecordEvents command.
	MaxRecordEvents = 500
)

// Event types (EventSpec.type), as Kubernetes names them.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// EventSourceHub is EventSpec.source of the Events the state machine
// records itself while applying a command.
const EventSourceHub = "hub"

const (
	kindEvent = "Event"
	// indexInvolved indexes Events by "Kind/name" of their object.
	indexInvolved = "involved"
	// indexLastSeen orders Events by status.lastTimestamp, then name.
	indexLastSeen = "last_seen"
)

// eventIndexes are the Event table's indexes beyond the object tables'.
func eventIndexes() map[string]*memdb.IndexSchema {
	return map[string]*memdb.IndexSchema{
		indexInvolved: {Name: indexInvolved, AllowMissing: true, Indexer: keyIndexer[*roostv1.Object](func(o *roostv1.Object) string {
			io := o.GetEvent().GetSpec().GetInvolvedObject()
			if io.GetKind() == "" {
				return ""
			}
			return refKey(io.GetKind(), io.GetName())
		})},
		indexLastSeen: {Name: indexLastSeen, Indexer: keyIndexer[*roostv1.Object](func(o *roostv1.Object) string {
			return lastSeenKey(o.GetEvent())
		})},
	}
}

// lastSeenKey sorts by last time (nanoseconds since 1970, zero-padded so
// the string order is the time order), then by the Raft index that last
// recorded it (commands may share a time), then by name.
func lastSeenKey(e *roostv1.Event) string {
	ns := max(e.GetStatus().GetLastTimestamp().AsTime().UnixNano(), 0)
	return fmt.Sprintf("%020d/%020d/%s", ns, e.GetMetadata().GetModifyIndex(), e.GetMetadata().GetName())
}

// eventCountRow holds the number of Events, so the total cap needs no
// scan; it is recomputed when a snapshot is restored.
type eventCountRow struct{ N int }

const tableEventCount = "event_count"

// recordEvent records one Event about kind/name, or counts a repeat of an
// Event kept for it with the same type, reason, message and source. It
// records nothing under apply rules before RulesEvents (older members do
// not know the kind) or for a command without a time, and it prunes the
// log to its bounds. Messages longer than MaxEventMessage are cut.
func (a *applier) recordEvent(kind, name, typ, reason, message, source string) *apierror.Error {
	if a.rules < RulesEvents || a.time == nil || name == "" {
		return nil
	}
	message = cutMessage(message)
	key := refKey(kind, name)
	var same *roostv1.Event
	var kept []*roostv1.Event
	it, err := a.txn.Get(kindEvent, indexInvolved, key)
	if err != nil {
		return internal(err)
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		e := raw.(*roostv1.Object).GetEvent()
		s := e.GetSpec()
		if s.GetType() == typ && s.GetReason() == reason && s.GetMessage() == message && s.GetSource() == source {
			same = e
		}
		kept = append(kept, e)
	}
	if same != nil {
		e := proto.Clone(same).(*roostv1.Event)
		e.Status.Count++
		e.Status.LastTimestamp = a.time
		a.touch(e.Metadata, false)
		return a.put(e, false)
	}
	e := &roostv1.Event{
		ApiVersion: resource.APIVersion, Kind: kindEvent,
		Metadata: a.newMeta(fmt.Sprintf("ev-%d-%d", a.index, a.eventSeq), "", a.time),
		Spec: &roostv1.EventSpec{
			InvolvedObject: &roostv1.EventObject{Kind: kind, Name: name},
			Type:           typ, Reason: reason, Message: message, Source: source,
		},
		Status: &roostv1.EventStatus{Count: 1, FirstTimestamp: a.time, LastTimestamp: a.time},
	}
	a.eventSeq++
	if aerr := a.put(e, true); aerr != nil {
		return aerr
	}
	n, aerr := a.addEventCount(1)
	if aerr != nil {
		return aerr
	}
	// The object's own cap: drop its least recently seen.
	if len(kept)+1 > MaxEventsPerObject {
		oldest := kept[0]
		for _, k := range kept[1:] {
			if lastSeenKey(k) < lastSeenKey(oldest) {
				oldest = k
			}
		}
		if aerr := a.dropEvent(oldest.GetMetadata().GetName()); aerr != nil {
			return aerr
		}
		n--
	}
	return a.pruneEvents(n)
}

// pruneEvents drops Events last seen more than EventTTL before the
// command's time, then the least recently seen while more than MaxEvents
// are kept (n is the current count). Both walk the last-seen index from
// its start, so the work is proportional to what is dropped.
func (a *applier) pruneEvents(n int) *apierror.Error {
	cutoff := a.time.AsTime().Add(-EventTTL).UnixNano()
	for {
		raw, err := a.txn.First(kindEvent, indexLastSeen)
		if err != nil {
			return internal(err)
		}
		if raw == nil {
			return nil
		}
		e := raw.(*roostv1.Object).GetEvent()
		if n <= MaxEvents && e.GetStatus().GetLastTimestamp().AsTime().UnixNano() >= cutoff {
			return nil
		}
		if aerr := a.dropEvent(e.GetMetadata().GetName()); aerr != nil {
			return aerr
		}
		n--
	}
}

// dropEvent deletes one Event and lowers the count.
func (a *applier) dropEvent(name string) *apierror.Error {
	if aerr := a.deleteObjectRow(kindEvent, name); aerr != nil {
		return aerr
	}
	_, aerr := a.addEventCount(-1)
	return aerr
}

// addEventCount adds d to the number of Events and returns the new one.
func (a *applier) addEventCount(d int) (int, *apierror.Error) {
	n, err := eventCount(a.txn)
	if err != nil {
		return 0, internal(err)
	}
	if err := a.txn.Insert(tableEventCount, &eventCountRow{N: n + d}); err != nil {
		return 0, internal(err)
	}
	return n + d, nil
}

func eventCount(txn *memdb.Txn) (int, error) {
	raw, err := txn.First(tableEventCount, indexID, singletonKey)
	if err != nil || raw == nil {
		return 0, err
	}
	return raw.(*eventCountRow).N, nil
}

// countEvents recomputes the event count row from the Event table (after
// a restore).
func countEvents(txn *memdb.Txn) error {
	it, err := txn.Get(kindEvent, indexID)
	if err != nil {
		return err
	}
	n := 0
	for raw := it.Next(); raw != nil; raw = it.Next() {
		n++
	}
	return txn.Insert(tableEventCount, &eventCountRow{N: n})
}

// cutMessage shortens s to MaxEventMessage bytes at a character boundary.
func cutMessage(s string) string {
	if len(s) <= MaxEventMessage {
		return s
	}
	cut := MaxEventMessage - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// recordEvents applies a RecordEvents command: the controllers' Events,
// each checked, all or none.
func (a *applier) recordEvents(c *roostv1.RecordEvents) *apierror.Error {
	if a.rules < RulesEvents {
		return a.unknownCommand()
	}
	if _, aerr := a.now(); aerr != nil {
		return aerr
	}
	var vs []apierror.Violation
	if len(c.GetEvents()) > MaxRecordEvents {
		vs = append(vs, apierror.Violation{Field: "events", Message: fmt.Sprintf("holds %d events, at most %d are allowed; send several commands", len(c.GetEvents()), MaxRecordEvents)})
	}
	for i, e := range c.GetEvents() {
		vs = append(vs, checkEventRecord(e, fmt.Sprintf("events[%d]", i))...)
	}
	if len(vs) > 0 {
		return apierror.Invalid("invalid events", vs...)
	}
	for _, e := range c.GetEvents() {
		io := e.GetInvolvedObject()
		if aerr := a.recordEvent(io.GetKind(), io.GetName(), e.GetType(), e.GetReason(), e.GetMessage(), e.GetSource()); aerr != nil {
			return aerr
		}
	}
	return nil
}

// checkEventRecord returns the problems of one EventRecord at path.
func checkEventRecord(e *roostv1.EventRecord, path string) []apierror.Violation {
	var vs []apierror.Violation
	bad := func(field, msg string) {
		vs = append(vs, apierror.Violation{Field: path + "." + field, Message: msg})
	}
	if _, err := resource.Lookup(e.GetInvolvedObject().GetKind()); err != nil || e.GetInvolvedObject().GetKind() == kindEvent {
		bad("involvedObject.kind", fmt.Sprintf("must be the CamelCase kind of an object other than Event, got %q", e.GetInvolvedObject().GetKind()))
	} else if k := resource.MustLookup(e.GetInvolvedObject().GetKind()); k.Name != e.GetInvolvedObject().GetKind() {
		bad("involvedObject.kind", fmt.Sprintf("must be the CamelCase kind %q, got %q", k.Name, e.GetInvolvedObject().GetKind()))
	}
	if e.GetInvolvedObject().GetName() == "" {
		bad("involvedObject.name", "is required")
	}
	if e.GetType() != EventNormal && e.GetType() != EventWarning {
		bad("type", fmt.Sprintf("must be %s or %s, got %q", EventNormal, EventWarning, e.GetType()))
	}
	if !isCamelWord(e.GetReason()) {
		bad("reason", fmt.Sprintf("must be one CamelCase word (e.g. DrainBlocked), got %q", e.GetReason()))
	}
	if e.GetMessage() == "" {
		bad("message", "is required")
	}
	if e.GetSource() == "" {
		bad("source", "is required (the recording controller's name)")
	}
	return vs
}

// isCamelWord reports whether s is an ASCII word starting with an upper
// case letter, at most 64 bytes.
func isCamelWord(s string) bool {
	if s == "" || len(s) > 64 || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}) < 0
}

// recordBootEvent records what an agent's report did to Revision n of
// server: booted, assessed Good, or Failed (phase was its phase before).
func (a *applier) recordBootEvent(server string, n int64, was string, st *roostv1.RevisionStatus) *apierror.Error {
	if st.GetPhase() == was {
		return nil
	}
	switch st.GetPhase() {
	case RevisionBooted:
		return a.recordEvent(kindServer, server, EventNormal, "Booted",
			fmt.Sprintf("booted Revision %d; waiting for its boot assessment", n), EventSourceHub)
	case RevisionGood:
		return a.recordEvent(kindServer, server, EventNormal, "BootGood",
			fmt.Sprintf("Revision %d booted and passed its boot assessment", n), EventSourceHub)
	case RevisionFailed:
		return a.recordEvent(kindServer, server, EventWarning, "BootFailed",
			fmt.Sprintf("Revision %d failed: %s", n, st.GetReason()), EventSourceHub)
	}
	return nil
}

// recordControlEvent records an operator's rollout action on a Pool.
func (a *applier) recordControlEvent(c *roostv1.ControlRollout) *apierror.Error {
	var reason, msg string
	switch c.GetAction() {
	case roostv1.RolloutAction_ROLLOUT_ACTION_PAUSE:
		reason, msg = "RolloutPaused", "paused by an operator"
	case roostv1.RolloutAction_ROLLOUT_ACTION_RESUME:
		reason, msg = "RolloutResumed", "resumed by an operator"
	case roostv1.RolloutAction_ROLLOUT_ACTION_ABORT:
		reason, msg = "RolloutAborted", "aborted by an operator"
	case roostv1.RolloutAction_ROLLOUT_ACTION_PIN:
		reason, msg = "ImagePinned", "pinned to image "+c.GetVersion()+" by an operator"
	case roostv1.RolloutAction_ROLLOUT_ACTION_UNDO:
		reason, msg = "RolloutUndone", "rolled back to image "+c.GetVersion()+" by an operator"
	case roostv1.RolloutAction_ROLLOUT_ACTION_UNPIN:
		reason, msg = "ImageUnpinned", "unpinned by an operator"
	default:
		return nil
	}
	return a.recordEvent(kindPool, c.GetPool(), EventNormal, reason, msg, EventSourceHub)
}

// recordRolloutEvent records the steps of a Pool's rollout the rollout
// controller reported (UpdatePoolRollout): a new target started, the
// rollout halted, waits for a window, completed. Progress within a
// rollout (counts, settling between waves) records nothing.
func (a *applier) recordRolloutEvent(pool string, prev, next *roostv1.RolloutStatus) *apierror.Error {
	if t := next.GetTargetVersion(); t != "" && t != prev.GetTargetVersion() {
		msg := "rolling out image " + t
		if p := next.GetPreviousVersion(); p != "" {
			msg += " (from " + p + ")"
		}
		if aerr := a.recordEvent(kindPool, pool, EventNormal, "RolloutStarted", msg, EventSourceHub); aerr != nil {
			return aerr
		}
	}
	if next.GetPhase() == prev.GetPhase() {
		return nil
	}
	typ, reason := EventNormal, ""
	msg := next.GetReason()
	switch next.GetPhase() {
	case RolloutHalted:
		typ, reason = EventWarning, "RolloutHalted"
	case RolloutWaiting:
		reason = "RolloutWaiting"
	case RolloutIdle:
		if prev.GetPhase() == "" || next.GetTotal() == 0 || next.GetTargetVersion() == "" {
			return nil // nothing was rolled out
		}
		reason = "RolloutCompleted"
		msg = fmt.Sprintf("nothing left to roll out: %d of %d Machines run image %s", next.GetUpdated(), next.GetTotal(), next.GetTargetVersion())
	default:
		return nil
	}
	if msg == "" {
		msg = "rollout " + strings.ToLower(next.GetPhase())
	}
	return a.recordEvent(kindPool, pool, typ, reason, msg, EventSourceHub)
}

// recordDrainEvent records a change of Machine machine's Drained
// condition (the cluster controller's cordon and drain): started,
// finished, blocked (a PodDisruptionBudget, a timeout) or impossible (the
// Cluster's API unreachable).
func (a *applier) recordDrainEvent(machine string, was, now *roostv1.Condition) *apierror.Error {
	if now == nil || (was != nil && was.GetStatus() == now.GetStatus() && was.GetReason() == now.GetReason() && was.GetMessage() == now.GetMessage()) {
		return nil
	}
	typ, reason := EventNormal, now.GetReason()
	switch now.GetReason() {
	case "Draining":
		reason = "DrainStarted"
	case "Drained":
		reason = "DrainFinished"
	case "DrainBlocked", "ClusterUnreachable":
		typ = EventWarning
	}
	if !isCamelWord(reason) {
		reason = "DrainChanged"
	}
	return a.recordEvent(kindMachine, machine, typ, reason, now.GetMessage(), EventSourceHub)
}

// recordConditionEvent records a Warning when condition typ of kind/name
// became True or changed its message while True (a Pool that cannot claim
// its replicas), and a Normal event when it stopped holding.
func (a *applier) recordConditionEvent(kind, name, typ string, was, now []*roostv1.Condition) *apierror.Error {
	before, after := findCondition(was, typ), findCondition(now, typ)
	switch {
	case after.GetStatus() == "True" && (before.GetStatus() != "True" || before.GetMessage() != after.GetMessage()):
		return a.recordEvent(kind, name, EventWarning, typ, after.GetMessage(), EventSourceHub)
	case after.GetStatus() != "True" && before.GetStatus() == "True":
		return a.recordEvent(kind, name, EventNormal, typ+"Resolved", typ+" no longer holds", EventSourceHub)
	}
	return nil
}
