package state

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/proto"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// SaveState returns the whole state as Persist writes it (a Snapshot
// message, marshalled deterministically) and the last index applied to
// it. It reads one consistent view; writes go on meanwhile.
func (f *FSM) SaveState() ([]byte, uint64, error) {
	txn := f.db.Load().Txn(false)
	data, err := marshalSnapshot(txn)
	if err != nil {
		return nil, 0, err
	}
	return data, lastIndex(txn), nil
}

// StateSummary is what a saved state holds: its last applied index, the
// hub CA certificate (PEM) and the number of objects of each kind.
type StateSummary struct {
	Index   uint64
	CAPEM   []byte
	Objects map[string]int64
}

// SummarizeState decodes a saved state (SaveState's bytes) and checks that
// it loads as Restore would load it. Errors: the bytes do not decode, or
// hold invalid rows (objects without kind or name, duplicates).
func SummarizeState(data []byte) (*StateSummary, error) {
	snap := &roostv1.Snapshot{}
	if err := proto.Unmarshal(data, snap); err != nil {
		return nil, fmt.Errorf("decoding the state: %w", err)
	}
	if _, err := buildDB(snap); err != nil {
		return nil, fmt.Errorf("loading the state: %w", err)
	}
	s := &StateSummary{Index: snap.GetLastIndex(), CAPEM: snap.GetCa().GetCertificatePem(), Objects: map[string]int64{}}
	for _, o := range snap.GetObjects() {
		if _, k := resource.Unwrap(o); k != nil {
			s.Objects[k.Name]++
		}
	}
	return s, nil
}

// RestorePayload turns a saved state into the state to restore on this
// hub: the same, but with the hub's current members (the Raft
// configuration is not restored, so the member records must match it).
// Errors: the state does not load (see SummarizeState), or its CA is not
// this hub's (a restore would leave the members' certificates signed by a
// CA the state no longer holds).
func (f *FSM) RestorePayload(data []byte) ([]byte, error) {
	snap := &roostv1.Snapshot{}
	if err := proto.Unmarshal(data, snap); err != nil {
		return nil, fmt.Errorf("decoding the state: %w", err)
	}
	if _, err := buildDB(snap); err != nil {
		return nil, fmt.Errorf("loading the state: %w", err)
	}
	if cur := f.CA(); cur == nil || !bytes.Equal(cur.GetCertificatePem(), snap.GetCa().GetCertificatePem()) {
		return nil, fmt.Errorf("the snapshot is of a hub with another CA: restoring it would replace this hub's CA, " +
			"which signed its members' and agents' certificates; restore it on the hub it was saved from")
	}
	snap.Members = f.Members()
	return proto.MarshalOptions{Deterministic: true}.Marshal(snap)
}
