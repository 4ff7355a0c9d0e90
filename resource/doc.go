// Package resource knows Roost's resource kinds: their names (singular,
// plural, short, as kubectl accepts them), how to wrap and unwrap them in the
// roostv1.Object envelope, how to read them from YAML manifests with field
// paths and line numbers, how to validate them, and how to print them.
//
// It is shared by the hub (authoritative validation), roostctl (validation
// at the edge with YAML positions) and tests. It does not talk to the network.
package resource
