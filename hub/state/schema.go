package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Table and index names. Object tables are named after their kind's
// CamelCase name (e.g. "Pool"); the other tables are lower case so they
// can never collide with a kind.
const (
	tableCA         = "ca"
	tableMembers    = "members"
	tableJoinTokens = "join_tokens"
	tableMeta       = "meta"

	indexID   = "id"
	indexRefs = "refs"
	indexBMC  = "bmc"

	// singletonKey is the primary key of single-row tables.
	singletonKey = "singleton"
)

// metaRow holds bookkeeping that must move atomically with the state.
type metaRow struct {
	// LastIndex is the last applied Raft log index.
	LastIndex uint64
}

// dbSchema is built once; go-memdb validates it in newDB.
var dbSchema = newSchema()

func newSchema() *memdb.DBSchema {
	s := &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{}}
	for _, k := range resource.Kinds() {
		s.Tables[k.Name] = &memdb.TableSchema{
			Name: k.Name,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: keyIndexer[*roostv1.Object](func(o *roostv1.Object) string {
					return resource.NameOf(o)
				})},
				indexRefs: {Name: indexRefs, AllowMissing: true, Indexer: refsIndexer{}},
			},
		}
	}
	// Servers with a BMC (spec.bmc), so an enrollment finds the record
	// it matches among them (registeredMatch) without a scan of every
	// Server: a scan per enrollment made enrolling a fleet quadratic.
	s.Tables[kindServer].Indexes[indexBMC] = &memdb.IndexSchema{Name: indexBMC, Indexer: &memdb.ConditionalIndex{
		Conditional: func(raw any) (bool, error) {
			o, ok := raw.(*roostv1.Object)
			if !ok {
				return false, fmt.Errorf("row has type %T, want *roostv1.Object", raw)
			}
			return o.GetServer().GetSpec().GetBmc() != nil, nil
		}}}
	for name, idx := range eventIndexes() {
		s.Tables[kindEvent].Indexes[name] = idx
	}
	s.Tables[tableEventCount] = singleTable(tableEventCount, keyIndexer[*eventCountRow](func(*eventCountRow) string { return singletonKey }))
	s.Tables[tableCA] = singleTable(tableCA, keyIndexer[*roostv1.CertificateAuthority](func(*roostv1.CertificateAuthority) string { return singletonKey }))
	s.Tables[tableMeta] = singleTable(tableMeta, keyIndexer[*metaRow](func(*metaRow) string { return singletonKey }))
	s.Tables[tableMembers] = singleTable(tableMembers, keyIndexer[*roostv1.HubMember](func(m *roostv1.HubMember) string { return m.GetId() }))
	s.Tables[tableJoinTokens] = singleTable(tableJoinTokens, keyIndexer[*roostv1.JoinToken](func(t *roostv1.JoinToken) string { return t.GetId() }))
	s.Tables[tableTrustedKeys] = singleTable(tableTrustedKeys, keyIndexer[*roostv1.TrustedKey](func(k *roostv1.TrustedKey) string { return k.GetId() }))
	s.Tables[tableRequests] = requestsTable()
	s.Tables[tableUsers] = usersTable()
	s.Tables[tableBootstrapTokens] = singleTable(tableBootstrapTokens, keyIndexer[*roostv1.BootstrapToken](func(t *roostv1.BootstrapToken) string { return t.GetTokenId() }))
	return s
}

func singleTable(name string, id memdb.Indexer) *memdb.TableSchema {
	return &memdb.TableSchema{Name: name, Indexes: map[string]*memdb.IndexSchema{
		indexID: {Name: indexID, Unique: true, Indexer: id},
	}}
}

func newDB() *memdb.MemDB {
	db, err := memdb.NewMemDB(dbSchema)
	if err != nil {
		panic(fmt.Sprintf("state: invalid memdb schema: %v", err)) // a programming error
	}
	return db
}

// keyIndexer is a unique string index over rows of type T computed by a
// function, for fields StringFieldIndex cannot reach (nested metadata) or
// constant keys. An empty key counts as missing. Keys are NUL-terminated
// like StringFieldIndex's, so exact lookups never match a longer key.
type keyIndexer[T any] func(T) string

// FromObject implements memdb.SingleIndexer.
func (f keyIndexer[T]) FromObject(raw any) (bool, []byte, error) {
	row, ok := raw.(T)
	if !ok {
		return false, nil, fmt.Errorf("row has type %T, want %T", raw, *new(T))
	}
	k := f(row)
	if k == "" {
		return false, nil, nil
	}
	return true, []byte(k + "\x00"), nil
}

// FromArgs implements memdb.Indexer: one string argument.
func (f keyIndexer[T]) FromArgs(args ...any) ([]byte, error) {
	return stringArg(args)
}

// refsIndexer indexes the objects a row refers to, as "Kind/name" keys,
// so deleting an object can find its users without a table scan.
type refsIndexer struct{}

// FromObject implements memdb.MultiIndexer.
func (refsIndexer) FromObject(raw any) (bool, [][]byte, error) {
	o, ok := raw.(*roostv1.Object)
	if !ok {
		return false, nil, fmt.Errorf("row has type %T, want *roostv1.Object", raw)
	}
	var keys [][]byte
	seen := map[string]bool{}
	for _, r := range referencesOf(o) {
		k := refKey(r.Kind, r.Name)
		if seen[k] {
			continue
		}
		seen[k] = true
		keys = append(keys, []byte(k+"\x00"))
	}
	return len(keys) > 0, keys, nil
}

// FromArgs implements memdb.Indexer: one "Kind/name" string argument.
func (refsIndexer) FromArgs(args ...any) ([]byte, error) {
	return stringArg(args)
}

func refKey(kind, name string) string { return kind + "/" + name }

func stringArg(args []any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("want one argument, got %d", len(args))
	}
	s, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("want a string argument, got %T", args[0])
	}
	return []byte(s + "\x00"), nil
}
