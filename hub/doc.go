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
//
// The files, by concern:
//
//	hub.go          the Hub type, its accessors, WaitLeader
//	options.go      Options and their defaults
//	start.go        Start: bind the ports, open Raft, wire the API and serve
//	datadir.go      the data dir's files and its lock
//	joinflags.go    checks of --join, --join-token, --node-id, --raft-log-store
//	cabootstrap.go  the CA and member certificate of a new hub
//	join.go         joining an existing hub: member certificate, AddVoter
//	leadership.go   once per term: CA, member record, admin.conf (leaderLoop)
//	adminconf.go    DIR/admin.conf
//	controllers.go  the controllers and background loops, and running them
//	removed.go      a member removed from the hub; the health watch
//	recover.go      --force-new-cluster
//	damaged.go      a damaged Raft log: exit status, how to recover
//	logverify.go    Raft log verification reports and metrics
//	blobgc.go       the blob garbage collection
//	http.go         /metrics, /healthz and the Raft metrics; virtual media (--media-addr)
//	boot.go         network boot (--boot-addr, hub/netboot) and its URLs
//	gc.go           Go GC tuning (TuneGC)
//	close.go        Close, handing leadership over first
package hub
