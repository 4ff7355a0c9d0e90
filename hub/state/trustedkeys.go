package state

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
)

// tableTrustedKeys holds the release keys whose signatures the hub accepts
// (roostv1.TrustedKey by id).
const tableTrustedKeys = "trusted_keys"

// The table is registered here, next to its commands, rather than in
// newSchema: dbSchema is built before init functions run, and newDB reads
// it only later.
// checkTrustedKey validates a key as stored: public_key_pem is a PKIX PEM
// ed25519 key and id is the hex sha256 of its raw bytes. field prefixes
// the violations' field paths.
func checkTrustedKey(k *roostv1.TrustedKey, field string) []apierror.Violation {
	pub, err := releasesig.ParsePublicKeyPEM([]byte(k.GetPublicKeyPem()))
	if err != nil {
		return []apierror.Violation{{Field: field + ".publicKeyPem", Message: err.Error()}}
	}
	if want := releasesig.KeyID(pub); k.GetId() != want {
		return []apierror.Violation{{Field: field + ".id", Message: fmt.Sprintf("%q is not the key's id %s (hex sha256 of the raw key)", k.GetId(), want)}}
	}
	return nil
}

// putTrustedKey trusts a release key. Adding a key that is already trusted
// is not an error: it keeps the stored key and its added_at, and replaces
// the comment when the command has a different, non-empty one. added_at
// is the command's time for a new key.
func (a *applier) putTrustedKey(c *roostv1.PutTrustedKey) *apierror.Error {
	k := c.GetKey()
	if k == nil {
		return apierror.Invalid("no key", apierror.Violation{Field: "key", Message: "is required"})
	}
	if vs := checkTrustedKey(k, "key"); len(vs) > 0 {
		return apierror.Invalid("invalid trusted key", vs...)
	}
	raw, err := a.txn.First(tableTrustedKeys, indexID, k.GetId())
	if err != nil {
		return internal(err)
	}
	var next *roostv1.TrustedKey
	if raw != nil {
		old := raw.(*roostv1.TrustedKey)
		if k.GetComment() == "" || k.GetComment() == old.GetComment() {
			return nil
		}
		next = proto.Clone(old).(*roostv1.TrustedKey)
		next.Comment = k.GetComment()
	} else {
		now, aerr := a.now()
		if aerr != nil {
			return aerr
		}
		next = &roostv1.TrustedKey{Id: k.GetId(), PublicKeyPem: k.GetPublicKeyPem(), Comment: k.GetComment(), AddedAt: now}
	}
	if err := a.txn.Insert(tableTrustedKeys, next); err != nil {
		return internal(err)
	}
	return nil
}

// deleteTrustedKey stops trusting the key with exactly id; NotFound when
// no such key is trusted. Releases recorded while it was trusted stay.
func (a *applier) deleteTrustedKey(c *roostv1.DeleteTrustedKey) *apierror.Error {
	id := c.GetId()
	if id == "" {
		return apierror.Invalid("no key id", apierror.Violation{Field: "id", Message: "is required"})
	}
	raw, err := a.txn.First(tableTrustedKeys, indexID, id)
	if err != nil {
		return internal(err)
	}
	if raw == nil {
		return apierror.NotFound("TrustedKey", id)
	}
	if err := a.txn.Delete(tableTrustedKeys, raw); err != nil {
		return internal(err)
	}
	return nil
}

// TrustedKeys returns copies of the trusted release keys, sorted by id.
func (f *FSM) TrustedKeys() []*roostv1.TrustedKey {
	it, err := f.db.Load().Txn(false).Get(tableTrustedKeys, indexID)
	if err != nil {
		return nil
	}
	var out []*roostv1.TrustedKey
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, proto.Clone(raw.(*roostv1.TrustedKey)).(*roostv1.TrustedKey))
	}
	return out
}

// IsKeyID says whether s has the form of a key id or a prefix of one
// (lower-case hex, at most 64 characters).
func IsKeyID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
