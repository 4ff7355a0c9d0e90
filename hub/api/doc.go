// Package api serves the hub's gRPC services: HubService for operators,
// MemberService for hub members and AgentService for the agents on
// Servers (enrollment with a token, certificate renewal, the live stream;
// see agent_service.go). It validates requests at the edge
// (resource.Validate), turns writes into Raft commands, forwards writes and
// linearizable reads from followers to the leader, authorizes callers by the
// role in their client certificate, and maps errors to gRPC codes in one
// place (errors.go).
package api
