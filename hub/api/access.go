package api

import (
	"slices"
	"sort"
	"strings"

	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/internal/tlsconfig"
	"github.com/roostfleet/roost/resource"
)

// The access table: for every RPC of the hub's gRPC server, which roles may
// call it, and the verb and kind `roostctl auth can-i` names it by. A
// method missing from the table is refused (TestAccessTableCoversEveryRPC
// fails first).

// access is what one RPC needs.
type access struct {
	// public methods need no certificate (token-authenticated or health).
	public bool
	// roles may call the method. A member certificate calls a method whose
	// roles hold RoleMember directly; any other method it calls only as a
	// forwarded call, authorized by the original caller's role.
	roles []string
	// verbs and kind name the method for AuthCheck (roostctl auth can-i);
	// kind "*" is any object kind. Empty for internal methods.
	verbs []string
	kind  string
	// secret is set for reads that return secrets: they are audited.
	secret bool
}

// Role groups of people.
var (
	admins    = []string{ca.RoleAdmin}
	operators = []string{ca.RoleAdmin, ca.RoleOperator}
	readers   = []string{ca.RoleAdmin, ca.RoleOperator, ca.RoleViewer, ca.RoleAuditor}
	// userAdmins may list users and read the audit log: admins, and
	// auditors, who check who may do what and who did what.
	userAdmins = []string{ca.RoleAdmin, ca.RoleAuditor}
	// anyone is every role with a certificate.
	anyone = []string{ca.RoleAdmin, ca.RoleOperator, ca.RoleViewer, ca.RoleAuditor, ca.RoleMember, ca.RoleAgent}
)

func people(roles []string, kind string, verbs ...string) access {
	return access{roles: roles, verbs: verbs, kind: kind}
}

func secretRead(a access) access {
	a.secret = true
	return a
}

func internalFor(roles ...string) access { return access{roles: roles} }

const (
	hubService    = "/roost.v1.HubService/"
	memberService = "/roost.v1.MemberService/"
	agentService  = "/roost.v1.AgentService/"
)

