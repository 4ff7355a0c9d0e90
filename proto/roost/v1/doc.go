// Package roostv1 is the Go code generated from the roost.v1 protobuf
// package (`make generate`: buf with pinned protoc-gen-go and
// protoc-gen-go-grpc): the resources (resources.proto, meta.proto), the
// operators' HubService and the members' MemberService (hub.proto), the
// agents' AgentService (agent.proto) and the typed commands of the Raft
// log (raft.proto). Everything but this file is generated; edit the
// .proto files.
package roostv1
