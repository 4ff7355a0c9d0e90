package resource

import (
	"time"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Token lifetimes: the longest the hub issues (CreateEnrollmentToken and
// CreateJoinToken refuse longer ttlSeconds; roostctl checks --ttl first).
const (
	// MaxEnrollmentTokenTTL is 10 years (87,600 h); a ttl of 0 asks for an
	// enrollment token that never expires.
	MaxEnrollmentTokenTTL = 10 * 365 * 24 * time.Hour
	// MaxJoinTokenTTL is 30 days (720 h): a join token makes its holder a
	// hub member, so it should not outlive the work it was made for.
	MaxJoinTokenTTL = 30 * 24 * time.Hour
)

// TokenState is an EnrollmentToken's state at now: Revoked, Expired,
// UsedUp or Active. The hub enrolls only with an Active token; `roostctl
// get tokens` shows it as STATE.
func TokenState(t *roostv1.EnrollmentToken, now time.Time) string {
	switch {
	case t.GetStatus().GetRevoked():
		return "Revoked"
	case t.GetSpec().GetExpiresAt() != nil && !now.Before(t.GetSpec().GetExpiresAt().AsTime()):
		return "Expired"
	case t.GetSpec().GetMaxUses() > 0 && t.GetStatus().GetUses() >= t.GetSpec().GetMaxUses():
		return "UsedUp"
	}
	return "Active"
}
