// Package resource knows Roost's resource kinds: their names (singular,
// plural, short, as kubectl accepts them), how to wrap and unwrap them in the
// roostv1.Object envelope, how to read them from YAML manifests with field
// paths and line numbers, and how to validate them. Printing them for people (`roostctl get` tables,
// `roostctl describe`) is cli/printers'.
//
// It is shared by the hub (authoritative validation), roostctl (validation
// at the edge with YAML positions) and tests. It does not talk to the network.
//
// # Files
//
//   - kinds.go: the kind registry (Lookup, Wrap, Unwrap).
//   - codec.go: Decode, YAML manifests → objects with positions.
//   - encode.go: Encode, objects → YAML or JSON manifests.
//   - validate*.go: Validate (one object, per kind) and ValidateManifests
//     (a whole apply, with source positions).
//   - selector.go: MachineClass server selector terms.
//   - diagnostic.go: Diagnostic and FormatViolations.
//   - tokens.go: token lifetimes and TokenState.
//
// # Field paths
//
// Every field path in this package (Manifest.Positions, the violations of
// Validate, Diagnostics) uses manifest names, the JSON lowerCamel names of
// the proto fields, joined with dots, with list indexes and map keys in
// square brackets:
//
//	metadata.name
//	spec.rollout.maxUnavailable
//	spec.bonds[0].members[1]
//	metadata.labels[roost.io/rack]
//
// Map keys are written bare (not quoted) inside the brackets, as
// Kubernetes' field.Path does; label keys hold dots and slashes, so a dotted
// form would be ambiguous. The empty path "" is the object itself.
//
// # Typical use
//
//	ms, err := resource.Decode(data, "pool.yaml", resource.ForApply())
//	if err != nil { ... }                        // resource.Diagnostics: print err
//	if ds := resource.ValidateManifests(ms); len(ds) > 0 {
//		fmt.Fprint(os.Stderr, resource.FormatViolations(ds))
//	}
//	// pool.yaml:12:5: Pool "workers": spec.rollout.maxUnavailable: must be ≥ 1, got 0 (...)
package resource
