package api

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/hub/state"
	"github.com/roostfleet/roost/internal/tlsconfig"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// HubService's users (roostctl user): the leader signs a client
// certificate for the user's CSR with the role in its Subject
// Organization and records its serial through Raft (PutUserCertificate);
// RevokeUser refuses all of a user's certificates on every member (see
// authorize). WhoAmI and AuthCheck answer about the caller.

const (
	// DefaultUserCertLifetime is a user certificate's lifetime when the
	// request gives none (roostctl user create --ttl).
	DefaultUserCertLifetime = 30 * 24 * time.Hour
	// MaxUserCertLifetime is the longest a user certificate may live.
	MaxUserCertLifetime = 366 * 24 * time.Hour
)

// userLifetime validates a request's ttl_seconds (0: the default).
func userLifetime(ttlSeconds int64) (time.Duration, []apierror.Violation) {
	if ttlSeconds == 0 {
		return DefaultUserCertLifetime, nil
	}
	ttl := time.Duration(ttlSeconds) * time.Second
	if ttlSeconds < 60 || ttl > MaxUserCertLifetime {
		return 0, []apierror.Violation{{Field: "ttlSeconds", Message: fmt.Sprintf("%d s is not between 1 minute and %v", ttlSeconds, MaxUserCertLifetime),
			Hint: "give e.g. --ttl 720h"}}
	}
	return ttl, nil
}

// checkUsersRules refuses user commands while a member runs a roost-hub
// that does not know them.
func (s *Server) checkUsersRules() error {
	if r := state.EffectiveRules(s.fsm.Members()); r < state.RulesUsers {
		return apierror.FailedPrecondition("a hub member runs a roost-hub too old for users (apply rules %d < %d; see 'roostctl hub members'): upgrade it first", r, state.RulesUsers)
	}
	return nil
}

// CreateUser signs the CSR for a new user and records them. Errors:
// InvalidArgument (name, role, ttl, CSR), AlreadyExists, FailedPrecondition
// (a member too old for users).
func (s *Server) CreateUser(ctx context.Context, req *roostv1.CreateUserRequest) (*roostv1.CreateUserResponse, error) {
	vs := state.CheckUserName(req.GetName(), "name")
	role, ok := tlsconfig.UserRoles[req.GetRole()]
	if !ok {
		vs = append(vs, apierror.Violation{Field: "role", Message: fmt.Sprintf("%q is not a role", req.GetRole()), Hint: "use admin, operator, viewer or auditor"})
	}
	ttl, tvs := userLifetime(req.GetTtlSeconds())
	vs = append(vs, tvs...)
	if err := checkCSR([]byte(req.GetCsrPem())); err != nil {
		vs = append(vs, apierror.Violation{Field: "csrPem", Message: err.Error()})
	}
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid user", vs...)
	}
	return onLeader(ctx, s, func() (*roostv1.CreateUserResponse, error) {
		return s.issueUser(ctx, req, req.GetName(), role, ttl, []byte(req.GetCsrPem()), true)
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.CreateUserResponse, error) {
		return roostv1.NewHubServiceClient(c).CreateUser(fctx, req)
	})
}

// RenewUser signs the CSR for an existing user, with their role. Errors:
// InvalidArgument (ttl, CSR), NotFound, FailedPrecondition (revoked).
func (s *Server) RenewUser(ctx context.Context, req *roostv1.RenewUserRequest) (*roostv1.CreateUserResponse, error) {
	vs := state.CheckUserName(req.GetName(), "name")
	ttl, tvs := userLifetime(req.GetTtlSeconds())
	vs = append(vs, tvs...)
	if err := checkCSR([]byte(req.GetCsrPem())); err != nil {
		vs = append(vs, apierror.Violation{Field: "csrPem", Message: err.Error()})
	}
	if len(vs) > 0 {
		return nil, apierror.Invalid("invalid renewal", vs...)
	}
	return onLeader(ctx, s, func() (*roostv1.CreateUserResponse, error) {
		u := s.fsm.User(req.GetName())
		if u == nil {
			return nil, apierror.NotFound("User", req.GetName())
		}
		if u.GetRevokedAt() != nil {
			return nil, apierror.FailedPrecondition("user %s was revoked; create a user with another name", req.GetName())
		}
		return s.issueUser(ctx, req, req.GetName(), u.GetRole(), ttl, []byte(req.GetCsrPem()), false)
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.CreateUserResponse, error) {
		return roostv1.NewHubServiceClient(c).RenewUser(fctx, req)
	})
}

// issueUser signs csr for name with role and records the certificate
// (create: a new user). A retry of an applied request (same request ID)
// returns the certificate recorded first.
func (s *Server) issueUser(ctx context.Context, req proto.Message, name, role string, ttl time.Duration, csr []byte, create bool) (*roostv1.CreateUserResponse, error) {
	if err := s.checkUsersRules(); err != nil {
		return nil, err
	}
	authority, err := s.authority()
	if err != nil {
		return nil, err
	}
	certPEM, err := authority.SignCSR(csr, ca.Profile{CommonName: name, Role: role, Lifetime: ttl}, s.now())
	if err != nil {
		return nil, apierror.Invalid(err.Error(), apierror.Violation{Field: "csrPem", Message: err.Error()})
	}
	cert, err := tlsconfig.ParseCertificatePEM(certPEM)
	if err != nil {
		return nil, err
	}
	uc := &roostv1.UserCertificate{Serial: ca.SerialHex(cert), NotBefore: timestamppb.New(cert.NotBefore), NotAfter: timestamppb.New(cert.NotAfter), CertificatePem: string(certPEM)}
	res, err := s.proposeRequest(ctx, req, &roostv1.Command{Command: &roostv1.Command_PutUserCertificate{PutUserCertificate: &roostv1.PutUserCertificate{
		Name: name, Role: role, Certificate: uc, Create: create}}})
	if err != nil {
		return nil, err
	}
	u := s.fsm.User(name)
	certs := u.GetCertificates()
	if len(certs) == 0 {
		return nil, apierror.Unavailable("user %s was not recorded; retry", name)
	}
	if res.Repeated {
		uc = certs[len(certs)-1]
	}
	s.log.Info("user certificate issued", "user", name, "role", tlsconfig.RoleName(role), "serial", uc.GetSerial(), "create", create)
	return &roostv1.CreateUserResponse{User: stripCertificates(u), CertificatePem: uc.GetCertificatePem(), CaPem: string(authority.CertificatePEM())}, nil
}

