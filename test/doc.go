// Package test holds the hub's integration and acceptance tests (test tier
// 2, "root integration" in the design): real roost-hub processes and Raft
// clusters on 127.0.0.1. `make test-root` runs them with the binaries of
// `make build` ($ROOST_BIN); plain `go test ./test/...` builds the binaries
// itself; `go test -short` (make test-unit) skips them.
//
//   - restart_test.go: a single hub keeps every applied object, byte for
//     byte as `roostctl get KIND -o yaml` prints it, across SIGTERM and
//     SIGKILL restarts.
//   - failover_test.go: three hub processes; the leader is killed with
//     SIGKILL in the middle of 500 applies; every acknowledged apply is on
//     both survivors, and the measured write gap is under 5 s.
//   - linearizability_test.go: concurrent writes and linearizable reads
//     against three in-process members with forced leader changes, checked
//     with porcupine for 20 seeds; TestLinearizabilityLeaderKills does the
//     same with leaders killed (Raft stopped at once) and restarted.
//   - imports_test.go and packagedoc_test.go: rules of the house over
//     `go list`: the dependency walls between the binaries, and a doc
//     comment on every package.
//
// Each test prints its figures (t.Logf and standard output, so they show
// under `go test -v` in CI logs). Package harness runs the processes;
// package bench holds the commit benchmarks of `make bench`.
package test
