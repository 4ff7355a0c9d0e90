package api_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/hub"
	"github.com/roostfleet/roost/hub/ca"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// createUser creates a user through conn and returns a client
// configuration with their certificate.
func createUser(t *testing.T, conn *grpc.ClientConn, name, role string) *client.Config {
	t.Helper()
	csr, key, err := ca.NewCSR(name)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := roostv1.NewHubServiceClient(conn).CreateUser(context.Background(), &roostv1.CreateUserRequest{Name: name, Role: role, CsrPem: string(csr)})
	if err != nil {
		t.Fatalf("create user %s: %v", name, err)
	}
	return &client.Config{CertificateAuthority: resp.GetCaPem(), ClientCertificate: resp.GetCertificatePem(), ClientKey: string(key)}
}

// memberConfig is a client configuration with a member certificate from
// the hub CA, as a member (or whoever stole its key) calls with.
func memberConfig(t *testing.T, h *hub.Hub) *client.Config {
	t.Helper()
	authority, err := ca.Load(h.FSM().CA())
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := authority.Issue(ca.Profile{CommonName: "hub-x", Role: ca.RoleMember, Lifetime: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &client.Config{CertificateAuthority: string(authority.CertificatePEM()), ClientCertificate: string(cert), ClientKey: string(key)}
}

func dialAs(t *testing.T, cfg *client.Config, addr string) *grpc.ClientConn {
	t.Helper()
	c, err := client.Dial(context.Background(), cfg, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// call invokes method with an empty request (a stream: sends it, if the
// client streams, closes and reads once) and returns the status code.
func call(ctx context.Context, conn *grpc.ClientConn, md protoreflect.MethodDescriptor) codes.Code {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	name := "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
	in, out := dynamicpb.NewMessage(md.Input()), dynamicpb.NewMessage(md.Output())
	if !md.IsStreamingClient() && !md.IsStreamingServer() {
		return status.Code(conn.Invoke(ctx, name, in, out))
	}
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: md.IsStreamingClient(), ServerStreams: md.IsStreamingServer()}, name)
	if err != nil {
		return status.Code(err)
	}
	if !md.IsStreamingClient() {
		if err := s.SendMsg(in); err != nil {
			return status.Code(err)
		}
	}
	if err := s.CloseSend(); err != nil {
		return status.Code(err)
	}
	return status.Code(s.RecvMsg(out))
}

// TestRolesEveryRPC calls every HubService RPC as each role, through a
// follower (which forwards writes to the leader with the caller's
// identity): a role the access table refuses gets PermissionDenied, any
// other gets past authorization. A member certificate calls no HubService
// RPC directly; a revoked user is refused by all three members within a
// second.
func TestRolesEveryRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three hub members")
	}
	hubs, conns := threeMembers(t)
	var follower int
	for i, h := range hubs {
		if !h.Node().IsLeader() {
			follower = i
		}
	}
	roles := map[string]*client.Config{}
	for _, r := range []string{"admin", "operator", "viewer", "auditor"} {
		roles[r] = createUser(t, conns[0], "a-"+r, r)
	}
	roles["member"] = memberConfig(t, hubs[0])
	allowed := func(role, method string) bool {
		reads := map[string]bool{"Get": true, "List": true, "Watch": true, "ListMembers": true, "StatArtifact": true, "ListTrustedKeys": true, "WhoAmI": true, "AuthCheck": true}
		ops := map[string]bool{"UpdateServer": true, "AssignServers": true, "UnassignServers": true, "CreateMachine": true, "PromoteImageRelease": true, "RolloutControl": true,
			"ReadServerLogs": true, "CollectServerBundle": true}
		switch role {
		case "admin":
			return true
		case "operator":
			return reads[method] || ops[method]
		case "viewer":
			return reads[method]
		case "auditor":
			return reads[method] || method == "ListUsers" || method == "ReadAudit"
		default: // a member: only about itself
			return method == "WhoAmI" || method == "AuthCheck"
		}
	}
	sd := roostv1.File_roost_v1_hub_proto.Services().ByName("HubService")
	for role, cfg := range roles {
		conn := dialAs(t, cfg, hubs[follower].APIAddr())
		for j := 0; j < sd.Methods().Len(); j++ {
			md := sd.Methods().Get(j)
			code := call(context.Background(), conn, md)
			if denied := code == codes.PermissionDenied; denied == allowed(role, string(md.Name())) {
				t.Errorf("%s calling %s through a follower: code %v, want allowed=%v", role, md.Name(), code, allowed(role, string(md.Name())))
			}
		}
	}

	// Forwarded identity counts only from member certificates: a viewer
	// claiming to forward an admin's call stays a viewer.
	viewer := roostv1.NewHubServiceClient(dialAs(t, roles["viewer"], hubs[follower].APIAddr()))
	forged := metadata.AppendToOutgoingContext(context.Background(), "x-roost-forwarded", "hub-a", "x-roost-caller-name", "admin", "x-roost-caller-role", ca.RoleAdmin)
	if _, err := viewer.CreateJoinToken(forged, &roostv1.CreateJoinTokenRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("viewer with forged forwarded identity: %v, want PermissionDenied", err)
	}
	if who, err := viewer.WhoAmI(context.Background(), &roostv1.WhoAmIRequest{}); err != nil || who.GetName() != "a-viewer" || who.GetRole() != "viewer" {
		t.Errorf("WhoAmI = %v, %v; want a-viewer, viewer", who, err)
	}
	if can, err := viewer.AuthCheck(context.Background(), &roostv1.AuthCheckRequest{Verb: "pause", Kind: "rollout"}); err != nil || can.GetAllowed() {
		t.Errorf("viewer can-i pause rollout = %v, %v; want not allowed", can, err)
	}

	// Revocation: refused by every member within a second.
	ops := createUser(t, conns[0], "ops", "operator")
	var clients []roostv1.HubServiceClient
	for _, h := range hubs {
		c := roostv1.NewHubServiceClient(dialAs(t, ops, h.APIAddr()))
		if _, err := c.List(context.Background(), &roostv1.ListRequest{Kind: "Pool"}); err != nil {
			t.Fatalf("ops lists pools on %s before the revocation: %v", h.APIAddr(), err)
		}
		clients = append(clients, c)
	}
	if _, err := roostv1.NewHubServiceClient(conns[follower]).RevokeUser(context.Background(), &roostv1.RevokeUserRequest{Name: "ops"}); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	for i, c := range clients {
		for {
			// WhoAmI is served by the member itself, never forwarded.
			_, err := c.WhoAmI(context.Background(), &roostv1.WhoAmIRequest{})
			if status.Code(err) == codes.Unauthenticated {
				break
			}
			if time.Since(revoked) > time.Second {
				t.Fatalf("member %d still serves the revoked user a second after the revocation: %v", i, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	users, err := roostv1.NewHubServiceClient(conns[follower]).ListUsers(context.Background(), &roostv1.ListUsersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(users.GetUsers()); n != 5 {
		t.Errorf("ListUsers lists %d users, want 5: %v", n, users.GetUsers())
	}
	for _, u := range users.GetUsers() {
		if (u.GetRevokedAt() != nil) != (u.GetName() == "ops") {
			t.Errorf("user %s revoked_at %v", u.GetName(), u.GetRevokedAt())
		}
	}
}
