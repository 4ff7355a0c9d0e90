package state

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func TestEnrollmentTokenRules(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(putEnrollTokenCmd("abcdef", tokSecret, func(s *roostv1.EnrollmentTokenSpec) {
		s.MaxUses = 2
		s.ExpiresAt = timestamppb.New(timeAt(10))
	}))
	macs := func(i int) []string { return []string{"52:54:00:00:00:0" + string(rune('0'+i))} }

	res := h.mustApply(enrollCmd(tokSecret, uuidA, macs(1), inventory(8, 16)))
	if len(res.Results) != 1 || res.Results[0].GetName() != uuidA || res.Results[0].GetAction() != ActionCreated {
		t.Fatalf("results = %v", res.Results)
	}
	before := h.f.Count("Server")
	refused := func(cmd *roostv1.Command, want string) {
		t.Helper()
		e := wantCode(t, h.apply(cmd).Err, codes.PermissionDenied)
		if !strings.Contains(e.Message, want) {
			t.Errorf("message %q, want it to contain %q", e.Message, want)
		}
		if n := h.f.Count("Server"); n != before {
			t.Errorf("a refused enrollment left %d servers, want %d", n, before)
		}
	}
	// One message for a wrong secret and an unknown name: no probing.
	refused(enrollCmd("abcdef.xxxxxxxxxxxxxxxx", "", macs(2), nil), EnrollmentTokenRefused)
	refused(enrollCmd("zzzzzz.0123456789abcdef", "", macs(2), nil), EnrollmentTokenRefused)
	h.mustApply(enrollCmd(tokSecret, "", macs(3), nil))
	before = h.f.Count("Server")
	refused(enrollCmd(tokSecret, "", macs(4), nil), "enrollment token abcdef used up (2/2 uses)")
	if u := getToken(t, h.f, "abcdef").GetStatus().GetUses(); u != 2 {
		t.Errorf("uses = %d, want 2", u)
	}

	// Expiry is checked against the command time.
	h.mustApply(putEnrollTokenCmd("ghijkl", "ghijkl.0123456789abcdef", func(s *roostv1.EnrollmentTokenSpec) {
		s.ExpiresAt = timestamppb.New(timeAt(h.idx + 2))
	}))
	h.idx += 5
	refused(enrollCmd("ghijkl.0123456789abcdef", "", macs(5), nil), "enrollment token ghijkl expired at ")

	// Revoked.
	h.mustApply(putEnrollTokenCmd("mnopqr", "mnopqr.0123456789abcdef"))
	h.mustApply(&roostv1.Command{Command: &roostv1.Command_RevokeEnrollmentToken{RevokeEnrollmentToken: &roostv1.RevokeEnrollmentToken{Name: "mnopqr"}}})
	refused(enrollCmd("mnopqr.0123456789abcdef", "", macs(6), nil), "enrollment token mnopqr revoked at ")
	// Revoking does not touch enrolled servers.
	if s := getServer(t, h.f, uuidA); s.GetStatus().GetState() != ServerEnrolling {
		t.Errorf("state = %q", s.GetStatus().GetState())
	}

	// Token creation rules.
	wantCode(t, h.apply(putEnrollTokenCmd("abcdef", tokSecret)).Err, codes.AlreadyExists)
	wantCode(t, h.apply(putEnrollTokenCmd("ABCDEF", tokSecret)).Err, codes.InvalidArgument)
	wantCode(t, h.apply(putEnrollTokenCmd("poolxx", "poolxx.0123456789abcdef", func(s *roostv1.EnrollmentTokenSpec) { s.Pool = "nope" })).Err, codes.FailedPrecondition)
	wantCode(t, h.apply(&roostv1.Command{Command: &roostv1.Command_RevokeEnrollmentToken{RevokeEnrollmentToken: &roostv1.RevokeEnrollmentToken{Name: "nope00"}}}).Err, codes.NotFound)
}
