package state

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// TestReregisterServer: an agent whose Server the state lost records it
// again, held for approval, without pool or token; never over an existing
// Server, never under another name, never under older rules.
func TestReregisterServer(t *testing.T) {
	rereg := func(rules uint32, name, uuid string) *roostv1.Command {
		return &roostv1.Command{RulesVersion: rules, Command: &roostv1.Command_ReregisterServer{ReregisterServer: &roostv1.ReregisterServer{
			Name: name, Identity: &roostv1.ServerIdentity{SystemUuid: uuid, PermanentMacs: []string{"52:54:00:00:00:02"}}, Inventory: inventory(16, 64),
			AgentVersion: "v1.2.3", Uid: "00000000-0000-4000-8000-00000000bbbb"}}}
	}
	h := newHarness(t, Options{})
	e := wantCode(t, h.apply(rereg(RulesReregister-1, uuidA, uuidA)).Err, codes.InvalidArgument)
	if !strings.Contains(e.Message, "no known command") {
		t.Errorf("under older rules: %q", e.Message)
	}
	// The certificate's name must be the identity's.
	wantCode(t, h.apply(rereg(RulesReregister, "4c4c4544-0042-3510-8052-b4c04f4d4e32", uuidA)).Err, codes.PermissionDenied)
	wantCode(t, h.apply(rereg(RulesReregister, "mac-0123456789abcdef0123", uuidA)).Err, codes.PermissionDenied)
	if _, err := h.f.Get("Server", uuidA); err == nil {
		t.Fatal("a refused command recorded the Server")
	}

	h.mustApply(rereg(RulesReregister, uuidA, uuidA))
	s := getServer(t, h.f, uuidA)
	cond := findCondition(s.GetStatus().GetConditions(), ConditionApproved)
	if s.GetStatus().GetState() != ServerEnrolling || cond.GetStatus() != "False" || cond.GetReason() != ReasonReregistered ||
		s.GetSpec().GetPool() != "" || s.GetStatus().GetEnrollmentToken() != "" || s.GetMetadata().GetLabels()["roost.io/cpus"] != "16" ||
		s.GetSpec().GetSystemUuid() != uuidA || s.GetStatus().GetAgentVersion() != "v1.2.3" {
		t.Fatalf("re-registered Server %v", s)
	}
	// Its agent connects: it waits for an operator, as with a token that
	// requires approval.
	h.mustApply(statusCmd(&roostv1.UpdateServerStatus{Name: uuidA, Connected: true}))
	if st := getServer(t, h.f, uuidA).GetStatus().GetState(); st != ServerPendingApproval {
		t.Errorf("state after connecting: %s, want %s", st, ServerPendingApproval)
	}
	wantCode(t, h.apply(rereg(RulesReregister, uuidA, uuidA)).Err, codes.AlreadyExists)
}
