// Package netprofiles holds the NetworkProfile model, its validation with
// field paths, and its idempotent apply through netlink
// (github.com/vishvananda/netlink). The structural checks of the wire form
// live in resource/validate_network.go today; the full model and the apply
// arrive with the network-profiles issue.
package netprofiles
