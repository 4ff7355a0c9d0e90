package state

import (
	"crypto/ed25519"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
)

func newReleaseKey(t *testing.T) *roostv1.TrustedKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &roostv1.TrustedKey{Id: releasesig.KeyID(pub), PublicKeyPem: string(releasesig.MarshalPublicKeyPEM(pub))}
}

func putKeyCmd(k *roostv1.TrustedKey, comment string) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_PutTrustedKey{PutTrustedKey: &roostv1.PutTrustedKey{Key: &roostv1.TrustedKey{
		Id: k.GetId(), PublicKeyPem: k.GetPublicKeyPem(), Comment: comment}}}}
}

func deleteKeyCmd(id string) *roostv1.Command {
	return &roostv1.Command{Command: &roostv1.Command_DeleteTrustedKey{DeleteTrustedKey: &roostv1.DeleteTrustedKey{Id: id}}}
}

func TestTrustedKeys(t *testing.T) {
	h := newHarness(t, Options{})
	a, b := newReleaseKey(t), newReleaseKey(t)
	h.mustApply(putKeyCmd(a, "release team"))
	h.mustApply(putKeyCmd(b, ""))
	keys := h.f.TrustedKeys()
	if len(keys) != 2 || keys[0].GetId() > keys[1].GetId() {
		t.Fatalf("TrustedKeys = %v, want 2 sorted by id", keys)
	}
	var got *roostv1.TrustedKey
	for _, k := range keys {
		if k.GetId() == a.GetId() {
			got = k
		}
	}
	if got.GetComment() != "release team" || !got.GetAddedAt().AsTime().Equal(timeAt(1)) {
		t.Fatalf("key a = %v, want comment and added_at = the command's time %s", got, timeAt(1))
	}

	// Adding it again is fine: added_at stays; an empty comment keeps the
	// old one, a new one replaces it.
	h.mustApply(putKeyCmd(a, ""))
	h.mustApply(putKeyCmd(a, "new comment"))
	for _, k := range h.f.TrustedKeys() {
		if k.GetId() == a.GetId() && (k.GetComment() != "new comment" || !k.GetAddedAt().AsTime().Equal(timeAt(1))) {
			t.Fatalf("after re-adding: %v", k)
		}
	}

	// Invalid keys.
	bad := putKeyCmd(a, "")
	bad.GetPutTrustedKey().Key.Id = b.GetId()
	e := wantCode(t, h.apply(bad).Err, codes.InvalidArgument)
	if e.Violations[0].Field != "key.id" {
		t.Errorf("wrong id: %v", e)
	}
	bad = putKeyCmd(a, "")
	bad.GetPutTrustedKey().Key.PublicKeyPem = "not PEM"
	if e := wantCode(t, h.apply(bad).Err, codes.InvalidArgument); e.Violations[0].Field != "key.publicKeyPem" {
		t.Errorf("not PEM: %v", e)
	}
	noTime := putKeyCmd(newReleaseKey(t), "")
	noTime.Time = nil
	if res := h.applyRaw(mustMarshal(t, noTime)); res.Err == nil {
		t.Error("a new key without command time was accepted")
	}

	// Delete by exact id.
	wantCode(t, h.apply(deleteKeyCmd(a.GetId()[:8])).Err, codes.NotFound)
	wantCode(t, h.apply(deleteKeyCmd("")).Err, codes.InvalidArgument)
	h.mustApply(deleteKeyCmd(a.GetId()))
	if keys := h.f.TrustedKeys(); len(keys) != 1 || keys[0].GetId() != b.GetId() {
		t.Fatalf("after delete: %v", keys)
	}
	wantCode(t, h.apply(deleteKeyCmd(a.GetId())).Err, codes.NotFound)

	// Snapshot and restore keep them.
	f := restoreNew(t, snapshotBytes(t, h.f))
	if keys := f.TrustedKeys(); len(keys) != 1 || keys[0].GetId() != b.GetId() || keys[0].GetPublicKeyPem() != b.GetPublicKeyPem() {
		t.Fatalf("restored: %v", keys)
	}
}

func TestRestoreRefusesBadTrustedKey(t *testing.T) {
	k := newReleaseKey(t)
	k.Id = strings.Repeat("0", 64)
	data := mustMarshal(t, &roostv1.Snapshot{TrustedKeys: []*roostv1.TrustedKey{k}})
	if err := New(Options{}).Restore(ioNopCloser(data)); err == nil || !strings.Contains(err.Error(), "trustedKeys[0].id") {
		t.Fatalf("Restore = %v, want an error on trustedKeys[0].id", err)
	}
}

func TestIsKeyID(t *testing.T) {
	for s, want := range map[string]bool{"ab12": true, strings.Repeat("f", 64): true, "": false, "AB": false, "xyz": false, strings.Repeat("a", 65): false} {
		if IsKeyID(s) != want {
			t.Errorf("IsKeyID(%q) = %v", s, !want)
		}
	}
}
