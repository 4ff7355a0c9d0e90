package api

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/internal/tlsconfig"
)

// Authorization of every call: the caller is the verified client
// certificate (CN, role, serial) or, for a call another member forwarded,
// the original caller that member vouches for (forwarded identity
// metadata, trusted only from member certificates). A certificate of a
// revoked user is refused (state.FSM.CertificateRevoked, one index
// lookup), and the caller's role must be one the access table lists for
// the method (access.go).

// Metadata of a forwarded call naming the original caller.
const (
	callerNameKey   = "x-roost-caller-name"
	callerRoleKey   = "x-roost-caller-role"
	callerSerialKey = "x-roost-caller-serial"
)

// Caller is who made a call, as the hub authorizes it.
type Caller struct {
	// Name is the certificate's CN ("" for a caller without certificate).
	Name string
	// Role is the certificate's role (tlsconfig roles), "" without one.
	Role string
	// Serial is the certificate's serial (ca.SerialHex).
	Serial string
	// NotAfter is when the certificate expires; zero for forwarded
	// callers.
	NotAfter time.Time
	// ForwardedBy is the member that forwarded the call, "" for a direct
	// call.
	ForwardedBy string
}

type callerKey struct{}

// callerOf returns the caller authorize recorded in ctx.
func callerOf(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// peerCaller reads the caller of ctx: its certificate, or the forwarded
// identity when a member forwarded the call with one.
func peerCaller(ctx context.Context) (c Caller, peerRole string) {
	if cert, ok := ca.PeerCertificate(ctx); ok {
		c = Caller{Name: cert.Subject.CommonName, Role: tlsconfig.RoleOf(cert), Serial: ca.SerialHex(cert), NotAfter: cert.NotAfter}
	}
	peerRole = c.Role
	if c.Role != ca.RoleMember || !isForwarded(ctx) {
		return c, peerRole
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get(callerRoleKey)) == 0 {
		return c, peerRole // the member's own call
	}
	return Caller{Name: incoming(ctx, callerNameKey), Role: incoming(ctx, callerRoleKey), Serial: incoming(ctx, callerSerialKey), ForwardedBy: c.Name}, peerRole
}

// withCaller adds the forwarded identity of the caller in ctx to the
// outgoing context fctx of the same call forwarded to the leader.
func withCaller(ctx, fctx context.Context) context.Context {
	c, ok := callerOf(ctx)
	if !ok || c.Role == "" {
		return fctx
	}
	return metadata.AppendToOutgoingContext(fctx, callerNameKey, c.Name, callerRoleKey, c.Role, callerSerialKey, c.Serial)
}

// authorize checks the caller of method against the access table and the
// revoked certificates. Errors: PermissionDenied (no certificate, a role
// the method does not allow, a method missing from the table),
// Unauthenticated (a revoked certificate).
func (s *Server) authorize(ctx context.Context, method string) (Caller, error) {
	a, listed := accessTable[method]
	if !listed {
		return Caller{}, apierror.PermissionDenied("%s is not in the hub's access table", method)
	}
	c, peerRole := peerCaller(ctx)
	if a.public {
		return c, nil
	}
	if c.Role == "" {
		return c, apierror.PermissionDenied("%s needs a client certificate from the hub CA (role %s)", method, a.roleNames())
	}
	if s.fsm != nil && s.fsm.CertificateRevoked(c.Serial) {
		return c, &apierror.Error{Code: codes.Unauthenticated, Message: "the certificate of " + c.Name + " (serial " + c.Serial + ") was revoked ('roostctl user revoke')"}
	}
	// A member calls member methods directly, also when it forwards an
	// agent's call with the agent's identity.
	if a.allows(c.Role) || (peerRole == ca.RoleMember && a.allows(ca.RoleMember)) {
		return c, nil
	}
	return c, apierror.PermissionDenied("%q (role %s) may not call %s: it needs role %s", c.Name, tlsconfig.RoleName(c.Role), method, a.roleNames())
}

// AuthOptions returns the interceptors that record audited calls
// (Config.Audit; also those authorization refuses) and authorize every
// call (authorize); add them to the gRPC server after ServerOptions.
func (s *Server) AuthOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(s.audit.unary, s.unaryAuth), grpc.ChainStreamInterceptor(s.audit.stream, s.streamAuth)}
}

func (s *Server) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	c, err := s.authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(context.WithValue(ctx, callerKey{}, c), req)
}

func (s *Server) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	c, err := s.authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, &callerStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), callerKey{}, c)})
}

// callerStream is a server stream whose context carries the Caller.
type callerStream struct {
	grpc.ServerStream
	ctx context.Context
}

// Context implements grpc.ServerStream.
func (s *callerStream) Context() context.Context { return s.ctx }
