package state

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-memdb"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Actions reported in roostv1.ApplyResult.Action.
const (
	ActionCreated    = "created"
	ActionConfigured = "configured"
	ActionUnchanged  = "unchanged"
	ActionDeleted    = "deleted"
)

// Defaults for Options fields left zero.
const (
	DefaultWatchRing        = 4096
	DefaultWatchBuffer      = 1024
	DefaultMaxSnapshotBytes = 1 << 30 // 1 GiB
)

// Options tune an FSM. The zero value gives the defaults.
type Options struct {
	// WatchRing is how many recent watch events are kept for replay by
	// Subscribe(kind, fromIndex > 0). Default DefaultWatchRing; negative
	// keeps none.
	WatchRing int
	// WatchBuffer is how many live events a subscription may have pending
	// before it is closed with ErrWatchFellBehind. Default
	// DefaultWatchBuffer.
	WatchBuffer int
	// MaxSnapshotBytes caps the size of a snapshot Restore accepts, in
	// bytes. Default DefaultMaxSnapshotBytes.
	MaxSnapshotBytes int64
	// Halt is called by Apply, instead of applying, when this build cannot
	// apply a log entry faithfully (a *RulesTooNewError); it must not
	// return (the hub logs the error and exits). Nil panics with the error.
	Halt func(error)
}

func (o Options) withDefaults() Options {
	if o.WatchRing == 0 {
		o.WatchRing = DefaultWatchRing
	}
	if o.WatchRing < 0 {
		o.WatchRing = 0
	}
	if o.WatchBuffer <= 0 {
		o.WatchBuffer = DefaultWatchBuffer
	}
	if o.MaxSnapshotBytes <= 0 {
		o.MaxSnapshotBytes = DefaultMaxSnapshotBytes
	}
	if o.Halt == nil {
		o.Halt = func(err error) { panic(err) }
	}
	return o
}

// FSM is the hub's Raft state machine (raft.FSM) and its read side. Apply,
// Snapshot and Restore are called by Raft; Get, List, CA, Members,
// JoinTokens, LastIndex and Subscribe may be called concurrently with them
// from any goroutine.
type FSM struct {
	opts Options
	// writeMu serialises Apply and Restore (Raft already does; this keeps
	// direct callers such as tests honest).
	writeMu sync.Mutex
	// db is swapped wholesale by Restore.
	db    atomic.Pointer[memdb.MemDB]
	watch *broker
}

var _ raft.FSM = (*FSM)(nil)

// New returns an empty FSM (no objects, no CA, LastIndex 0).
func New(opts Options) *FSM {
	opts = opts.withDefaults()
	f := &FSM{opts: opts, watch: newBroker(opts.WatchRing, opts.WatchBuffer)}
	f.db.Store(newDB())
	return f
}

// ApplyResult is the value FSM.Apply returns (as interface{}) for every
// log entry; raft.ApplyFuture.Response() yields it on the leader.
type ApplyResult struct {
	// Index is the Raft log index of the entry, also for rejected
	// commands, dry runs and no-ops.
	Index uint64
	// Results has one entry per object of an ApplyObjects command, in
	// command order (for a dry run: the actions that would happen), and
	// one "deleted" entry for DeleteObject. Other commands, and rejected
	// commands, have none.
	Results []*roostv1.ApplyResult
	// Warnings are messages for the person who sent the command about a
	// command that succeeded (also a dry run), e.g. a Pool's pause kept
	// over an apply; the API sends them as roost-warning headers. They
	// are computed in Apply from the command and the state, so every
	// member computes the same ones.
	Warnings []string
	// Err is nil or an *apierror.Error. A command with Err set changed
	// nothing.
	Err error
	// Repeated is true when the command carried a request ID that an
	// earlier command applied (requests.go): this entry changed nothing,
	// and Index, Results and Warnings are the earlier command's.
	Repeated bool
}

