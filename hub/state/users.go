package state

import (
	"fmt"
	"regexp"

	"github.com/hashicorp/go-memdb"
	"google.golang.org/protobuf/proto"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/internal/tlsconfig"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Users: the people with client certificates from the hub CA (roostctl
// user create), each with a role and the serials of their certificates,
// and their revocation, which every member checks on every call
// (FSM.CertificateRevoked).

const (
	// tableUsers holds roostv1.User rows by name.
	tableUsers = "users"
	// indexRevoked indexes the certificate serials of revoked users.
	indexRevoked = "revoked"
)

// userName is the form of a user name: a DNS label.
var userName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// CheckUserName validates a user name (a DNS label: lower-case letters,
// digits and "-", at most 63 characters); field names the violation.
func CheckUserName(name, field string) []apierror.Violation {
	if !userName.MatchString(name) {
		return []apierror.Violation{{Field: field, Message: fmt.Sprintf("%q is not a DNS label", name),
			Hint: "use lower-case letters, digits and '-', at most 63 characters, e.g. jane-doe"}}
	}
	return nil
}

// IsUserRole says whether role is a role a user may have: RoleAdmin,
// RoleOperator, RoleViewer or RoleAuditor (not RoleMember or RoleAgent).
func IsUserRole(role string) bool {
	for _, r := range tlsconfig.UserRoles {
		if r == role {
			return true
		}
	}
	return false
}

func usersTable() *memdb.TableSchema {
	return &memdb.TableSchema{Name: tableUsers, Indexes: map[string]*memdb.IndexSchema{
		indexID:      {Name: indexID, Unique: true, Indexer: keyIndexer[*roostv1.User](func(u *roostv1.User) string { return u.GetName() })},
		indexRevoked: {Name: indexRevoked, AllowMissing: true, Indexer: revokedIndexer{}},
	}}
}

// revokedIndexer indexes a revoked user by the serials of all their
// certificates, so the check of a caller's certificate is one lookup.
type revokedIndexer struct{}

// FromObject implements memdb.MultiIndexer.
func (revokedIndexer) FromObject(raw any) (bool, [][]byte, error) {
	u, ok := raw.(*roostv1.User)
	if !ok {
		return false, nil, fmt.Errorf("row has type %T, want *roostv1.User", raw)
	}
	if u.GetRevokedAt() == nil {
		return false, nil, nil
	}
	var keys [][]byte
	for _, c := range u.GetCertificates() {
		if c.GetSerial() != "" {
			keys = append(keys, []byte(c.GetSerial()+"\x00"))
		}
	}
	return len(keys) > 0, keys, nil
}

// FromArgs implements memdb.Indexer: one serial argument.
func (revokedIndexer) FromArgs(args ...any) ([]byte, error) {
	return stringArg(args)
}

// checkUser validates a user as stored; field prefixes the violations.
func checkUser(u *roostv1.User, field string) []apierror.Violation {
	vs := CheckUserName(u.GetName(), field+".name")
	if !IsUserRole(u.GetRole()) {
		vs = append(vs, apierror.Violation{Field: field + ".role", Message: fmt.Sprintf("%q is not a user role", u.GetRole())})
	}
	return vs
}

// putUserCertificate records a certificate issued to a user (see
// roostv1.PutUserCertificate). Errors: InvalidArgument (name, role,
// certificate without serial), AlreadyExists (create of an existing user),
// NotFound (a certificate for an unknown user), FailedPrecondition (a
// revoked user, or another role than the user's).
func (a *applier) putUserCertificate(c *roostv1.PutUserCertificate) *apierror.Error {
	if a.rules < RulesUsers {
		return a.unknownCommand()
	}
	vs := checkUser(&roostv1.User{Name: c.GetName(), Role: c.GetRole()}, "user")
	if c.GetCertificate().GetSerial() == "" {
		vs = append(vs, apierror.Violation{Field: "certificate.serial", Message: "is required"})
	}
	if len(vs) > 0 {
		return apierror.Invalid("invalid user certificate", vs...)
	}
	now, aerr := a.now()
	if aerr != nil {
		return aerr
	}
	raw, err := a.txn.First(tableUsers, indexID, c.GetName())
	if err != nil {
		return internal(err)
	}
	var next *roostv1.User
	switch {
	case raw != nil && c.GetCreate():
		return apierror.AlreadyExists("User", c.GetName())
	case raw == nil && !c.GetCreate():
		return apierror.NotFound("User", c.GetName())
	case raw == nil:
		next = &roostv1.User{Name: c.GetName(), Role: c.GetRole(), CreatedAt: now}
	default:
		next = proto.Clone(raw.(*roostv1.User)).(*roostv1.User)
		if next.GetRevokedAt() != nil {
			return apierror.FailedPrecondition("user %s was revoked; create a user with another name", c.GetName())
		}
		if next.GetRole() != c.GetRole() {
			return apierror.FailedPrecondition("user %s has role %s, not %s", c.GetName(), next.GetRole(), c.GetRole())
		}
	}
	next.Certificates = append(next.Certificates, proto.Clone(c.GetCertificate()).(*roostv1.UserCertificate))
	if err := a.txn.Insert(tableUsers, next); err != nil {
		return internal(err)
	}
	return nil
}

// revokeUser sets a user's revoked_at (the command's time), which refuses
// all their certificates. Revoking a revoked user changes nothing.
// Errors: NotFound.
func (a *applier) revokeUser(c *roostv1.RevokeUser) *apierror.Error {
	if a.rules < RulesUsers {
		return a.unknownCommand()
	}
	raw, err := a.txn.First(tableUsers, indexID, c.GetName())
	if err != nil {
		return internal(err)
	}
	if raw == nil {
		return apierror.NotFound("User", c.GetName())
	}
	if raw.(*roostv1.User).GetRevokedAt() != nil {
		return nil
	}
	now, aerr := a.now()
	if aerr != nil {
		return aerr
	}
	next := proto.Clone(raw.(*roostv1.User)).(*roostv1.User)
	next.RevokedAt = now
	if err := a.txn.Insert(tableUsers, next); err != nil {
		return internal(err)
	}
	return nil
}

// Users returns copies of the users, sorted by name.
func (f *FSM) Users() []*roostv1.User {
	it, err := f.db.Load().Txn(false).Get(tableUsers, indexID)
	if err != nil {
		return nil
	}
	var out []*roostv1.User
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, proto.Clone(raw.(*roostv1.User)).(*roostv1.User))
	}
	return out
}

// User returns a copy of the user named name, or nil.
func (f *FSM) User(name string) *roostv1.User {
	raw, err := f.db.Load().Txn(false).First(tableUsers, indexID, name)
	if err != nil || raw == nil {
		return nil
	}
	return proto.Clone(raw.(*roostv1.User)).(*roostv1.User)
}

// CertificateRevoked says whether serial (ca.SerialHex) is a certificate
// of a revoked user: one index lookup, for the check of every call.
func (f *FSM) CertificateRevoked(serial string) bool {
	if serial == "" {
		return false
	}
	raw, err := f.db.Load().Txn(false).First(tableUsers, indexRevoked, serial)
	return err == nil && raw != nil
}
