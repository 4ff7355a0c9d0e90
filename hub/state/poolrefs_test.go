package state

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// withRules sets cmd's apply rules version.
func withRules(rules uint32, cmd *roostv1.Command) *roostv1.Command {
	cmd.RulesVersion = rules
	return cmd
}

// prePool is Pool "px" of Cluster "prod" without replicas.
func prePool(h *harness) {
	h.mustApply(h.objects(append(baseObjects(), poolObj("px", "prod", func(s *roostv1.PoolSpec) { s.Replicas = nil }))...))
}

func toPool(pool string) func(*roostv1.EnrollmentTokenSpec) {
	return func(s *roostv1.EnrollmentTokenSpec) { s.Pool = pool }
}

// TestDeletePoolPreAssigned: under rulesPoolReferences a Pool is not
// deleted while an EnrollmentToken that can still enroll, or a Server that
// is not Decommissioned, pre-assigns servers to it.
func TestDeletePoolPreAssigned(t *testing.T) {
	del := func(rules uint32) *roostv1.Command { return withRules(rules, deleteCmd("Pool", "px")) }

	t.Run("an active token", func(t *testing.T) {
		h := newHarness(t, Options{})
		prePool(h)
		h.mustApply(withRules(rulesPoolReferences, putEnrollTokenCmd("abcdef", tokSecret, toPool("px"))))
		e := wantCode(t, h.apply(del(rulesPoolReferences)).Err, codes.FailedPrecondition)
		want := `Pool "px" is used by EnrollmentToken "abcdef": revoke the enrollment tokens that pre-assign servers to it ('roostctl token revoke abcdef'; ` +
			`create new ones without --pool, or with another pool, if you still need them)`
		if e.Message != want {
			t.Errorf("error\n%s\nwant\n%s", e.Message, want)
		}
		// Revoked: it enrolls nothing any more.
		h.mustApply(withRules(rulesPoolReferences, &roostv1.Command{Command: &roostv1.Command_RevokeEnrollmentToken{
			RevokeEnrollmentToken: &roostv1.RevokeEnrollmentToken{Name: "abcdef"}}}))
		h.mustApply(del(rulesPoolReferences))
	})

	t.Run("an expiring token", func(t *testing.T) {
		h := newHarness(t, Options{})
		prePool(h)
		exp := timeAt(h.idx + 10)
		h.mustApply(withRules(rulesPoolReferences, putEnrollTokenCmd("abcdef", tokSecret, toPool("px"),
			func(s *roostv1.EnrollmentTokenSpec) { s.ExpiresAt = timestamppb.New(exp) })))
		before := del(rulesPoolReferences)
		before.Time = timestamppb.New(exp.Add(-time.Second))
		wantCode(t, h.apply(before).Err, codes.FailedPrecondition)
		// At expiresAt it has expired (the command's time decides, as
		// for enrolling).
		at := del(rulesPoolReferences)
		at.Time = timestamppb.New(exp)
		h.mustApply(at)
	})

	t.Run("a used-up token and its server", func(t *testing.T) {
		h := newHarness(t, Options{})
		prePool(h)
		h.mustApply(withRules(rulesPoolReferences, putEnrollTokenCmd("abcdef", tokSecret, toPool("px"),
			func(s *roostv1.EnrollmentTokenSpec) { s.MaxUses = 1 })))
		h.mustApply(withRules(rulesPoolReferences, enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:01"}, inventory(16, 64))))
		// The token is used up; the Server it enrolled (still Enrolling)
		// is pre-assigned.
		e := wantCode(t, h.apply(del(rulesPoolReferences)).Err, codes.FailedPrecondition)
		want := `Pool "px" is used by Server "` + uuidA + `": decommission the servers pre-assigned to it, which clears their pool ` +
			`('roostctl server decommission ` + uuidA + `'; they come back by enrolling again with a token made without --pool, or with another pool)`
		if e.Message != want {
			t.Errorf("error\n%s\nwant\n%s", e.Message, want)
		}
		h.mustApply(withRules(rulesPoolReferences, modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_DECOMMISSION)))
		h.mustApply(del(rulesPoolReferences))
	})

	t.Run("a decommissioned server that kept its pool", func(t *testing.T) {
		// Decommissioned under rules 1, the Server keeps spec.pool; it is
		// out of the fleet, and enrolling again sets its pool anew.
		h := newHarness(t, Options{})
		prePool(h)
		h.mustApply(putEnrollTokenCmd("abcdef", tokSecret, toPool("px"), func(s *roostv1.EnrollmentTokenSpec) { s.MaxUses = 1 }))
		h.mustApply(enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:01"}, inventory(16, 64)))
		h.mustApply(modifyCmd(uuidA, roostv1.ServerAction_SERVER_ACTION_DECOMMISSION))
		if p := getServer(t, h.f, uuidA).GetSpec().GetPool(); p != "px" {
			t.Fatalf("spec.pool = %q after a rules 1 decommission, want px", p)
		}
		h.mustApply(del(rulesPoolReferences))
	})

	t.Run("claimed, pre-assigned and tokens together", func(t *testing.T) {
		h := newHarness(t, Options{})
		prePool(h)
		h.mustApply(withRules(rulesPoolReferences, putEnrollTokenCmd("ghijkl", "ghijkl.0123456789abcdef", toPool("px"))))
		h.mustApply(withRules(rulesPoolReferences, putEnrollTokenCmd("abcdef", tokSecret, toPool("px"))))
		h.mustApply(withRules(rulesPoolReferences, putEnrollTokenCmd("other0", "other0.0123456789abcdef")))
		for _, s := range []struct{ secret, uuid, mac string }{
			{tokSecret, uuidA, "52:54:00:00:00:01"},
			{tokSecret, uuidB, "52:54:00:00:00:02"},
			{"other0.0123456789abcdef", "4c4c4544-0042-3510-8052-b4c04f4d4e33", "52:54:00:00:00:03"},
		} {
			h.mustApply(withRules(rulesPoolReferences, enrollCmd(s.secret, s.uuid, []string{s.mac}, inventory(16, 64))))
			h.mustApply(withRules(rulesPoolReferences, statusCmd(&roostv1.UpdateServerStatus{Name: s.uuid, Connected: true})))
		}
		h.mustApply(withRules(rulesPoolReferences, createMachinesCmd(false, newMachine("px-abcde", uuidA, "px"))))
		e := wantCode(t, h.apply(del(rulesPoolReferences)).Err, codes.FailedPrecondition)
		// The claimed Server's Machine is named, not the Server itself;
		// the Server of another token is not pre-assigned.
		want := `Pool "px" is used by Server "` + uuidB + `", Machine "px-abcde", EnrollmentToken "abcdef", EnrollmentToken "ghijkl": ` +
			`release its servers first ('roostctl pool unassign px SERVER...'; with replicas, set spec.replicas to 0); ` +
			`revoke the enrollment tokens that pre-assign servers to it ('roostctl token revoke abcdef ghijkl'; ` +
			`create new ones without --pool, or with another pool, if you still need them); ` +
			`decommission the servers pre-assigned to it, which clears their pool ('roostctl server decommission ` + uuidB + `'; ` +
			`they come back by enrolling again with a token made without --pool, or with another pool)`
		if e.Message != want {
			t.Errorf("error\n%s\nwant\n%s", e.Message, want)
		}
		// Freed one by one, the Pool goes.
		h.mustApply(withRules(rulesPoolReferences, deleteMachinesCmd("px", nil, []string{uuidA})))
		h.mustApply(withRules(rulesPoolReferences, modifyCmd(uuidB, roostv1.ServerAction_SERVER_ACTION_DECOMMISSION)))
		for _, tok := range []string{"abcdef", "ghijkl"} {
			h.mustApply(withRules(rulesPoolReferences, &roostv1.Command{Command: &roostv1.Command_RevokeEnrollmentToken{
				RevokeEnrollmentToken: &roostv1.RevokeEnrollmentToken{Name: tok}}}))
		}
		if srv := getServer(t, h.f, uuidA); srv.GetSpec().GetPool() != "" || srv.GetStatus().GetState() != ServerAvailable {
			t.Fatalf("released Server: pool %q, state %s", srv.GetSpec().GetPool(), srv.GetStatus().GetState())
		}
		h.mustApply(del(rulesPoolReferences))
	})

	t.Run("older rules delete it as before", func(t *testing.T) {
		for _, rules := range []uint32{0, 1, 2} {
			h := newHarness(t, Options{})
			prePool(h)
			h.mustApply(putEnrollTokenCmd("abcdef", tokSecret, toPool("px")))
			h.mustApply(enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:01"}, inventory(16, 64)))
			h.mustApply(del(rules))
			if tok := getToken(t, h.f, "abcdef"); tok.GetSpec().GetPool() != "px" || tok.GetStatus().GetRevoked() {
				t.Errorf("rules %d: token %v", rules, tok)
			}
			if p := getServer(t, h.f, uuidA).GetSpec().GetPool(); p != "px" {
				t.Errorf("rules %d: Server spec.pool = %q, want px (unchanged)", rules, p)
			}
		}
	})

	t.Run("another pool is not held", func(t *testing.T) {
		h := newHarness(t, Options{})
		prePool(h)
		h.mustApply(h.objects(poolObj("py", "prod", func(s *roostv1.PoolSpec) { s.Replicas = nil })))
		h.mustApply(withRules(rulesPoolReferences, putEnrollTokenCmd("abcdef", tokSecret, toPool("px"))))
		h.mustApply(withRules(rulesPoolReferences, enrollCmd(tokSecret, uuidA, []string{"52:54:00:00:00:01"}, inventory(16, 64))))
		h.mustApply(withRules(rulesPoolReferences, deleteCmd("Pool", "py")))
		wantCode(t, h.apply(del(rulesPoolReferences)).Err, codes.FailedPrecondition)
	})
}

// TestPreAssignToMissingPool: a token or a Machine cannot name a Pool that
// does not exist, under any rules.
func TestPreAssignToMissingPool(t *testing.T) {
	for _, rules := range []uint32{0, rulesPoolReferences} {
		h := newHarness(t, Options{})
		prePool(h)
		e := wantCode(t, h.apply(withRules(rules, putEnrollTokenCmd("abcdef", tokSecret, toPool("nope")))).Err, codes.FailedPrecondition)
		if !strings.Contains(e.Error(), `Pool "nope" does not exist`) {
			t.Errorf("rules %d: token for a missing pool: %v", rules, e)
		}
		availableServer(h, uuidA, "52:54:00:00:00:01")
		e = wantCode(t, h.apply(withRules(rules, createMachinesCmd(false, newMachine("nope-abcde", uuidA, "nope")))).Err, codes.NotFound)
		if !strings.Contains(e.Error(), `Pool "nope" not found`) {
			t.Errorf("rules %d: assigning to a missing pool: %v", rules, e)
		}
	}
}
