package state

import (
	"sort"

	"github.com/hashicorp/go-memdb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Reader reads one consistent snapshot of the state without copying: the
// messages it returns are shared with the store and MUST NOT be modified
// (clone them first). For hot read paths of leader controllers that read
// many objects per step; get one with FSM.Reader.
type Reader struct {
	txn *memdb.Txn
}

// Reader returns a read-only view of the state as of now.
func (f *FSM) Reader() *Reader { return &Reader{txn: f.db.Load().Txn(false)} }

// Get returns the object kind/name (CamelCase kind), or nil.
func (r *Reader) Get(kind, name string) *roostv1.Object {
	raw, err := r.txn.First(kind, indexID, name)
	if err != nil || raw == nil {
		return nil
	}
	return raw.(*roostv1.Object)
}

// List returns every object of kind (CamelCase), by name.
func (r *Reader) List(kind string) []*roostv1.Object {
	it, err := r.txn.Get(kind, indexID)
	if err != nil {
		return nil
	}
	var out []*roostv1.Object
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*roostv1.Object))
	}
	return out
}

// MachinesOfPool returns the Machines of Pool pool, by name.
func (r *Reader) MachinesOfPool(pool string) []*roostv1.Machine {
	it, err := r.txn.Get(kindMachine, indexRefs, refKey(kindPool, pool))
	if err != nil {
		return nil
	}
	var out []*roostv1.Machine
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if m := raw.(*roostv1.Object).GetMachine(); m.GetSpec().GetPool() == pool {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetMetadata().GetName() < out[j].GetMetadata().GetName() })
	return out
}

// RevisionSummaries summarises Server server's Revisions, oldest first.
func (r *Reader) RevisionSummaries(server string) []RevisionSummary {
	revs, err := revisionsOf(r.txn, server)
	if err != nil {
		return nil
	}
	out := make([]RevisionSummary, len(revs))
	for i, rv := range revs {
		out[i] = Summary(rv)
	}
	return out
}

// LatestRevision returns Server server's newest Revision (the one
// FSM.LatestRevision copies), or nil when it has none.
func (r *Reader) LatestRevision(server string) *roostv1.Revision {
	it, err := r.txn.Get(kindRevision, indexRefs, refKey(kindServer, server))
	if err != nil {
		return nil
	}
	var latest *roostv1.Revision
	for raw := it.Next(); raw != nil; raw = it.Next() {
		rv := raw.(*roostv1.Object).GetRevision()
		if rv.GetSpec().GetServer() == server && (latest == nil || rv.GetSpec().GetNumber() > latest.GetSpec().GetNumber()) {
			latest = rv
		}
	}
	return latest
}

// Watch returns a channel that is closed when an object of kind
// (CamelCase) is written after this snapshot (nil for an unknown kind).
// Every write of kind makes a new one, so two Readers return the same
// channel only if no object of kind was written between them (a
// restored state has new channels throughout).
func (r *Reader) Watch(kind string) <-chan struct{} {
	it, err := r.txn.Get(kind, indexID)
	if err != nil {
		return nil
	}
	return it.WatchCh()
}

// LastIndex is the last Raft index applied in this snapshot.
func (r *Reader) LastIndex() uint64 { return lastIndex(r.txn) }

// EachRevision calls fn for every Revision, ordered by name.
func (r *Reader) EachRevision(fn func(*roostv1.Revision)) {
	it, err := r.txn.Get(kindRevision, indexID)
	if err != nil {
		return
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		fn(raw.(*roostv1.Object).GetRevision())
	}
}

// Summary summarises one Revision (see RevisionSummaries).
func Summary(rv *roostv1.Revision) RevisionSummary {
	s := RevisionSummary{Number: rv.GetSpec().GetNumber(), Machine: rv.GetSpec().GetMachine(), ImageVersion: rv.GetSpec().GetImageVersion(),
		Phase: revisionPhase(rv), Reason: rv.GetStatus().GetReason()}
	if t := rv.GetStatus().GetBootedAt(); t != nil {
		s.BootedAt = t.AsTime()
	}
	return s
}

// MachineOf returns the Machine holding Server server, or nil.
func (r *Reader) MachineOf(server string) *roostv1.Machine {
	raw, err := r.txn.First(kindMachine, indexRefs, refKey(kindServer, server))
	if err != nil || raw == nil {
		return nil
	}
	return raw.(*roostv1.Object).GetMachine()
}
