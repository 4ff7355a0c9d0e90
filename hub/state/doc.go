// Package state is the hub's replicated state machine: the Raft FSM that
// applies roostv1.Command log entries to an in-memory database
// (hashicorp/go-memdb), and the read and watch side that the API server and
// the leader's controllers use.
//
// Layout of the state:
//
//   - one table per resource kind (resource.Kinds()), rows are
//     *roostv1.Object envelopes keyed by metadata.name, with an index of the
//     objects each row refers to (e.g. a Pool's Cluster);
//   - the hub CA (a single row), hub members (by id), join tokens (by id);
//   - the last applied Raft index.
//
// Everything Apply does is a pure function of the state and the log entry:
// time comes from Command.time, fresh UIDs from ApplyObjects.uids and
// indexes from the Raft log, so every member computes identical state, and
// identical snapshot bytes. A command is applied in one memdb write
// transaction and either commits completely or changes nothing. Each
// command carries the version of the apply rules it is applied with
// (RulesVersion), so members of different roost-hub versions agree too.
//
// Stored objects are never modified after insert; every read returns a
// clone. Reads are safe for concurrent use with Apply and see a consistent
// point-in-time view.
package state
