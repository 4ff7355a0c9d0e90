package state

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func TestInitCA(t *testing.T) {
	h := newHarness(t, Options{})
	if h.f.CA() != nil {
		t.Fatal("CA before InitCA")
	}
	wantCode(t, h.apply(initCACmd("", "key")).Err, codes.InvalidArgument)
	h.mustApply(initCACmd("cert", "key"))
	want := &roostv1.CertificateAuthority{CertificatePem: []byte("cert"), PrivateKeyPem: []byte("key")}
	ca := h.f.CA()
	if !proto.Equal(ca, want) {
		t.Fatalf("CA = %v", ca)
	}
	ca.CertificatePem[0] = 'X' // a copy
	e := wantCode(t, h.apply(initCACmd("other", "key2")).Err, codes.FailedPrecondition)
	if !strings.Contains(e.Message, "already") {
		t.Errorf("message = %q", e.Message)
	}
	if !proto.Equal(h.f.CA(), want) {
		t.Errorf("CA changed: %v", h.f.CA())
	}
}

func TestMembers(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(putMemberCmd("hub-b", "10.0.0.2:7000", "10.0.0.2:7443"))
	h.mustApply(putMemberCmd("hub-a", "10.0.0.1:7000", "10.0.0.1:7443"))
	h.mustApply(putMemberCmd("hub-b", "10.0.0.3:7000", "10.0.0.3:7443")) // replaces
	wantCode(t, h.apply(putMemberCmd("", "x", "y")).Err, codes.InvalidArgument)
	got := h.f.Members()
	want := []*roostv1.HubMember{
		{Id: "hub-a", RaftAddress: "10.0.0.1:7000", ApiAddress: "10.0.0.1:7443"},
		{Id: "hub-b", RaftAddress: "10.0.0.3:7000", ApiAddress: "10.0.0.3:7443"},
	}
	if len(got) != len(want) || !proto.Equal(got[0], want[0]) || !proto.Equal(got[1], want[1]) {
		t.Fatalf("Members = %v, want %v", got, want)
	}
	h.mustApply(deleteMemberCmd("hub-a"))
	wantCode(t, h.apply(deleteMemberCmd("hub-a")).Err, codes.NotFound)
	if got := h.f.Members(); len(got) != 1 || got[0].GetId() != "hub-b" {
		t.Errorf("Members = %v", got)
	}
}

func TestUseJoinToken(t *testing.T) {
	const secret = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"
	// Tokens are put at index 1..3 (times t0+1s..t0+3s).
	setup := []*roostv1.Command{
		putTokenCmd("tok", secret, t0.Add(time.Hour), 2),
		putTokenCmd("forever", secret, time.Time{}, 0),
		putTokenCmd("short", secret, t0.Add(10*time.Second), 0),
	}
	at := func(c *roostv1.Command, ts time.Time) *roostv1.Command {
		c.Time = timestamppb.New(ts)
		return c
	}
	type use struct {
		cmd  *roostv1.Command
		code codes.Code
		text string
	}
	cases := []struct {
		name     string
		uses     []use
		wantUses map[string]int32
	}{
		{"uses up to max", []use{
			{useTokenCmd("tok", secret), codes.OK, ""},
			{useTokenCmd("tok", secret), codes.OK, ""},
			{useTokenCmd("tok", secret), codes.FailedPrecondition, "used up (2 of 2 uses)"},
		}, map[string]int32{"tok": 2}},
		{"wrong secret does not count", []use{
			{useTokenCmd("tok", strings.Repeat("0", 64)), codes.FailedPrecondition, JoinTokenRefused},
			{useTokenCmd("tok", ""), codes.FailedPrecondition, JoinTokenRefused},
			{useTokenCmd("tok", secret), codes.OK, ""},
		}, map[string]int32{"tok": 1}},
		{"unknown", []use{
			{useTokenCmd("nope", secret), codes.FailedPrecondition, JoinTokenRefused},
			{useTokenCmd("", ""), codes.FailedPrecondition, JoinTokenRefused},
		}, map[string]int32{"tok": 0}},
		{"expiry is checked against the command time", []use{
			{at(useTokenCmd("short", secret), t0.Add(9*time.Second)), codes.OK, ""},
			{at(useTokenCmd("short", secret), t0.Add(10*time.Second)), codes.FailedPrecondition, "expired at 2026-11-03T02:00:10Z"},
			{at(useTokenCmd("short", secret), t0.Add(-time.Hour)), codes.OK, ""}, // the command's clock, not the wall clock
		}, map[string]int32{"short": 2}},
		{"revoked", []use{
			{useTokenCmd("forever", secret), codes.OK, ""},
			{&roostv1.Command{Command: &roostv1.Command_PutJoinToken{PutJoinToken: &roostv1.PutJoinToken{Token: &roostv1.JoinToken{
				Id: "forever", SecretSha256: secret, Uses: 1, RevokedAt: timestamppb.New(t0.Add(5 * time.Second)), ExpiresAt: timestamppb.New(t0.Add(5 * time.Second))}}}}, codes.OK, ""},
			{useTokenCmd("forever", secret), codes.FailedPrecondition, `join token "forever" was revoked at 2026-11-03T02:00:05Z`},
		}, map[string]int32{"forever": 1}},
		{"no expiry, unlimited uses", []use{
			{at(useTokenCmd("forever", secret), t0.Add(1000*time.Hour)), codes.OK, ""},
			{useTokenCmd("forever", secret), codes.OK, ""},
			{useTokenCmd("forever", secret), codes.OK, ""},
		}, map[string]int32{"forever": 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			for _, c := range setup {
				h.mustApply(proto.Clone(c).(*roostv1.Command))
			}
			for i, u := range tc.uses {
				res := h.apply(u.cmd)
				if u.code == codes.OK {
					if res.Err != nil {
						t.Fatalf("use %d: %v", i, res.Err)
					}
					continue
				}
				e := wantCode(t, res.Err, u.code)
				if !strings.Contains(e.Message, u.text) {
					t.Errorf("use %d: message %q does not contain %q", i, e.Message, u.text)
				}
			}
			for _, tok := range h.f.JoinTokens() {
				if want, ok := tc.wantUses[tok.GetId()]; ok && tok.GetUses() != want {
					t.Errorf("token %s uses = %d, want %d", tok.GetId(), tok.GetUses(), want)
				}
			}
		})
	}

	t.Run("invalid put", func(t *testing.T) {
		h := newHarness(t, Options{})
		wantCode(t, h.apply(putTokenCmd("", secret, time.Time{}, 0)).Err, codes.InvalidArgument)
		wantCode(t, h.apply(putTokenCmd("x", "", time.Time{}, 0)).Err, codes.InvalidArgument)
		wantCode(t, h.apply(putTokenCmd("x", secret, time.Time{}, -1)).Err, codes.InvalidArgument)
	})
}