// accessTable maps full method names to what they need.
var accessTable = map[string]access{
	// Objects: everyone reads (write-only secrets never leave the hub);
	// only admins write specs.
	hubService + "Apply":  people(admins, "*", "apply", "create", "update"),
	hubService + "Get":    people(readers, "*", "get"),
	hubService + "List":   people(readers, "*", "list"),
	hubService + "Watch":  people(readers, "*", "watch"),
	hubService + "Delete": people(admins, "*", "delete"),
	// Members, join tokens and snapshots (which hold the CA key): admins.
	hubService + "ListMembers":      people(readers, "member", "list", "get"),
	hubService + "CreateJoinToken":  people(admins, "jointoken", "create"),
	hubService + "ListJoinTokens":   people(admins, "jointoken", "list"),
	hubService + "RevokeJoinTokens": people(admins, "jointoken", "revoke", "delete"),
	hubService + "RemoveMember":     people(admins, "member", "delete", "remove"),
	hubService + "SaveSnapshot":     secretRead(people(admins, "snapshot", "save", "get")),
	hubService + "RestoreSnapshot":  people(admins, "snapshot", "restore"),
	// Enrollment tokens: admins.
	hubService + "CreateEnrollmentToken": people(admins, "token", "create"),
	hubService + "RevokeEnrollmentToken": people(admins, "token", "revoke", "delete"),
	// Day-2 operations: operators.
	hubService + "UpdateServer":        people(operators, "server", "update", "cordon", "uncordon", "approve", "deny", "label", "power", "boot", "provision"),
	hubService + "RegisterServer":      people(admins, "server", "register", "create"),
	hubService + "AssignServers":       people(operators, "server", "assign"),
	hubService + "UnassignServers":     people(operators, "server", "unassign"),
	hubService + "CreateMachine":       people(operators, "machine", "create"),
	hubService + "PromoteImageRelease": people(operators, "imagerelease", "promote"),
	hubService + "RolloutControl":      people(operators, "rollout", "pause", "resume", "abort", "undo", "pin"),
	// A Server's journal and support bundle may hold secrets (a unit that
	// logs its environment, a kubelet printing a token, Ignition's
	// config): operators and admins only, audited as reads of secrets.
	hubService + "ReadServerLogs":      secretRead(people(operators, "server", "logs")),
	hubService + "CollectServerBundle": secretRead(people(operators, "server", "bundle")),
	// Images and release keys.
	hubService + "PushArtifact":      people(admins, "artifact", "push", "create"),
	hubService + "StatArtifact":      people(readers, "artifact", "get"),
	hubService + "PutImageRelease":   people(admins, "imagerelease", "push", "create"),
	hubService + "TrustReleaseKey":   people(admins, "releasekey", "trust", "create"),
	hubService + "UntrustReleaseKey": people(admins, "releasekey", "untrust", "delete"),
	hubService + "ListTrustedKeys":   people(readers, "releasekey", "list"),
	// Users: admins; auditors list them.
	hubService + "CreateUser": people(admins, "user", "create"),
	hubService + "RenewUser":  people(admins, "user", "renew"),
	hubService + "ListUsers":  people(userAdmins, "user", "list"),
	hubService + "RevokeUser": people(admins, "user", "revoke", "delete"),
	// The audit log: admins and auditors.
	hubService + "ReadAudit": people(userAdmins, "audit", "get", "list", "read"),
	// About the caller: anyone with a certificate.
	hubService + "WhoAmI":    people(anyone, "self", "whoami"),
	hubService + "AuthCheck": people(anyone, "self", "check"),

	// Members among themselves. Join is token-authenticated (no
	// certificate yet).
	memberService + "Join":                {public: true},
	memberService + "AddVoter":            internalFor(ca.RoleMember),
	memberService + "ReportSeen":          internalFor(ca.RoleMember),
	memberService + "ForwardServerStatus": internalFor(ca.RoleMember),
	memberService + "FetchBlob":           internalFor(ca.RoleMember),
	memberService + "UpdateMember":        internalFor(ca.RoleMember),

	// Agents enroll with a token (or a follower forwards the call with its
	// member certificate); after that they use their agent certificate.
	agentService + "Enroll":           {public: true},
	agentService + "RenewCertificate": internalFor(ca.RoleAgent),
	agentService + "Connect":          internalFor(ca.RoleAgent),
	agentService + "AcquireLease":     internalFor(ca.RoleAgent, ca.RoleMember),
	agentService + "Reregister":       internalFor(ca.RoleAgent, ca.RoleMember),
	agentService + "FetchArtifact":    internalFor(ca.RoleAgent, ca.RoleAdmin),

	// The standard gRPC health service, for members' probes (ListMembers)
	// and load balancers: it tells only whether the member can serve.
	"/grpc.health.v1.Health/Check": {public: true},
	"/grpc.health.v1.Health/Watch": {public: true},
	"/grpc.health.v1.Health/List":  {public: true},
}

// allows says whether role may call a method needing a.
func (a access) allows(role string) bool {
	return a.public || slices.Contains(a.roles, role)
}

// roleNames returns the short names of a's roles ("admin or operator").
func (a access) roleNames() string {
	names := make([]string, len(a.roles))
	for i, r := range a.roles {
		names[i] = tlsconfig.RoleName(r)
	}
	return strings.Join(names, " or ")
}

// normalKind folds the kind of an AuthCheck: lower case, no "-" or "_",
// singular ("Pools", "image-release" → "pool", "imagerelease").
func normalKind(kind string) string {
	k := strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(strings.TrimSpace(kind)))
	if strings.HasSuffix(k, "s") && k != "status" {
		k = strings.TrimSuffix(k, "s")
	}
	return k
}

// methodsFor returns the methods verb on kind maps to, sorted: those
// naming the kind itself, or, when none does and kind is an object kind
// (resource.Lookup: names, plurals, short names), those for any object
// kind ("*").
func methodsFor(verb, kind string) []string {
	_, err := resource.Lookup(strings.TrimSpace(kind))
	isObject := err == nil
	verb, kind = strings.ToLower(strings.TrimSpace(verb)), normalKind(kind)
	var exact, objects []string
	for m, a := range accessTable {
		if !slices.Contains(a.verbs, verb) {
			continue
		}
		if a.kind == kind {
			exact = append(exact, m)
		} else if a.kind == "*" && isObject {
			objects = append(objects, m)
		}
	}
	if len(exact) == 0 {
		exact = objects
	}
	sort.Strings(exact)
	return exact
}
