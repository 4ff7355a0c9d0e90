package hub

import (
	"os"
	"runtime/debug"

	"github.com/bytedance/gopkg/util/gctuner"
)

// DefaultGCPercent is roost-hub's GOGC once its heap is large, unless $GOGC
// is set (see TuneGC). The hub's heap is mostly long-lived (every agent's
// connection, the fleet's records), and Go's default of 100 lets garbage
// grow to as much again before a collection: at 10,000 agents that
// headroom was the largest part of the hub's RSS per agent. At 25 a
// collection runs after a quarter as much: about 65 instead of 90 KiB of
// RSS per agent at 10,000 agents, for about a fifth of a core more GC work
// there (`make bench` reports both; BenchmarkAgents runs its bare gRPC
// server with it too).
const DefaultGCPercent = 25

// GCHeapFloor is the heap size (bytes in use) below which TuneGC lets
// garbage grow up to it before a collection, instead of DefaultGCPercent
// of the heap. On a small heap 25 % is a few MiB: every write allocates
// (the FSM copies memdb's tree paths on every member), so collections ran
// back to back and, on 3 members writing, took most of the hub's CPU per
// commit (make bench, BenchmarkCommit: about 3× the CPU per commit at 256
// clients). A hub's heap reaches the floor at a few thousand agents;
// above it the RSS per agent is DefaultGCPercent's.
const GCHeapFloor = 256 << 20

// maxGCPercent caps the GC percent TuneGC sets on a tiny heap.
const maxGCPercent = 1000

// TuneGC sets roost-hub's garbage collection unless $GOGC is set: after
// every collection, the GC percent becomes what lets the heap grow to
// GCHeapFloor bytes (at most 1000 %), and DefaultGCPercent once the heap
// in use is near or above the floor.
func TuneGC() {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(DefaultGCPercent)
	gctuner.SetMinGCPercent(DefaultGCPercent)
	gctuner.SetMaxGCPercent(maxGCPercent)
	gctuner.Tuning(GCHeapFloor)
}
