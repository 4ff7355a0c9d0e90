package resource

import "time"

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
