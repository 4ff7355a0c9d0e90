// Package hub assembles one hub member: the replicated state (hub/state)
// under Raft (hub/raftnode), the gRPC API (hub/api) over TLS, and the HTTP
// endpoints /metrics and /healthz. It owns the member's data directory:
//
//	DIR/node-id          the member's Raft server ID
//	DIR/tls/ca.crt       the hub CA certificate
//	DIR/tls/member.crt   this member's certificate (role roost:members)
//	DIR/tls/member.key   its private key
//	DIR/raft/            Raft log store and snapshots
//	DIR/blobs/           this member's image artifacts (hub/blobs; not replicated)
//	DIR/admin.conf       written once, when the first member bootstraps
//	DIR/joined           written when a joining member was added as a voter
//
// An empty DIR without a join address bootstraps a new single-member
// cluster; with one, the member joins an existing cluster using a join
// token; a DIR with Raft state restarts the member as it was.
package hub
