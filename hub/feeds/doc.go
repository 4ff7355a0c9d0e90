// Package feeds holds the leader-only controllers of automatic releases:
// the feed controller polls each ReleaseFeed (a tree roost-image publish
// wrote, over HTTPS or in a directory), verifies each new release's
// signature with the trusted keys before anything is stored, copies its
// artifacts into the member's blob store (sha256-checked, resumed where
// an earlier poll stopped) and records it on its channel
// (ImportImageRelease); the promotion controller moves a Channel's
// candidate from the channel it follows once it soaked, no Pool halted on
// it and enough Machines run it Good (PromoteAfterSoak, checked again by
// the FSM). Pools following a channel then roll through the rollout
// machinery as for a pushed release.
package feeds
