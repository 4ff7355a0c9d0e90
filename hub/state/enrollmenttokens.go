package state

import (
	"crypto/subtle"
	"fmt"
	"regexp"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

const kindToken = "EnrollmentToken"

// TokenNameRE is the form of an EnrollmentToken's name: the 6-character id
// of a kubeadm-style token "<id>.<secret>".
var TokenNameRE = regexp.MustCompile(`^[a-z0-9]{6}$`)

func (a *applier) getToken(name string) (*roostv1.EnrollmentToken, *apierror.Error) {
	raw, err := a.txn.First(kindToken, indexID, name)
	if err != nil {
		return nil, internal(err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*roostv1.Object).GetEnrollmentToken(), nil
}

// putEnrollmentToken creates an EnrollmentToken.
func (a *applier) putEnrollmentToken(c *roostv1.PutEnrollmentToken) *apierror.Error {
	now, aerr := a.now()
	if aerr != nil {
		return aerr
	}
	in := c.GetToken()
	name := in.GetMetadata().GetName()
	var bad []apierror.Violation
	if !TokenNameRE.MatchString(name) {
		bad = append(bad, apierror.Violation{Field: "token.metadata.name", Message: fmt.Sprintf("%q is not 6 lower-case letters or digits", name)})
	}
	if len(in.GetSpec().GetSecretSha256()) != 64 {
		bad = append(bad, apierror.Violation{Field: "token.spec.secretSha256", Message: "must be 64 hex digits"})
	}
	if in.GetSpec().GetMaxUses() < 0 {
		bad = append(bad, apierror.Violation{Field: "token.spec.maxUses", Message: "must be ≥ 0"})
	}
	if c.GetUid() == "" {
		bad = append(bad, apierror.Violation{Field: "uid", Message: "is required"})
	}
	if len(bad) > 0 {
		return apierror.Invalid("invalid enrollment token", bad...)
	}
	old, aerr := a.getToken(name)
	if aerr != nil {
		return aerr
	}
	if old != nil {
		return apierror.AlreadyExists(kindToken, name)
	}
	if p := in.GetSpec().GetPool(); p != "" {
		ok, err := exists(a.txn, "Pool", p)
		if err != nil {
			return internal(err)
		}
		if !ok {
			return apierror.FailedPreconditionFields(fmt.Sprintf("Pool %q does not exist", p),
				apierror.Violation{Field: "token.spec.pool", Message: fmt.Sprintf("Pool %q does not exist", p)})
		}
	}
	t := &roostv1.EnrollmentToken{
		ApiVersion: resource.APIVersion, Kind: kindToken,
		Metadata: a.newMeta(name, c.GetUid(), now),
		Spec:     proto.Clone(in.GetSpec()).(*roostv1.EnrollmentTokenSpec),
		Status:   &roostv1.EnrollmentTokenStatus{},
	}
	if t.Spec == nil {
		t.Spec = &roostv1.EnrollmentTokenSpec{}
	}
	t.Metadata.Labels = in.GetMetadata().GetLabels()
	return a.put(t, true)
}

// revokeEnrollmentToken marks a token revoked (idempotent).
func (a *applier) revokeEnrollmentToken(c *roostv1.RevokeEnrollmentToken) *apierror.Error {
	now, aerr := a.now()
	if aerr != nil {
		return aerr
	}
	old, aerr := a.getToken(c.GetName())
	if aerr != nil {
		return aerr
	}
	if old == nil {
		return apierror.NotFound(kindToken, c.GetName())
	}
	if old.GetStatus().GetRevoked() {
		return nil
	}
	t := proto.Clone(old).(*roostv1.EnrollmentToken)
	if t.Status == nil {
		t.Status = &roostv1.EnrollmentTokenStatus{}
	}
	t.Status.Revoked = true
	t.Status.RevokedAt = now
	a.touch(t.Metadata, false)
	return a.put(t, false)
}

func formatTime(ts *timestamppb.Timestamp) string {
	return ts.AsTime().UTC().Format(time.RFC3339)
}

// EnrollmentTokenRefused is the one refusal message (PermissionDenied) for
// an enrollment token whose name is unknown or whose secret is wrong: a
// caller cannot tell the two apart, so it cannot probe for token names.
const EnrollmentTokenRefused = "enrollment token refused: unknown token or wrong secret " +
	"(give the agent the whole token 'roostctl token create' printed; 'roostctl token list' shows the tokens that exist)"

// CheckEnrollmentToken applies the token rules of EnrollServer to t (nil:
// no token named name) at now: nil when secretSHA256 (hex sha256 of the
// whole secret) matches and the token is neither revoked, expired nor used
// up; otherwise PermissionDenied, with EnrollmentTokenRefused for an
// unknown name or a wrong secret. Members call it before proposing an
// enrollment (see FSM.EnrollmentToken); the FSM calls it again, where
// concurrent uses race.
func CheckEnrollmentToken(t *roostv1.EnrollmentToken, name, secretSHA256 string, now *timestamppb.Timestamp) *apierror.Error {
	if t == nil || name == "" {
		// Compare anyway, so an unknown name costs the time of a wrong secret.
		subtle.ConstantTimeCompare(make([]byte, 64), []byte(secretSHA256))
		return apierror.PermissionDenied("%s", EnrollmentTokenRefused)
	}
	if subtle.ConstantTimeCompare([]byte(t.GetSpec().GetSecretSha256()), []byte(secretSHA256)) != 1 {
		return apierror.PermissionDenied("%s", EnrollmentTokenRefused)
	}
	if t.GetStatus().GetRevoked() {
		if at := t.GetStatus().GetRevokedAt(); at != nil {
			return apierror.PermissionDenied("enrollment token %s revoked at %s", name, formatTime(at))
		}
		return apierror.PermissionDenied("enrollment token %s revoked", name)
	}
	if exp := t.GetSpec().GetExpiresAt(); exp != nil && !now.AsTime().Before(exp.AsTime()) {
		return apierror.PermissionDenied("enrollment token %s expired at %s", name, formatTime(exp))
	}
	if m := t.GetSpec().GetMaxUses(); m > 0 && t.GetStatus().GetUses() >= m {
		return apierror.PermissionDenied("enrollment token %s used up (%d/%d uses)", name, t.GetStatus().GetUses(), m)
	}
	return nil
}

// EnrollmentToken returns the stored EnrollmentToken named name without
// copying it (callers must not modify it), or nil when there is none.
func (f *FSM) EnrollmentToken(name string) *roostv1.EnrollmentToken {
	raw, err := f.db.Load().Txn(false).First(kindToken, indexID, name)
	if err != nil || raw == nil {
		return nil
	}
	return raw.(*roostv1.Object).GetEnrollmentToken()
}
