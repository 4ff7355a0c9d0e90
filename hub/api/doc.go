// Package api serves the hub's gRPC services: HubService for operators,
// MemberService for hub members and AgentService for the agents on
// Servers (enrollment with a token, certificate renewal, the live stream,
// whose registry and desired-state push live in hub/agentconn). It
// validates requests at the edge (resource.Validate), turns writes into
// Raft commands whose rules the FSM (hub/state) enforces, forwards writes
// and linearizable reads from followers to the leader (forward.go), relays
// a Server's journal and support bundle from the member holding its
// agent's stream (hub_server_data.go),
// authorizes callers by the role in their client certificate, and maps
// errors to gRPC codes in one place (errors.go).
//
// Files are named for the proto service whose RPCs they serve:
// agent_service.go, member_service.go, hub_service.go (objects) and
// hub_<topic>.go for HubService's other RPCs (hub_artifacts.go,
// hub_releases.go, hub_release_keys.go, hub_members.go, ...); helpers are
// in files named for what they do.
package api
