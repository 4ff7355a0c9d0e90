// Package printers writes Roost objects for people, as roostctl shows
// them: PrintTable and TableRow for `roostctl get` (kubectl-like tables,
// with -o wide columns), Describe for `roostctl describe`, and the cells
// both share (a Server's state, reachability, last-seen time and pool, a
// Machine's reason and revision, a MaintenanceWindow's next opening).
//
// Only the CLI links it: the hub and the agent work on the objects
// (package resource) and never print them this way, which
// test/imports_test.go enforces.
//
// # Files
//
//   - table.go: the columns per kind, PrintTable, TableRow and the cells.
//   - describe.go: Describe, found by reflection over the proto.
//   - window_next.go: a MaintenanceWindow's next opening (window package).
package printers