// stripCertificates returns u without the certificates' PEM, for lists.
func stripCertificates(u *roostv1.User) *roostv1.User {
	u = proto.Clone(u).(*roostv1.User)
	for _, c := range u.GetCertificates() {
		c.CertificatePem = ""
	}
	return u
}

// ListUsers returns the users this member knows, sorted by name, without
// their certificates' PEM.
func (s *Server) ListUsers(ctx context.Context, req *roostv1.ListUsersRequest) (*roostv1.ListUsersResponse, error) {
	users := s.fsm.Users()
	for i, u := range users {
		users[i] = stripCertificates(u)
	}
	return &roostv1.ListUsersResponse{Users: users}, nil
}

// RevokeUser revokes a user: from the moment the revocation is applied,
// every member refuses all of their certificates. Revoking a revoked user
// succeeds and changes nothing. Errors: NotFound.
func (s *Server) RevokeUser(ctx context.Context, req *roostv1.RevokeUserRequest) (*roostv1.RevokeUserResponse, error) {
	if vs := state.CheckUserName(req.GetName(), "name"); len(vs) > 0 {
		return nil, apierror.Invalid("invalid user name", vs...)
	}
	return onLeader(ctx, s, func() (*roostv1.RevokeUserResponse, error) {
		if err := s.checkUsersRules(); err != nil {
			return nil, err
		}
		if _, err := s.proposeRequest(ctx, req, &roostv1.Command{Command: &roostv1.Command_RevokeUser{RevokeUser: &roostv1.RevokeUser{Name: req.GetName()}}}); err != nil {
			return nil, err
		}
		s.log.Info("user revoked", "user", req.GetName())
		return &roostv1.RevokeUserResponse{User: stripCertificates(s.fsm.User(req.GetName()))}, nil
	}, func(c *grpc.ClientConn, fctx context.Context) (*roostv1.RevokeUserResponse, error) {
		return roostv1.NewHubServiceClient(c).RevokeUser(fctx, req)
	})
}

// WhoAmI returns the caller's name, role and certificate.
func (s *Server) WhoAmI(ctx context.Context, _ *roostv1.WhoAmIRequest) (*roostv1.WhoAmIResponse, error) {
	c, _ := callerOf(ctx)
	resp := &roostv1.WhoAmIResponse{Name: c.Name, Role: tlsconfig.RoleName(c.Role), Serial: c.Serial}
	if !c.NotAfter.IsZero() {
		resp.NotAfter = timestamppb.New(c.NotAfter)
	}
	return resp, nil
}

// AuthCheck says whether the caller may do verb on kind: whether their
// role may call every RPC the access table maps verb and kind to.
// Errors: InvalidArgument (no RPC for verb and kind; the message lists the
// verbs of the kind).
func (s *Server) AuthCheck(ctx context.Context, req *roostv1.AuthCheckRequest) (*roostv1.AuthCheckResponse, error) {
	methods := methodsFor(req.GetVerb(), req.GetKind())
	if len(methods) == 0 {
		var verbs []string
		_, err := resource.Lookup(strings.TrimSpace(req.GetKind()))
		for _, a := range accessTable {
			if a.kind == normalKind(req.GetKind()) || a.kind == "*" && err == nil {
				verbs = append(verbs, a.verbs...)
			}
		}
		slices.Sort(verbs)
		hint := "give an object kind (pool, server, …) or one of member, jointoken, token, snapshot, artifact, imagerelease, releasekey, rollout, user"
		if len(verbs) > 0 {
			hint = "verbs on " + normalKind(req.GetKind()) + ": " + strings.Join(slices.Compact(verbs), ", ")
		}
		return nil, apierror.Invalid(fmt.Sprintf("nothing in the hub's access table is %q on %q", req.GetVerb(), req.GetKind()),
			apierror.Violation{Field: "verb", Message: "matches no RPC", Hint: hint})
	}
	c, _ := callerOf(ctx)
	resp := &roostv1.AuthCheckResponse{Allowed: true, Methods: methods}
	for _, m := range methods {
		if a := accessTable[m]; !a.allows(c.Role) {
			resp.Allowed = false
			resp.Reason = fmt.Sprintf("%s needs role %s; you are %s", strings.TrimPrefix(m, hubService), a.roleNames(), tlsconfig.RoleName(c.Role))
			return resp, nil
		}
	}
	resp.Reason = fmt.Sprintf("role %s may call %s", tlsconfig.RoleName(c.Role), strings.Join(trimAll(methods, hubService), ", "))
	return resp, nil
}

func trimAll(ss []string, prefix string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.TrimPrefix(s, prefix)
	}
	return out
}