// Apply applies one Raft log entry and returns an *ApplyResult. Entries
// that are not raft.LogCommand only advance LastIndex. A command that is
// malformed or not allowed by the state returns an ApplyResult with Err
// set and leaves the state (apart from LastIndex) untouched. Watch events
// are published after the change commits.
func (f *FSM) Apply(l *raft.Log) interface{} {
	f.writeMu.Lock()
	defer f.writeMu.Unlock()

	db := f.db.Load()
	res := &ApplyResult{Index: l.Index}
	if l.Type != raft.LogCommand {
		f.setLastIndex(db, l.Index)
		return res
	}
	cmd := &roostv1.Command{}
	if err := proto.Unmarshal(l.Data, cmd); err != nil {
		res.Err = apierror.Invalid(fmt.Sprintf("malformed command at index %d: %v", l.Index, err))
		f.setLastIndex(db, l.Index)
		return res
	}
	if v := commandRules(cmd); v > RulesVersion {
		f.opts.Halt(&RulesTooNewError{Index: l.Index, Needed: v, Implemented: RulesVersion})
		panic("state: Options.Halt returned") // Halt must not return; never apply with the wrong rules
	}

	txn := db.Txn(true)
	byRequest := usesRequestID(cmd)
	if byRequest {
		if prior, ok := repeatedRequest(txn, cmd); ok {
			txn.Abort()
			f.setLastIndex(db, l.Index)
			if prior.Err != nil {
				prior.Index = l.Index
			}
			return prior
		}
	}
	a := &applier{txn: txn, index: l.Index, time: cmd.GetTime(), rules: commandRules(cmd)}
	results, commit, aerr := a.run(cmd)
	if aerr == nil && commit && byRequest {
		if err := recordRequest(txn, cmd, l.Index, results, a.warnings); err != nil {
			aerr = internal(err)
		}
	}
	if aerr != nil || !commit {
		txn.Abort()
		f.setLastIndex(db, l.Index)
		if aerr != nil {
			res.Err = aerr
		} else {
			res.Results, res.Warnings = results, a.warnings
		}
		return res
	}
	if err := txn.Insert(tableMeta, &metaRow{LastIndex: l.Index}); err != nil {
		txn.Abort()
		res.Err = internal(err)
		f.setLastIndex(db, l.Index)
		return res
	}
	txn.Commit()
	res.Results, res.Warnings = results, a.warnings
	f.watch.publish(a.events)
	return res
}

// setLastIndex records idx as applied without any other change.
func (f *FSM) setLastIndex(db *memdb.MemDB, idx uint64) {
	txn := db.Txn(true)
	if err := txn.Insert(tableMeta, &metaRow{LastIndex: idx}); err != nil {
		txn.Abort()
		panic(fmt.Sprintf("state: recording index %d: %v", idx, err)) // schema bug
	}
	txn.Commit()
}

// applier applies one command inside one write transaction.
type applier struct {
	txn   *memdb.Txn
	index uint64
	// time is Command.time; may be nil (commands that need it check).
	time *timestamppb.Timestamp
	// rules is the command's apply rules version (rules.go): a rule added
	// in version N applies only when rules >= N.
	rules uint32
	// events are published when the transaction commits.
	events []event
	// warnings become ApplyResult.Warnings when the command succeeds.
	warnings []string
	// eventSeq numbers the Events this command records (events.go).
	eventSeq int
}

