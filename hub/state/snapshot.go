package state

import (
	"fmt"
	"io"

	"github.com/hashicorp/go-memdb"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Snapshot captures the current state for Raft. It is cheap (a memdb
// snapshot shares the immutable radix trees); the work happens in Persist,
// which may run concurrently with later Applies.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{db: f.db.Load().Snapshot()}, nil
}

// fsmSnapshot is a point-in-time view of the state.
type fsmSnapshot struct {
	db *memdb.MemDB
}

// Persist writes the state as one roostv1.Snapshot message, marshalled
// deterministically (equal states give equal bytes), and closes the sink;
// on error it cancels the sink.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	data, err := marshalSnapshot(s.db.Txn(false))
	if err == nil {
		_, err = sink.Write(data)
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persisting state snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot; there is nothing to release.
func (s *fsmSnapshot) Release() {}

// marshalSnapshot encodes the state in txn: objects sorted by kind name,
// then object name; members and join tokens sorted by id.
func marshalSnapshot(txn *memdb.Txn) ([]byte, error) {
	snap := &roostv1.Snapshot{LastIndex: lastIndex(txn)}
	for _, kind := range resource.KindNames() {
		it, err := txn.Get(kind, indexID)
		if err != nil {
			return nil, err
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			snap.Objects = append(snap.Objects, raw.(*roostv1.Object))
		}
	}
	if raw, err := txn.First(tableCA, indexID, singletonKey); err != nil {
		return nil, err
	} else if raw != nil {
		snap.Ca = raw.(*roostv1.CertificateAuthority)
	}
	it, err := txn.Get(tableMembers, indexID)
	if err != nil {
		return nil, err
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		snap.Members = append(snap.Members, raw.(*roostv1.HubMember))
	}
	it, err = txn.Get(tableJoinTokens, indexID)
	if err != nil {
		return nil, err
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		snap.JoinTokens = append(snap.JoinTokens, raw.(*roostv1.JoinToken))
	}
	it, err = txn.Get(tableBootstrapTokens, indexID)
	if err != nil {
		return nil, err
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		snap.BootstrapTokens = append(snap.BootstrapTokens, raw.(*roostv1.BootstrapToken))
	}
	it, err = txn.Get(tableTrustedKeys, indexID)
	if err != nil {
		return nil, err
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		snap.TrustedKeys = append(snap.TrustedKeys, raw.(*roostv1.TrustedKey))
	}
	it, err = txn.Get(tableUsers, indexID)
	if err != nil {
		return nil, err
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		snap.Users = append(snap.Users, raw.(*roostv1.User))
	}
	if snap.Requests, err = requestRecords(txn); err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(snap)
}

// Restore replaces the whole state with the snapshot read from rc (written
// by Persist), and closes rc. The new state is built aside and swapped in
// atomically, so concurrent reads see either the old or the new state.
// Every watch subscription ends with ErrWatchRestored, and replay restarts
// after the snapshot's index. It fails, leaving the state as it was, when
// the snapshot is larger than Options.MaxSnapshotBytes, does not decode,
// or holds invalid rows (objects without kind or name, duplicates).
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	max := f.opts.MaxSnapshotBytes
	data, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return fmt.Errorf("reading state snapshot: %w", err)
	}
	if int64(len(data)) > max {
		return fmt.Errorf("state snapshot is larger than %d bytes", max)
	}
	snap := &roostv1.Snapshot{}
	if err := proto.Unmarshal(data, snap); err != nil {
		return fmt.Errorf("decoding state snapshot: %w", err)
	}
	data = nil
	db, err := buildDB(snap)
	if err != nil {
		return fmt.Errorf("restoring state snapshot: %w", err)
	}

	f.writeMu.Lock()
	defer f.writeMu.Unlock()
	f.db.Store(db)
	f.watch.reset(snap.GetLastIndex(), ErrWatchRestored)
	return nil
}

// buildDB loads snap into a fresh database.
func buildDB(snap *roostv1.Snapshot) (*memdb.MemDB, error) {
	db := newDB()
	txn := db.Txn(true)
	defer txn.Abort()
	for i, o := range snap.GetObjects() {
		r, k := resource.Unwrap(o)
		if r == nil || k == nil {
			return nil, fmt.Errorf("objects[%d] has no kind", i)
		}
		name := r.GetMetadata().GetName()
		if name == "" {
			return nil, fmt.Errorf("objects[%d] (%s) has no name", i, k.Name)
		}
		if ok, err := exists(txn, k.Name, name); err != nil {
			return nil, err
		} else if ok {
			return nil, fmt.Errorf("objects[%d]: %s %q appears twice", i, k.Name, name)
		}
		if err := txn.Insert(k.Name, o); err != nil {
			return nil, fmt.Errorf("objects[%d]: %w", i, err)
		}
	}
	if ca := snap.GetCa(); ca != nil {
		if err := txn.Insert(tableCA, ca); err != nil {
			return nil, fmt.Errorf("ca: %w", err)
		}
	}
	for i, m := range snap.GetMembers() {
		if err := insertUnique(txn, tableMembers, m.GetId(), m); err != nil {
			return nil, fmt.Errorf("members[%d]: %w", i, err)
		}
	}
	for i, t := range snap.GetJoinTokens() {
		if err := insertUnique(txn, tableJoinTokens, t.GetId(), t); err != nil {
			return nil, fmt.Errorf("joinTokens[%d]: %w", i, err)
		}
	}
	for i, t := range snap.GetBootstrapTokens() {
		if err := insertUnique(txn, tableBootstrapTokens, t.GetTokenId(), t); err != nil {
			return nil, fmt.Errorf("bootstrapTokens[%d]: %w", i, err)
		}
	}
	for i, k := range snap.GetTrustedKeys() {
		if vs := checkTrustedKey(k, fmt.Sprintf("trustedKeys[%d]", i)); len(vs) > 0 {
			return nil, fmt.Errorf("%s: %s", vs[0].Field, vs[0].Message)
		}
		if err := insertUnique(txn, tableTrustedKeys, k.GetId(), k); err != nil {
			return nil, fmt.Errorf("trustedKeys[%d]: %w", i, err)
		}
	}
	for i, u := range snap.GetUsers() {
		if vs := checkUser(u, fmt.Sprintf("users[%d]", i)); len(vs) > 0 {
			return nil, fmt.Errorf("%s: %s", vs[0].Field, vs[0].Message)
		}
		if err := insertUnique(txn, tableUsers, u.GetName(), u); err != nil {
			return nil, fmt.Errorf("users[%d]: %w", i, err)
		}
	}
	if err := restoreRequests(txn, snap.GetRequests()); err != nil {
		return nil, err
	}
	if err := countEvents(txn); err != nil {
		return nil, fmt.Errorf("counting events: %w", err)
	}
	if err := txn.Insert(tableMeta, &metaRow{LastIndex: snap.GetLastIndex()}); err != nil {
		return nil, err
	}
	txn.Commit()
	return db, nil
}

func insertUnique(txn *memdb.Txn, table, id string, row any) error {
	if id == "" {
		return fmt.Errorf("has no id")
	}
	if raw, err := txn.First(table, indexID, id); err != nil {
		return err
	} else if raw != nil {
		return fmt.Errorf("id %q appears twice", id)
	}
	return txn.Insert(table, row)
}
