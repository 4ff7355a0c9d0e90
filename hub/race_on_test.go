//go:build race

package hub_test

// raceEnabled: the race detector is on, and its shadow memory makes RSS
// no measure of what the hub holds.
const raceEnabled = true