// run dispatches cmd. commit is false for dry runs. A panic (a bug, or a
// malformed command that slipped through) becomes an Internal error, which
// is deterministic: every member panics the same way.
func (a *applier) run(cmd *roostv1.Command) (results []*roostv1.ApplyResult, commit bool, err *apierror.Error) {
	defer func() {
		if p := recover(); p != nil {
			results, commit, err = nil, false, &apierror.Error{Code: codes.Internal,
				Message: fmt.Sprintf("applying command at index %d: panic: %v", a.index, p)}
		}
	}()
	switch c := cmd.GetCommand().(type) {
	case *roostv1.Command_ApplyObjects:
		results, err = a.applyObjects(c.ApplyObjects)
		return results, !c.ApplyObjects.GetDryRun(), err
	case *roostv1.Command_DeleteObject:
		results, err = a.deleteObjectChecked(c.DeleteObject) // deleteObject + the image catalog's in-use rule
	case *roostv1.Command_InitCa:
		err = a.initCA(c.InitCa)
	case *roostv1.Command_PutMember:
		err = a.putMember(c.PutMember)
	case *roostv1.Command_DeleteMember:
		err = a.deleteMember(c.DeleteMember)
	case *roostv1.Command_PutJoinToken:
		err = a.putJoinToken(c.PutJoinToken)
	case *roostv1.Command_UseJoinToken:
		err = a.useJoinToken(c.UseJoinToken)
	case *roostv1.Command_RevokeJoinTokens:
		results, err = a.revokeJoinTokens(c.RevokeJoinTokens)
	case *roostv1.Command_ReregisterServer:
		results, err = a.reregisterServer(c.ReregisterServer)
	case *roostv1.Command_PutEnrollmentToken:
		err = a.putEnrollmentToken(c.PutEnrollmentToken)
	case *roostv1.Command_RevokeEnrollmentToken:
		err = a.revokeEnrollmentToken(c.RevokeEnrollmentToken)
	case *roostv1.Command_EnrollServer:
		results, err = a.enrollServer(c.EnrollServer)
	case *roostv1.Command_UpdateServerStatus:
		err = a.updateServerStatus(c.UpdateServerStatus)
	case *roostv1.Command_SetServerReachability:
		err = a.setServerReachability(c.SetServerReachability)
	case *roostv1.Command_ModifyServer:
		results, err = a.modifyServer(c.ModifyServer)
	case *roostv1.Command_RegisterServer:
		results, err = a.registerServer(c.RegisterServer)
	case *roostv1.Command_UpdateServerBmc:
		err = a.updateServerBMC(c.UpdateServerBmc)
	case *roostv1.Command_CreateMachines:
		results, err = a.createMachines(c.CreateMachines)
	case *roostv1.Command_DeleteMachines:
		results, err = a.deleteMachines(c.DeleteMachines)
	case *roostv1.Command_PutRevision:
		results, err = a.putRevision(c.PutRevision)
	case *roostv1.Command_GrantLease:
		results, err = a.grantLease(c.GrantLease)
	case *roostv1.Command_ReleaseLeases:
		results, err = a.releaseLeases(c.ReleaseLeases)
	case *roostv1.Command_UpdateClusterStatus:
		err = a.updateClusterStatus(c.UpdateClusterStatus)
	case *roostv1.Command_UpdateMachineClusterStatus:
		err = a.updateMachineClusterStatus(c.UpdateMachineClusterStatus)
	case *roostv1.Command_PutBootstrapToken:
		err = a.putBootstrapToken(c.PutBootstrapToken)
	case *roostv1.Command_DeleteBootstrapTokens:
		err = a.deleteBootstrapTokens(c.DeleteBootstrapTokens)
	case *roostv1.Command_ControlRollout:
		results, err = a.controlRollout(c.ControlRollout)
	case *roostv1.Command_UpdatePoolRollout:
		err = a.updatePoolRollout(c.UpdatePoolRollout)
	case *roostv1.Command_PutTrustedKey:
		err = a.putTrustedKey(c.PutTrustedKey)
	case *roostv1.Command_DeleteTrustedKey:
		err = a.deleteTrustedKey(c.DeleteTrustedKey)
	case *roostv1.Command_PromoteImageRelease:
		results, err = a.promoteImageRelease(c.PromoteImageRelease)
	case *roostv1.Command_SetConditions:
		err = a.setConditions(c.SetConditions)
	case *roostv1.Command_PutUserCertificate:
		err = a.putUserCertificate(c.PutUserCertificate)
	case *roostv1.Command_RevokeUser:
		err = a.revokeUser(c.RevokeUser)
	case *roostv1.Command_RecordEvents:
		err = a.recordEvents(c.RecordEvents)
	case *roostv1.Command_UpdateReleaseFeedStatus:
		err = a.updateReleaseFeedStatus(c.UpdateReleaseFeedStatus)
	case *roostv1.Command_ImportImageRelease:
		results, err = a.importImageRelease(c.ImportImageRelease)
	case *roostv1.Command_PromoteAfterSoak:
		results, err = a.promoteAfterSoak(c.PromoteAfterSoak)
	case *roostv1.Command_UpdateChannelStatus:
		err = a.updateChannelStatus(c.UpdateChannelStatus)
	default:
		err = a.unknownCommand()
	}
	return results, true, err
}

// unknownCommand is the error for a command this build does not know, or
// one newer than the command's apply rules: members implementing those
// rules do not know it either, so every member fails it alike.
func (a *applier) unknownCommand() *apierror.Error {
	return apierror.Invalid(fmt.Sprintf("command at index %d has no known command set", a.index))
}

// now returns the command's time, or an error when the command has none.
func (a *applier) now() (*timestamppb.Timestamp, *apierror.Error) {
	if a.time == nil {
		return nil, apierror.Invalid("command has no time", apierror.Violation{Field: "time", Message: "is required"})
	}
	return a.time, nil
}

// internal wraps an unexpected memdb error.
func internal(err error) *apierror.Error {
	return &apierror.Error{Code: codes.Internal, Message: "state store: " + err.Error()}
}

// lastIndex reads the last applied index in txn.
func lastIndex(txn *memdb.Txn) uint64 {
	raw, err := txn.First(tableMeta, indexID, singletonKey)
	if err != nil || raw == nil {
		return 0
	}
	return raw.(*metaRow).LastIndex
}