func TestJoinTokenStatus(t *testing.T) {
	now := t0.Add(time.Hour)
	past, future := timestamppb.New(now.Add(-time.Second)), timestamppb.New(now.Add(time.Second))
	for _, tc := range []struct {
		tok  *roostv1.JoinToken
		want string
	}{
		{&roostv1.JoinToken{}, JoinTokenActive},
		{&roostv1.JoinToken{ExpiresAt: future, MaxUses: 2, Uses: 1}, JoinTokenActive},
		{&roostv1.JoinToken{ExpiresAt: timestamppb.New(now)}, JoinTokenExpired},
		{&roostv1.JoinToken{ExpiresAt: past, MaxUses: 1, Uses: 1}, JoinTokenExpired},
		{&roostv1.JoinToken{ExpiresAt: future, MaxUses: 1, Uses: 1}, JoinTokenUsedUp},
		{&roostv1.JoinToken{ExpiresAt: past, RevokedAt: past}, JoinTokenRevoked},
	} {
		if got := JoinTokenStatus(tc.tok, now); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.tok, got, tc.want)
		}
	}
}

func TestRevokeJoinTokens(t *testing.T) {
	const secret = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"
	revoke := func(rules uint32, ids ...string) *roostv1.Command {
		return &roostv1.Command{RulesVersion: rules, Command: &roostv1.Command_RevokeJoinTokens{RevokeJoinTokens: &roostv1.RevokeJoinTokens{Ids: ids}}}
	}
	h := newHarness(t, Options{})
	h.mustApply(putTokenCmd("a", secret, t0.Add(time.Hour), 5))
	h.mustApply(putTokenCmd("b", secret, time.Time{}, 0))
	// A use applied after the proposer read the token (uses 0) and before
	// the revocation keeps its count: the command changes only revoked_at.
	h.mustApply(useTokenCmd("a", secret))

	// Refused alike by members that do not know the command.
	e := wantCode(t, h.apply(revoke(RulesJoinTokenRevokeCommand-1, "a")).Err, codes.InvalidArgument)
	if !strings.Contains(e.Message, "no known command") {
		t.Errorf("under older rules: %q, want the unknown-command error", e.Message)
	}
	wantCode(t, h.apply(revoke(RulesJoinTokenRevokeCommand)).Err, codes.InvalidArgument)
	// All or nothing: an unknown id after a known one revokes neither.
	wantCode(t, h.apply(revoke(RulesJoinTokenRevokeCommand, "a", "nope")).Err, codes.NotFound)
	wantCode(t, h.apply(revoke(RulesJoinTokenRevokeCommand, "")).Err, codes.NotFound)
	for _, tok := range h.f.JoinTokens() {
		if tok.GetRevokedAt() != nil {
			t.Fatalf("token %s revoked by a failed command", tok.GetId())
		}
	}

	res := h.mustApply(revoke(RulesJoinTokenRevokeCommand, "a"))
	at := timeAt(h.idx)
	if len(res.Results) != 1 || res.Results[0].GetName() != "a" || res.Results[0].GetAction() != "revoked" {
		t.Errorf("results = %v, want a revoked", res.Results)
	}
	res = h.mustApply(revoke(RulesJoinTokenRevokeCommand, "b", "a"))
	if got := fmt.Sprintln(res.Results[0].GetAction(), res.Results[1].GetAction()); got != "revoked unchanged\n" {
		t.Errorf("second revocation actions = %q, want revoked unchanged", got)
	}
	toks := h.f.JoinTokens()
	a := toks[0]
	if a.GetUses() != 1 || a.GetMaxUses() != 5 || !a.GetRevokedAt().AsTime().Equal(at) || !a.GetExpiresAt().AsTime().Equal(t0.Add(time.Hour)) {
		t.Errorf("token a = %v, want uses 1 of 5, revoked at %s, expiry kept", a, at)
	}
	if toks[1].GetRevokedAt() == nil {
		t.Error("token b not revoked")
	}
	wantCode(t, h.apply(useTokenCmd("a", secret)).Err, codes.FailedPrecondition)
}
