package state

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/roostfleet/roost/internal/tlsconfig"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func putUserCmd(name, role, serial string, create bool) *roostv1.Command {
	return withRules(RulesUsers, &roostv1.Command{Command: &roostv1.Command_PutUserCertificate{PutUserCertificate: &roostv1.PutUserCertificate{
		Name: name, Role: role, Create: create, Certificate: &roostv1.UserCertificate{Serial: serial}}}})
}

func revokeUserCmd(name string) *roostv1.Command {
	return withRules(RulesUsers, &roostv1.Command{Command: &roostv1.Command_RevokeUser{RevokeUser: &roostv1.RevokeUser{Name: name}}})
}

func TestUsers(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(putUserCmd("jane", tlsconfig.RoleOperator, "a1", true))
	h.mustApply(putUserCmd("bob", tlsconfig.RoleViewer, "b1", true))
	h.mustApply(putUserCmd("jane", tlsconfig.RoleOperator, "a2", false)) // renew
	wantCode(t, h.apply(putUserCmd("jane", tlsconfig.RoleOperator, "a3", true)).Err, codes.AlreadyExists)
	wantCode(t, h.apply(putUserCmd("jane", tlsconfig.RoleAdmin, "a3", false)).Err, codes.FailedPrecondition)
	wantCode(t, h.apply(putUserCmd("nobody", tlsconfig.RoleViewer, "n1", false)).Err, codes.NotFound)
	wantCode(t, h.apply(putUserCmd("Jane!", tlsconfig.RoleViewer, "x", true)).Err, codes.InvalidArgument)
	wantCode(t, h.apply(putUserCmd("m", tlsconfig.RoleMember, "x", true)).Err, codes.InvalidArgument)
	wantCode(t, h.apply(putUserCmd("m", tlsconfig.RoleViewer, "", true)).Err, codes.InvalidArgument)

	users := h.f.Users()
	if len(users) != 2 || users[0].GetName() != "bob" || len(users[1].GetCertificates()) != 2 {
		t.Fatalf("Users = %v, want bob and jane with 2 certificates", users)
	}
	if h.f.CertificateRevoked("a1") {
		t.Fatal("a1 revoked before the revocation")
	}
	h.mustApply(revokeUserCmd("jane"))
	for _, s := range []string{"a1", "a2"} {
		if !h.f.CertificateRevoked(s) {
			t.Errorf("CertificateRevoked(%s) = false after revoking jane", s)
		}
	}
	if h.f.CertificateRevoked("b1") || h.f.CertificateRevoked("") {
		t.Error("bob's certificate or the empty serial counts as revoked")
	}
	if h.f.User("jane").GetRevokedAt() == nil {
		t.Error("jane has no revoked_at")
	}
	h.mustApply(revokeUserCmd("jane")) // again: no change
	wantCode(t, h.apply(putUserCmd("jane", tlsconfig.RoleOperator, "a3", false)).Err, codes.FailedPrecondition)
	wantCode(t, h.apply(revokeUserCmd("nobody")).Err, codes.NotFound)

	// Older rules do not know the commands.
	wantCode(t, h.apply(withRules(RulesUsers-1, putUserCmd("eve", tlsconfig.RoleViewer, "e1", true))).Err, codes.InvalidArgument)
	wantCode(t, h.apply(withRules(RulesUsers-1, revokeUserCmd("bob"))).Err, codes.InvalidArgument)

	// Snapshot and restore keep users and revocations.
	g := restoreNew(t, snapshotBytes(t, h.f))
	if !g.CertificateRevoked("a2") || g.CertificateRevoked("b1") || len(g.Users()) != 2 {
		t.Fatalf("restored users %v lost a revocation or a user", g.Users())
	}
}

// TestRestoreKeepsUsers: restoring a state saved before a user was
// created or revoked keeps the user and the revocation.
func TestRestoreKeepsUsers(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustApply(initCACmd("CERT-A", "KEY-A"))
	h.mustApply(putUserCmd("jane", tlsconfig.RoleOperator, "a1", true))
	h.mustApply(putUserCmd("old", tlsconfig.RoleViewer, "o1", true))
	data, _, err := h.f.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	h.mustApply(revokeUserCmd("jane"))
	h.mustApply(putUserCmd("bob", tlsconfig.RoleViewer, "b1", true))
	payload, err := h.f.RestorePayload(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.f.Restore(ioNopCloser(payload)); err != nil {
		t.Fatal(err)
	}
	if !h.f.CertificateRevoked("a1") {
		t.Error("the restore made jane's revoked certificate valid again")
	}
	if h.f.User("bob") == nil || h.f.User("old") == nil {
		t.Errorf("the restore lost a user: %v", h.f.Users())
	}
}
