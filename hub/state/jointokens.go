package state

import (
	"crypto/subtle"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// putJoinToken creates or replaces a join token by id.
func (a *applier) putJoinToken(c *roostv1.PutJoinToken) *apierror.Error {
	t := c.GetToken()
	var bad []apierror.Violation
	if t.GetId() == "" {
		bad = append(bad, apierror.Violation{Field: "token.id", Message: "is required"})
	}
	if t.GetSecretSha256() == "" {
		bad = append(bad, apierror.Violation{Field: "token.secretSha256", Message: "is required"})
	}
	if t.GetMaxUses() < 0 {
		bad = append(bad, apierror.Violation{Field: "token.maxUses", Message: "must be ≥ 0"})
	}
	if len(bad) > 0 {
		return apierror.Invalid("invalid join token", bad...)
	}
	if err := a.txn.Insert(tableJoinTokens, t); err != nil {
		return internal(err)
	}
	return nil
}

// Join token statuses (JoinTokenStatus).
const (
	JoinTokenActive  = "Active"
	JoinTokenExpired = "Expired"
	JoinTokenUsedUp  = "UsedUp"
	JoinTokenRevoked = "Revoked"
)

// JoinTokenStatus says whether t may be used at now: Revoked (revoked_at
// set), Expired (expires_at ≤ now; unset means never), UsedUp (uses ≥
// max_uses; 0 means unlimited) or Active, in that order.
func JoinTokenStatus(t *roostv1.JoinToken, now time.Time) string {
	switch {
	case t.GetRevokedAt() != nil:
		return JoinTokenRevoked
	case t.GetExpiresAt() != nil && !now.Before(t.GetExpiresAt().AsTime()):
		return JoinTokenExpired
	case t.GetMaxUses() > 0 && t.GetUses() >= t.GetMaxUses():
		return JoinTokenUsedUp
	}
	return JoinTokenActive
}

// JoinTokenRefused is the one refusal message (FailedPrecondition) for a
// join token whose id is unknown or whose secret is wrong: a caller cannot
// tell the two apart, so it cannot probe for token ids.
const JoinTokenRefused = "join token refused: unknown token or wrong secret (make a new one with 'roostctl hub join')"

// CheckJoinToken applies the rules of UseJoinToken to t (nil: no token
// with id) at now: nil when secretSHA256 (hex sha256 of the secret)
// matches, compared in constant time, and t is Active (JoinTokenStatus);
// otherwise FailedPrecondition, with JoinTokenRefused for an unknown id or
// a wrong secret. Members call it before proposing a use (see
// FSM.JoinToken); the FSM calls it again, where concurrent uses race.
func CheckJoinToken(t *roostv1.JoinToken, id, secretSHA256 string, now time.Time) *apierror.Error {
	if t == nil || id == "" {
		subtle.ConstantTimeCompare(make([]byte, 64), []byte(secretSHA256))
		return apierror.FailedPrecondition("%s", JoinTokenRefused)
	}
	if subtle.ConstantTimeCompare([]byte(t.GetSecretSha256()), []byte(secretSHA256)) != 1 {
		return apierror.FailedPrecondition("%s", JoinTokenRefused)
	}
	switch JoinTokenStatus(t, now) {
	case JoinTokenRevoked:
		return apierror.FailedPrecondition("join token %q was revoked at %s", t.GetId(), t.GetRevokedAt().AsTime().UTC().Format(time.RFC3339))
	case JoinTokenExpired:
		return apierror.FailedPrecondition("join token %q expired at %s", t.GetId(),
			t.GetExpiresAt().AsTime().UTC().Format(time.RFC3339))
	case JoinTokenUsedUp:
		return apierror.FailedPrecondition("join token %q is used up (%d of %d uses)", t.GetId(), t.GetUses(), t.GetMaxUses())
	}
	return nil
}

// JoinToken returns the stored join token with id without copying it
// (callers must not modify it), or nil when there is none.
func (f *FSM) JoinToken(id string) *roostv1.JoinToken {
	raw, err := f.db.Load().Txn(false).First(tableJoinTokens, indexID, id)
	if err != nil || raw == nil {
		return nil
	}
	return raw.(*roostv1.JoinToken)
}

// useJoinToken counts one use of a join token: CheckJoinToken at
// Command.time.
func (a *applier) useJoinToken(c *roostv1.UseJoinToken) *apierror.Error {
	raw, err := a.txn.First(tableJoinTokens, indexID, c.GetId())
	if err != nil {
		return internal(err)
	}
	var t *roostv1.JoinToken
	if raw != nil {
		t = raw.(*roostv1.JoinToken)
	}
	var now time.Time
	if t.GetExpiresAt() != nil || t.GetRevokedAt() != nil {
		ts, aerr := a.now()
		if aerr != nil {
			return aerr
		}
		now = ts.AsTime()
	}
	if aerr := CheckJoinToken(t, c.GetId(), c.GetSecretSha256(), now); aerr != nil {
		return aerr
	}
	next := proto.Clone(t).(*roostv1.JoinToken)
	next.Uses++
	if err := a.txn.Insert(tableJoinTokens, next); err != nil {
		return internal(err)
	}
	return nil
}

// revokeJoinTokens sets revoked_at on the named join tokens (the
// RevokeJoinTokens command): all or nothing, NotFound on an unknown id,
// and an unknown command under rules older than
// RulesJoinTokenRevokeCommand. Each id gets an ApplyResult with action
// "revoked", or "unchanged" when it was revoked already.
func (a *applier) revokeJoinTokens(c *roostv1.RevokeJoinTokens) ([]*roostv1.ApplyResult, *apierror.Error) {
	if a.rules < RulesJoinTokenRevokeCommand {
		return nil, a.unknownCommand()
	}
	now, aerr := a.now()
	if aerr != nil {
		return nil, aerr
	}
	if len(c.GetIds()) == 0 {
		return nil, apierror.Invalid("no join token to revoke", apierror.Violation{Field: "ids", Message: "is required"})
	}
	var results []*roostv1.ApplyResult
	for _, id := range c.GetIds() {
		raw, err := a.txn.First(tableJoinTokens, indexID, id)
		if err != nil {
			return nil, internal(err)
		}
		if raw == nil || id == "" {
			return nil, &apierror.Error{Code: codes.NotFound, Message: fmt.Sprintf("join token %q not found", id)}
		}
		t := raw.(*roostv1.JoinToken)
		res := &roostv1.ApplyResult{Kind: "JoinToken", Name: id, Action: "unchanged"}
		results = append(results, res)
		if t.GetRevokedAt() != nil {
			continue
		}
		next := proto.Clone(t).(*roostv1.JoinToken)
		next.RevokedAt = now
		if err := a.txn.Insert(tableJoinTokens, next); err != nil {
			return nil, internal(err)
		}
		res.Action = "revoked"
	}
	return results, nil
}

// JoinTokens returns copies of the stored join tokens (hashes only), sorted
// by id.
func (f *FSM) JoinTokens() []*roostv1.JoinToken {
	var out []*roostv1.JoinToken
	it, err := f.db.Load().Txn(false).Get(tableJoinTokens, indexID)
	if err != nil {
		return nil
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, proto.Clone(raw.(*roostv1.JoinToken)).(*roostv1.JoinToken))
	}
	return out
}
