// Package raftnode runs one member of the hub's Raft cluster
// (github.com/hashicorp/raft): the durable log store (raft-wal or
// raft-boltdb/v2), file snapshots, and a Raft transport over mutual TLS with
// member certificates from the hub CA. It knows nothing of the API; it
// proposes commands and exposes leadership and membership.
package raftnode
