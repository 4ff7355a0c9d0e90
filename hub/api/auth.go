package api

import (
	"context"
	"strings"

	"google.golang.org/grpc"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/ca"
)

// allowedRoles says which certificate roles may call a method. Methods not
// listed need RoleAdmin or RoleMember (members forward operators' calls).
var allowedRoles = map[string][]string{
	"/roost.v1.MemberService/Join":     nil, // token-authenticated, no certificate yet
	"/roost.v1.MemberService/AddVoter": {ca.RoleMember},
	// Agents enroll with a token (or a follower forwards the call with its
	// member certificate); after that they use their agent certificate.
	"/roost.v1.AgentService/Enroll":               nil,
	"/roost.v1.AgentService/RenewCertificate":     {ca.RoleAgent},
	"/roost.v1.AgentService/Connect":              {ca.RoleAgent},
	"/roost.v1.AgentService/AcquireLease":         {ca.RoleAgent, ca.RoleMember},
	"/roost.v1.AgentService/Reregister":           {ca.RoleAgent, ca.RoleMember},
	"/roost.v1.AgentService/FetchArtifact":        {ca.RoleAgent, ca.RoleAdmin},
	"/roost.v1.MemberService/ReportSeen":          {ca.RoleMember},
	"/roost.v1.MemberService/ForwardServerStatus": {ca.RoleMember},
	"/roost.v1.MemberService/FetchBlob":           {ca.RoleMember},
	"/roost.v1.MemberService/UpdateMember":        {ca.RoleMember},
	// The standard gRPC health service, for members' probes (ListMembers)
	// and load balancers: it tells only whether the member can serve.
	"/grpc.health.v1.Health/Check": nil,
	"/grpc.health.v1.Health/Watch": nil,
	"/grpc.health.v1.Health/List":  nil,
}

func authorize(ctx context.Context, method string) error {
	roles, listed := allowedRoles[method]
	if listed && roles == nil {
		return nil
	}
	if !listed {
		roles = []string{ca.RoleAdmin, ca.RoleMember}
	}
	role, cn, ok := ca.PeerRole(ctx)
	if !ok {
		return apierror.PermissionDenied("%s needs a client certificate from the hub CA (role %s)", method, strings.Join(roles, " or "))
	}
	for _, r := range roles {
		if r == role {
			return nil
		}
	}
	return apierror.PermissionDenied("%q (role %q) may not call %s", cn, role, method)
}

func unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := authorize(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := authorize(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}
