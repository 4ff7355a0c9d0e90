package api

import (
	"slices"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/roostfleet/roost/hub/ca"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// servedMethods returns the full names of every RPC the hub's gRPC server
// serves, from the services' descriptors.
func servedMethods() []string {
	var out []string
	for _, fd := range []protoreflect.FileDescriptor{roostv1.File_roost_v1_hub_proto, roostv1.File_roost_v1_agent_proto, healthpb.File_grpc_health_v1_health_proto} {
		for i := 0; i < fd.Services().Len(); i++ {
			sd := fd.Services().Get(i)
			for j := 0; j < sd.Methods().Len(); j++ {
				out = append(out, "/"+string(sd.FullName())+"/"+string(sd.Methods().Get(j).Name()))
			}
		}
	}
	return out
}

// TestAccessTableCoversEveryRPC fails when an RPC has no entry in the
// access table (it would be refused to everyone) or an entry names no RPC.
func TestAccessTableCoversEveryRPC(t *testing.T) {
	served := servedMethods()
	for _, m := range served {
		a, ok := accessTable[m]
		if !ok {
			t.Errorf("%s has no entry in accessTable (access.go): say which roles may call it", m)
			continue
		}
		if !a.public && len(a.roles) == 0 {
			t.Errorf("%s: no role may call it", m)
		}
		if a.kind != "" && len(a.verbs) == 0 || a.kind == "" && len(a.verbs) > 0 {
			t.Errorf("%s: kind %q with verbs %q: give both or neither", m, a.kind, a.verbs)
		}
	}
	for m := range accessTable {
		if !slices.Contains(served, m) {
			t.Errorf("accessTable has %s, which no service serves", m)
		}
	}
}

// TestAccessTableRoles pins the rules: viewers read and nothing
// else; operators also assign, cordon, approve, pause, promote and read
// Servers' logs and bundles, but never tokens, users, members or
// snapshots; auditors read and list users; members call only member
// methods directly.
func TestAccessTableRoles(t *testing.T) {
	reads := map[string]bool{"Get": true, "List": true, "Watch": true, "ListMembers": true, "StatArtifact": true, "ListTrustedKeys": true, "WhoAmI": true, "AuthCheck": true}
	// a Server's logs and bundle may hold secrets: operators, not viewers
	operations := map[string]bool{"UpdateServer": true, "AssignServers": true, "UnassignServers": true, "CreateMachine": true, "PromoteImageRelease": true, "RolloutControl": true,
		"ReadServerLogs": true, "CollectServerBundle": true}
	sd := roostv1.File_roost_v1_hub_proto.Services().ByName("HubService")
	for j := 0; j < sd.Methods().Len(); j++ {
		name := string(sd.Methods().Get(j).Name())
		a := accessTable[hubService+name]
		if !a.allows(ca.RoleAdmin) {
			t.Errorf("admin may not call %s", name)
		}
		if got := a.allows(ca.RoleViewer); got != reads[name] {
			t.Errorf("viewer may call %s: %v, want %v", name, got, reads[name])
		}
		if got, want := a.allows(ca.RoleOperator), reads[name] || operations[name]; got != want {
			t.Errorf("operator may call %s: %v, want %v", name, got, want)
		}
		if got, want := a.allows(ca.RoleAuditor), reads[name] || name == "ListUsers" || name == "ReadAudit"; got != want {
			t.Errorf("auditor may call %s: %v, want %v", name, got, want)
		}
		if a.allows(ca.RoleAgent) != (name == "WhoAmI" || name == "AuthCheck") {
			t.Errorf("agent may call %s: %v", name, a.allows(ca.RoleAgent))
		}
	}
}

func TestMethodsFor(t *testing.T) {
	for _, c := range []struct {
		verb, kind string
		want       []string
	}{
		{"get", "pools", []string{hubService + "Get"}},
		{"delete", "Pool", []string{hubService + "Delete"}},
		{"create", "token", []string{hubService + "CreateEnrollmentToken"}},
		{"pause", "rollout", []string{hubService + "RolloutControl"}},
		{"create", "users", []string{hubService + "CreateUser"}},
		{"assign", "server", []string{hubService + "AssignServers"}},
		{"delete", "server", []string{hubService + "Delete"}},
		{"fly", "pool", nil},
		{"get", "nonsense", nil},
	} {
		if got := methodsFor(c.verb, c.kind); !slices.Equal(got, c.want) {
			t.Errorf("methodsFor(%q, %q) = %q, want %q", c.verb, c.kind, got, c.want)
		}
	}
}
