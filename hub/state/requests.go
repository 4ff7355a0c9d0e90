package state

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-memdb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Request records: the FSM's memory of the API requests it applied, so
// that a client that retries a write whose outcome it did not learn (the
// leader was lost mid-apply, the connection dropped after sending) gets the
// first result instead of a second token, Machine or refusal. A command
// carries the client's request ID (Command.request_id); under apply rules
// RulesRequestIDs and later, Apply looks the ID up first and, when it was
// applied before, changes nothing and returns the recorded result.
//
// Only commands that succeed are recorded: a failed command changed
// nothing, so running the request again is no repetition. Records expire
// deterministically, by the commands' own times and indexes (never a
// member's clock): a record is dropped once it is older than
// RequestRecordTTL by the time of a newer command carrying a request ID,
// or more than RequestRecordWindow log entries behind one.
const (
	// RequestRecordTTL is how long (by command time) a request ID is
	// remembered: a retry or a re-run with the same ID within it returns
	// the first result.
	RequestRecordTTL = time.Hour
	// RequestRecordWindow bounds the records to the newest 65,536 log
	// entries, so their number (and the snapshot) stays bounded however
	// fast requests come.
	RequestRecordWindow = 1 << 16
	// MaxRequestIDBytes is the longest request ID the FSM accepts.
	MaxRequestIDBytes = 128
)

const (
	tableRequests = "requests"
	indexIndex    = "index"
)

// requestRow is one row of tableRequests.
type requestRow struct {
	ID     string
	Index  uint64
	Record *roostv1.RequestRecord
}

func requestsTable() *memdb.TableSchema {
	return &memdb.TableSchema{Name: tableRequests, Indexes: map[string]*memdb.IndexSchema{
		indexID:    {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
		indexIndex: {Name: indexIndex, Unique: true, Indexer: &memdb.UintFieldIndex{Field: "Index"}},
	}}
}

// usesRequestID says whether cmd's request ID takes part in applying it.
func usesRequestID(cmd *roostv1.Command) bool {
	return cmd.GetRequestId() != "" && commandRules(cmd) >= RulesRequestIDs
}

// repeatedRequest returns the result of the request cmd carries when it
// was applied before (ok true): the recorded results and warnings, Index
// the index that applied it, or Err when the ID was used for another
// request (a different fingerprint) or is too long.
func repeatedRequest(txn *memdb.Txn, cmd *roostv1.Command) (res *ApplyResult, ok bool) {
	id := cmd.GetRequestId()
	if len(id) > MaxRequestIDBytes {
		return &ApplyResult{Err: apierror.Invalid("invalid request ID", apierror.Violation{Field: "requestId",
			Message: fmt.Sprintf("is %d bytes long; at most %d allowed", len(id), MaxRequestIDBytes)})}, true
	}
	raw, err := txn.First(tableRequests, indexID, id)
	if err != nil || raw == nil {
		return nil, false
	}
	rec := raw.(*requestRow).Record
	if rec.GetFingerprint() != cmd.GetRequestFingerprint() {
		return &ApplyResult{Err: apierror.FailedPrecondition("request ID %q was already used at index %d for a different request: "+
			"give every request its own ID (roostctl makes a new one unless --request-id is given)", id, rec.GetIndex())}, true
	}
	out := &ApplyResult{Index: rec.GetIndex(), Repeated: true, Warnings: rec.GetWarnings()}
	for _, r := range rec.GetResults() {
		out.Results = append(out.Results, &roostv1.ApplyResult{Kind: r.GetKind(), Name: r.GetName(), Action: r.GetAction()})
	}
	return out, true
}

// recordRequest keeps the result of the command at index that carried a
// request ID, and drops the records this command makes expire.
func recordRequest(txn *memdb.Txn, cmd *roostv1.Command, index uint64, results []*roostv1.ApplyResult, warnings []string) error {
	rec := &roostv1.RequestRecord{Id: cmd.GetRequestId(), Fingerprint: cmd.GetRequestFingerprint(), Index: index, Time: cmd.GetTime(), Warnings: warnings}
	for _, r := range results {
		rec.Results = append(rec.Results, &roostv1.RecordedResult{Kind: r.GetKind(), Name: r.GetName(), Action: r.GetAction()})
	}
	if err := txn.Insert(tableRequests, &requestRow{ID: rec.Id, Index: index, Record: rec}); err != nil {
		return err
	}
	return expireRequests(txn, index, cmd.GetTime())
}

// expireRequests deletes, oldest index first, the records more than
// RequestRecordWindow entries before index or older than RequestRecordTTL
// before now (a command's time; nil expires by index only). It stops at
// the first record kept, so a record from a leader whose clock ran behind
// may outlive its TTL until the records before it go: harmless, and the
// same on every member.
func expireRequests(txn *memdb.Txn, index uint64, now *timestamppb.Timestamp) error {
	it, err := txn.LowerBound(tableRequests, indexIndex, uint64(0))
	if err != nil {
		return err
	}
	var drop []*requestRow
	for raw := it.Next(); raw != nil; raw = it.Next() {
		row := raw.(*requestRow)
		old := row.Index+RequestRecordWindow <= index
		if !old && now != nil && row.Record.GetTime() != nil {
			old = now.AsTime().Sub(row.Record.GetTime().AsTime()) > RequestRecordTTL
		}
		if !old {
			break
		}
		drop = append(drop, row)
	}
	for _, row := range drop {
		if err := txn.Delete(tableRequests, row); err != nil {
			return err
		}
	}
	return nil
}

// RequestRecord returns the kept record of request id, if any: whether
// the hub applied that request (and where) as far as this member has
// applied the log.
func (f *FSM) RequestRecord(id string) (*roostv1.RequestRecord, bool) {
	raw, err := f.db.Load().Txn(false).First(tableRequests, indexID, id)
	if err != nil || raw == nil {
		return nil, false
	}
	return raw.(*requestRow).Record, true
}

// requestRecords returns the kept records sorted by index (snapshots).
func requestRecords(txn *memdb.Txn) ([]*roostv1.RequestRecord, error) {
	it, err := txn.LowerBound(tableRequests, indexIndex, uint64(0))
	if err != nil {
		return nil, err
	}
	var out []*roostv1.RequestRecord
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*requestRow).Record)
	}
	return out, nil
}

// restoreRequests loads a snapshot's records into txn.
func restoreRequests(txn *memdb.Txn, recs []*roostv1.RequestRecord) error {
	for i, rec := range recs {
		if rec.GetId() == "" {
			return fmt.Errorf("requests[%d] has no id", i)
		}
		if raw, err := txn.First(tableRequests, indexID, rec.GetId()); err != nil {
			return err
		} else if raw != nil {
			return fmt.Errorf("requests[%d]: id %q appears twice", i, rec.GetId())
		}
		if raw, err := txn.First(tableRequests, indexIndex, rec.GetIndex()); err != nil {
			return err
		} else if raw != nil {
			return fmt.Errorf("requests[%d]: index %d appears twice", i, rec.GetIndex())
		}
		if err := txn.Insert(tableRequests, &requestRow{ID: rec.GetId(), Index: rec.GetIndex(), Record: rec}); err != nil {
			return fmt.Errorf("requests[%d]: %w", i, err)
		}
	}
	return nil
}
