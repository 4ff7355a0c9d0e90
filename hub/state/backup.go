package state

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/internal/english"
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
// configuration is not restored, so the member records must match it) and
// its current users (a restore never makes a revoked user's certificates
// valid again, nor forgets a user it could then not revoke); users only
// the snapshot holds are kept too.
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
	users := f.Users()
	current := map[string]bool{}
	for _, u := range users {
		current[u.GetName()] = true
	}
	for _, u := range snap.GetUsers() {
		if !current[u.GetName()] {
			users = append(users, u)
		}
	}
	slices.SortFunc(users, func(a, b *roostv1.User) int { return strings.Compare(a.GetName(), b.GetName()) })
	snap.Users = users
	return proto.MarshalOptions{Deterministic: true}.Marshal(snap)
}

// RestoreWarnings says what restoring the saved state data undoes that an
// operator must redo or expect: Servers enrolled since it was saved (their
// agents record them again, PendingApproval), enrollment tokens created
// since (gone) and revoked since (active again), and release keys trusted or untrusted since. Errors
// are those of decoding data.
func (f *FSM) RestoreWarnings(data []byte) ([]string, error) {
	snap := &roostv1.Snapshot{}
	if err := proto.Unmarshal(data, snap); err != nil {
		return nil, fmt.Errorf("decoding the state: %w", err)
	}
	saved := map[string]*roostv1.Object{}
	for _, o := range snap.GetObjects() {
		if r, k := resource.Unwrap(o); r != nil && k != nil {
			saved[k.Name+"/"+r.GetMetadata().GetName()] = o
		}
	}
	var newServers, newTokens, revoked []string
	txn := f.db.Load().Txn(false)
	for _, kind := range []string{"Server", "EnrollmentToken"} {
		it, err := txn.Get(kind, indexID)
		if err != nil {
			return nil, err
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			o := raw.(*roostv1.Object)
			r, _ := resource.Unwrap(o)
			name := r.GetMetadata().GetName()
			old, ok := saved[kind+"/"+name]
			switch {
			case kind == "Server" && !ok:
				newServers = append(newServers, name)
			case kind == "EnrollmentToken" && !ok:
				newTokens = append(newTokens, name)
			case kind == "EnrollmentToken" && o.GetEnrollmentToken().GetStatus().GetRevoked() && !old.GetEnrollmentToken().GetStatus().GetRevoked():
				revoked = append(revoked, name)
			}
		}
	}
	var warnings []string
	if len(newServers) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s enrolled since the snapshot %s not in it (%s): their agents record them again "+
			"with their certificates, without a pool, and they wait for approval ('roostctl server approve NAME'); an agent whose certificate "+
			"has expired must enroll again with a token (remove agent.crt from its state dir)", english.Count(len(newServers), "Server", "Servers"), english.Plural(len(newServers), "is", "are"), listSome(newServers)))
	}
	if len(revoked) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s revoked since the snapshot %s active again (%s): revoke them again "+
			"('roostctl token revoke NAME')", english.Count(len(revoked), "enrollment token", "enrollment tokens"), english.Plural(len(revoked), "is", "are"), listSome(revoked)))
	}
	if len(newTokens) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s created since the snapshot %s not in it (%s): media or configurations carrying them "+
			"cannot enroll; create new ones ('roostctl token create')", english.Count(len(newTokens), "enrollment token", "enrollment tokens"), english.Plural(len(newTokens), "is", "are"), listSome(newTokens)))
	}
	cur := map[string]bool{}
	for _, k := range f.TrustedKeys() {
		cur[k.GetId()] = true
	}
	was := map[string]bool{}
	for _, k := range snap.GetTrustedKeys() {
		was[k.GetId()] = true
		if !cur[k.GetId()] {
			warnings = append(warnings, fmt.Sprintf("release key %s, untrusted since the snapshot, is trusted again ('roostctl image trust remove ID')", k.GetId()))
		}
	}
	for id := range cur {
		if !was[id] {
			warnings = append(warnings, fmt.Sprintf("release key %s, trusted since the snapshot, is not in it: trust it again ('roostctl image trust add FILE')", id))
		}
	}
	return warnings, nil
}

// listSome is up to 5 names, then "and N more".
func listSome(names []string) string {
	if len(names) <= 5 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:5], ", "), len(names)-5)
}
